"""Inside the worker: a seccomp-BPF filter, enforced by the kernel, on the system calls student code may make.

Python audit hooks (and guard.py) are not a sandbox: student code reaches the
kernel without passing any hook through ctypes, a C extension or a fresh
interpreter it starts. A seccomp filter is checked by the kernel on every
system call of every thread, cannot be removed once installed, and is
inherited by every child and across exec. The worker installs it right before
student code runs. It refuses:

- the network: socket() for any family but AF_UNIX (EACCES), and io_uring
  (ENOSYS), which can open sockets without calling socket();
- signalling or tracing the grader and its ancestors (EPERM): kill, tgkill,
  rt_sigqueueinfo, rt_tgsigqueueinfo and pidfd_open aimed at a protected pid;
  kill of a protected process group or of every process (-1); tkill, which
  names a bare thread id; pidfd_send_signal, whose pidfd may come from opening
  /proc/PID, which the filter cannot see; ptrace and process_vm_readv/writev.
  Seccomp applies whatever the uid, so this holds for root too;
- leaving the worker's process tree: prctl(PR_SET_CHILD_SUBREAPER) (EPERM),
  which would let an orphan escape the worker that stays its subreaper;
- new namespaces, mounts and chroot (EPERM): unshare, setns, clone with a
  CLONE_NEW* flag, mount, umount2, pivot_root, chroot; clone3 (ENOSYS: its
  flags sit behind a pointer the filter cannot read, and glibc falls back to
  clone); and bpf, perf_event_open, userfaultfd and the key syscalls;
- running another program (EPERM): execve and execveat. A fresh interpreter
  would run code no scan read, with none of the worker's guard, operator
  refusals or audit hooks (a child `python -c "import torch ..."` computing
  backprop); a forked child is a copy of the worker, walls and all;
- any other system-call ABI (ENOSYS): i386 calls through int 0x80, whose
  socketcall would dodge the socket rule, and x32 calls.

Everything else is allowed. Only the standard library is used (ctypes, struct):
the worker may block imports, and libseccomp is no dependency.
"""
from __future__ import annotations

import ctypes
import errno
import operator
import os
import platform
import struct


class SeccompUnavailable(Exception):
    """Why the filter could not be installed (the reason is the message)."""


# ---- the kernel's side -------------------------------------------------------

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1  # put every thread of the process under the filter, not just the caller

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000  # fail the call with the errno in the low 16 bits

# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; },
# little-endian on both architectures, so the low 32 bits of args[i] are at 16 + 8 * i.
NR_OFFSET = 0
ARCH_OFFSET = 4
ARGS_OFFSET = 16

# Classic BPF, the only kind seccomp runs: one accumulator A, jumps only forward.
BPF_LD_W_ABS = 0x20  # A = the 32-bit word of seccomp_data at offset k
BPF_JEQ = 0x15  # jump jt ahead if A == k, else jf ahead
BPF_JGE = 0x35  # jump jt ahead if A >= k (unsigned), else jf ahead
BPF_JSET = 0x45  # jump jt ahead if A & k, else jf ahead
BPF_RET = 0x06  # return k (the action)
MAX_JUMP = 255  # jt and jf are one byte

AF_UNIX = 1
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15  # fcntl: have the kernel signal a chosen process on I/O
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902  # the same through ioctl
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEW_ANY = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)  # CLONE_NEWTIME (0x80) shares its bit with the exit signal in clone(); only unshare and clone3 take it
X32_SYSCALL_BIT = 0x40000000  # x32 calls carry the x86_64 arch but set this bit in nr

# platform.machine() -> (AUDIT_ARCH_*, syscall numbers). x86_64 numbers are from
# arch/x86/entry/syscalls/syscall_64.tbl, aarch64 ones from the generic table,
# include/uapi/asm-generic/unistd.h.
ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "seccomp": 317,
            "socket": 41,
            "fcntl": 72,
            "ioctl": 16,
            "prctl": 157,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "kill": 62,
            "tgkill": 234,
            "rt_sigqueueinfo": 129,
            "rt_tgsigqueueinfo": 297,
            "pidfd_open": 434,
            "tkill": 200,
            "pidfd_send_signal": 424,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "clone": 56,
            "clone3": 435,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "execve": 59,
            "execveat": 322,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "seccomp": 277,
            "socket": 198,
            "fcntl": 25,
            "ioctl": 29,
            "prctl": 167,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "kill": 129,
            "tgkill": 131,
            "rt_sigqueueinfo": 138,
            "rt_tgsigqueueinfo": 240,
            "pidfd_open": 434,
            "tkill": 130,
            "pidfd_send_signal": 424,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "clone": 220,
            "clone3": 435,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "execve": 221,
            "execveat": 281,
        },
    ),
}


# ---- building the program ----------------------------------------------------
# The program checks the arch, loads nr, then holds one block per filtered
# system call: `if nr == N` falls into the block, otherwise jumps over it. Every
# block ends each of its paths in a return, so the accumulator it overwrites
# with an argument never reaches the next block's test.


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    if not (0 <= jt <= MAX_JUMP and 0 <= jf <= MAX_JUMP):
        raise SeccompUnavailable("the filter has too many protected ids for a BPF jump")
    return struct.pack("<HBBI", code, jt, jf, k)  # struct sock_filter


def _load_arg(index: int) -> bytes:
    return _insn(BPF_LD_W_ABS, ARGS_OFFSET + 8 * index)  # the low half of args[index]


def _ret(action: int) -> bytes:
    return _insn(BPF_RET, action)


def _fail(err: int) -> bytes:
    return _ret(SECCOMP_RET_ERRNO | err)


def deny(err: int) -> list[bytes]:
    """Fail every call."""
    return [_fail(err)]


def allow_only_if_arg(index: int, value: int, err: int) -> list[bytes]:
    """Fail unless the low 32 bits of argument `index` are `value`."""
    return [_load_arg(index), _insn(BPF_JEQ, value, 0, 1), _ret(SECCOMP_RET_ALLOW), _fail(err)]


def deny_if_arg_in(index: int, values: list[int], err: int) -> list[bytes]:
    """Fail when the low 32 bits of argument `index` (a pid_t, a command number) are one of `values`."""
    words = sorted({v & 0xFFFFFFFF for v in values})  # a negative pid_t as the kernel sees its 32 bits
    tests = [_insn(BPF_JEQ, w, len(words) - i, 0) for i, w in enumerate(words)]  # jt lands on the _fail
    return [_load_arg(index), *tests, _ret(SECCOMP_RET_ALLOW), _fail(err)]


def deny_if_arg_has_bits(index: int, mask: int, err: int) -> list[bytes]:
    """Fail when argument `index` has any bit of `mask` (all in its low 32 bits)."""
    return [_load_arg(index), _insn(BPF_JSET, mask, 1, 0), _ret(SECCOMP_RET_ALLOW), _fail(err)]


def rules(protected_pids: list[int], protected_pgids: list[int]) -> list[tuple[str, list[bytes]]]:
    """(system call, block) for every filtered call; all others are allowed."""
    kill_targets = [*protected_pids, *(-g for g in protected_pgids), -1]  # kill(-1) reaches every process of the uid
    by_tgid = ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")  # a negative tgid matches no process
    # tkill names a bare thread id and pidfd_send_signal a pidfd, perhaps of an open /proc/PID:
    # neither says which process it reaches in a form the filter can compare.
    always_eperm = (
        "tkill", "pidfd_send_signal", "ptrace", "process_vm_readv", "process_vm_writev",
        "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
        "bpf", "perf_event_open", "userfaultfd", "add_key", "request_key", "keyctl", "execve", "execveat",
    )  # fmt: skip
    always_enosys = ("io_uring_setup", "io_uring_enter", "io_uring_register", "clone3")
    return [
        ("socket", allow_only_if_arg(0, AF_UNIX, errno.EACCES)),
        ("kill", deny_if_arg_in(0, kill_targets, errno.EPERM)),
        # an I/O owner is signalled by the kernel on the owner-setter's behalf: a grader pid there is a kill
        ("fcntl", deny_if_arg_in(1, [F_SETOWN, F_SETSIG, F_SETOWN_EX], errno.EPERM)),
        ("ioctl", deny_if_arg_in(1, [FIOSETOWN, SIOCSPGRP], errno.EPERM)),
        # the worker is its processes' subreaper (worker.py): with that undone, an orphan would leave its tree
        ("prctl", deny_if_arg_in(0, [PR_SET_CHILD_SUBREAPER], errno.EPERM)),
        *((name, deny_if_arg_in(0, protected_pids, errno.EPERM)) for name in by_tgid),
        ("clone", deny_if_arg_has_bits(0, CLONE_NEW_ANY, errno.EPERM)),  # flags are arg0 on x86_64 and aarch64
        *((name, deny(errno.EPERM)) for name in always_eperm),
        *((name, deny(errno.ENOSYS)) for name in always_enosys),
    ]


def program(machine: str, protected_pids: list[int], protected_pgids: list[int]) -> bytes:
    """The filter for `machine` (a platform.machine() value), as an array of struct sock_filter."""
    audit_arch, numbers = ARCHES[machine]
    insns = [
        _insn(BPF_LD_W_ABS, ARCH_OFFSET),
        _insn(BPF_JEQ, audit_arch, 1, 0),
        _fail(errno.ENOSYS),  # another ABI has other syscall numbers: i386's socketcall would dodge the socket rule
        _insn(BPF_LD_W_ABS, NR_OFFSET),
    ]
    if machine == "x86_64":
        insns += [_insn(BPF_JGE, X32_SYSCALL_BIT, 0, 1), _fail(errno.ENOSYS)]
    for name, block in rules(protected_pids, protected_pgids):
        insns += [_insn(BPF_JEQ, numbers[name], 0, len(block)), *block]
    insns.append(_ret(SECCOMP_RET_ALLOW))
    return b"".join(insns)


# ---- installing it -----------------------------------------------------------


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _ids(ids: list[int], what: str) -> list[int]:
    try:
        values = [operator.index(i) for i in ids]
    except TypeError as e:
        raise SeccompUnavailable(f"{what} must be a list of integers: {e}") from None
    if not all(0 < v < 2**31 for v in values):
        raise SeccompUnavailable(f"{what} must be positive 32-bit ids, not {values}")
    return values


def install(protected_pids: list[int], protected_pgids: list[int]) -> None:
    """Put this process, all its threads and all its future children under the filter, for good.

    `protected_pids` (the grader and its ancestors) cannot be signalled;
    `protected_pgids` (their process groups) cannot be signalled as a group.
    Raises SeccompUnavailable, and installs nothing, when the filter cannot be installed.
    """
    machine = platform.machine()
    if machine not in ARCHES:
        raise SeccompUnavailable(f"no seccomp filter for the {machine!r} architecture, only for {', '.join(ARCHES)}")
    if struct.calcsize("P") != 8:
        raise SeccompUnavailable(f"a 32-bit Python on {machine} makes system calls through another ABI")
    code = program(machine, _ids(protected_pids, "protected_pids"), _ids(protected_pgids, "protected_pgids"))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as e:
        raise SeccompUnavailable(f"cannot load the C library: {e}") from None
    libc.prctl.restype = ctypes.c_int
    libc.syscall.restype = ctypes.c_long

    # Without no_new_privs an unprivileged process may not install a filter (it
    # could confuse a setuid program); with it, exec cannot gain privileges.
    if libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise SeccompUnavailable(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")

    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    # seccomp() rather than prctl(PR_SET_SECCOMP) for TSYNC: threads already
    # running (torch's pools) get the filter too, and no_new_privs with it.
    result = libc.syscall(
        ctypes.c_long(ARCHES[machine][1]["seccomp"]),
        ctypes.c_long(SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(fprog),
    )
    if result < 0:
        raise SeccompUnavailable(f"seccomp(SECCOMP_SET_MODE_FILTER) failed: {os.strerror(ctypes.get_errno())}")
    if result > 0:
        raise SeccompUnavailable(f"seccomp(SECCOMP_SET_MODE_FILTER) could not synchronise thread {result}")
