"""The worker's seccomp filter, checked in fresh child processes (a filter cannot be removed, so never in pytest's).

Each child protects its parent, this pytest process, and its process group,
as the worker protects the grader; it probes the kernel and prints its results
as JSON. Kill probes send signal 0, so a filter that failed would harm nothing.
"""
from __future__ import annotations

import json
import os
import platform
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SANDBOX = Path(__file__).resolve().parents[1] / "autograder" / "sandbox" / "worker"

PRELUDE = f"""
import ctypes, errno, json, os, platform, signal, socket, subprocess, sys, threading
sys.path.insert(0, {str(SANDBOX)!r})
import seccomp

libc = ctypes.CDLL(None, use_errno=True)
NR = seccomp.ARCHES[platform.machine()][1] if platform.machine() in seccomp.ARCHES else {{}}
PARENT = os.getppid()
GROUP = os.getpgid(PARENT)


def protect():
    seccomp.install([PARENT], [GROUP])


def outcome(fn, *args):
    try:
        fn(*args)
    except OSError as e:
        return errno.errorcode[e.errno]
    return "ok"


def c_outcome(result):
    # a libc or syscall() result: "ok", or the errno name
    return "ok" if result != -1 else errno.errorcode[ctypes.get_errno()]


def syscall(name, *args):
    return c_outcome(libc.syscall(ctypes.c_long(NR[name]), *(ctypes.c_long(a) for a in args)))
"""


def run_child(body: str) -> dict:
    argv = [sys.executable, "-c", PRELUDE + textwrap.dedent(body)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.slow
def test_the_network_is_closed_but_unix_sockets_work():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    with server:
        out = run_child(f"""
            protect()
            a, b = socket.socketpair()
            a.sendall(b"hi")
            print(json.dumps({{
                "inet": outcome(socket.socket, socket.AF_INET, socket.SOCK_STREAM),
                "inet6": outcome(socket.socket, socket.AF_INET6, socket.SOCK_DGRAM),
                "connect": outcome(socket.create_connection, ("127.0.0.1", {port}), 2),
                "unix": outcome(socket.socket, socket.AF_UNIX),
                "socketpair": b.recv(2).decode(),
                "io_uring_setup": syscall("io_uring_setup", 0, 0),
            }}))
        """)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing ever reached the server
    assert out == {
        "inet": "EACCES",
        "inet6": "EACCES",
        "connect": "EACCES",
        "unix": "ok",
        "socketpair": "hi",
        "io_uring_setup": "ENOSYS",
    }


@pytest.mark.slow
def test_the_grader_cannot_be_signalled_or_traced():
    out = run_child("""
        child = subprocess.Popen(["sleep", "30"])  # started before the filter, which refuses exec
        protect()
        pidfd = os.pidfd_open(child.pid)
        proc_fd = os.open(f"/proc/{PARENT}", os.O_RDONLY | os.O_DIRECTORY)
        print(json.dumps({
            "kill parent": outcome(os.kill, PARENT, 0),
            "kill group": outcome(os.killpg, GROUP, 0),
            "kill all": outcome(os.kill, -1, 0),
            "tgkill parent": syscall("tgkill", PARENT, PARENT, 0),
            "tkill parent": syscall("tkill", PARENT, 0),
            "rt_sigqueueinfo parent": syscall("rt_sigqueueinfo", PARENT, 0, 0),
            "pidfd_open parent": outcome(os.pidfd_open, PARENT),
            "pidfd_send_signal via /proc": outcome(signal.pidfd_send_signal, proc_fd, 0),
            "ptrace parent": c_outcome(libc.ptrace(ctypes.c_long(16), ctypes.c_long(PARENT), None, None)),  # ATTACH
            "process_vm_readv parent": syscall("process_vm_readv", PARENT, 0, 0, 0, 0, 0),
            "kill self": outcome(os.kill, os.getpid(), 0),
            "pthread_kill self": outcome(signal.pthread_kill, threading.get_ident(), 0),
            "kill own child": outcome(os.kill, child.pid, signal.SIGKILL),
            "own child killed": child.wait() == -signal.SIGKILL,
            "pidfd_open own child": pidfd > 0,
        }))
    """)
    assert out == {
        "kill parent": "EPERM",
        "kill group": "EPERM",
        "kill all": "EPERM",
        "tgkill parent": "EPERM",
        "tkill parent": "EPERM",
        "rt_sigqueueinfo parent": "EPERM",
        "pidfd_open parent": "EPERM",
        "pidfd_send_signal via /proc": "EPERM",
        "ptrace parent": "EPERM",
        "process_vm_readv parent": "EPERM",
        "kill self": "ok",
        "pthread_kill self": "ok",
        "kill own child": "ok",
        "own child killed": True,
        "pidfd_open own child": True,
    }


@pytest.mark.slow
def test_without_the_filter_the_same_probes_succeed():
    # The control for the two tests above: their refusals come from the filter.
    out = run_child("""
        print(json.dumps({
            "inet": outcome(socket.socket, socket.AF_INET),
            "kill parent": outcome(os.kill, PARENT, 0),
            "kill group": outcome(os.killpg, GROUP, 0),
            "pidfd_open parent": outcome(os.pidfd_open, PARENT),
        }))
    """)
    assert out == {"inet": "ok", "kill parent": "ok", "kill group": "ok", "pidfd_open parent": "ok"}


@pytest.mark.slow
def test_forks_and_threads_inherit_the_filter_and_no_other_program_runs():
    out = run_child("""
        started = threading.Event()
        go = threading.Event()
        early = {}

        def before_install():  # a thread running before install, as torch's pools may be
            started.set()
            go.wait()
            early["inet"] = outcome(socket.socket, socket.AF_INET)

        thread = threading.Thread(target=before_install)
        thread.start()
        started.wait()
        protect()
        go.set()
        thread.join()

        late = {}
        later = threading.Thread(target=lambda: late.update(inet=outcome(socket.socket, socket.AF_INET)))
        later.start()
        later.join()

        pid = os.fork()
        if pid == 0:
            os._exit(7)
        _, status = os.waitpid(pid, 0)

        pid = os.fork()
        if pid == 0:  # a forked child is a copy under the same filter
            os._exit(0 if outcome(socket.socket, socket.AF_INET) == "EACCES" else 1)
        _, forked_inet = os.waitpid(pid, 0)
        print(json.dumps({
            "thread started before": early["inet"],
            "thread started after": late["inet"],
            "fork exit code": os.waitstatus_to_exitcode(status),
            "forked child refused the network": os.waitstatus_to_exitcode(forked_inet) == 0,
            "exec": outcome(os.execv, sys.executable, [sys.executable, "-c", "pass"]),
            "subprocess": outcome(subprocess.run, ["true"]),
            "execveat": syscall("execveat", -100, 0, 0, 0, 0),
        }))
    """)
    assert out == {
        "thread started before": "EACCES",
        "thread started after": "EACCES",
        "fork exit code": 7,
        "forked child refused the network": True,
        "exec": "EPERM",  # another program, a fresh interpreter above all, would run without the worker's walls
        "subprocess": "EPERM",
        "execveat": "EPERM",
    }


@pytest.mark.slow
def test_namespaces_mounts_and_kernel_interfaces_are_refused():
    # Arguments are chosen to be harmless should a call get through: paths that
    # do not exist, null pointers, unshare(0).
    out = run_child("""
        protect()
        CLONE_NEWUSER = 0x10000000
        pid = libc.syscall(ctypes.c_long(NR["clone"]), ctypes.c_long(CLONE_NEWUSER | signal.SIGCHLD), None, None, None, None)
        if pid == 0:
            os._exit(0)
        missing = b"/nonexistent-seccomp-test"
        print(json.dumps({
            "unshare(CLONE_NEWUSER)": c_outcome(libc.unshare(CLONE_NEWUSER)),
            "clone(CLONE_NEWUSER)": c_outcome(pid),
            "clone3": syscall("clone3", 0, 0),
            "mount": c_outcome(libc.mount(b"none", missing, b"tmpfs", ctypes.c_ulong(0), None)),
            "umount2": c_outcome(libc.umount2(missing, 0)),
            "chroot": c_outcome(libc.chroot(missing)),
            **{name: syscall(name, 0, 0, 0, 0, 0) for name in (
                "unshare", "setns", "pivot_root", "bpf", "perf_event_open", "userfaultfd",
                "add_key", "request_key", "keyctl",
            )},
            "io_uring_enter": syscall("io_uring_enter", -1, 0, 0, 0, 0),
            "io_uring_register": syscall("io_uring_register", -1, 0, 0, 0),
        }))
    """)
    assert out == {
        "unshare(CLONE_NEWUSER)": "EPERM",
        "clone(CLONE_NEWUSER)": "EPERM",
        "clone3": "ENOSYS",
        "mount": "EPERM",
        "umount2": "EPERM",
        "chroot": "EPERM",
        "unshare": "EPERM",
        "setns": "EPERM",
        "pivot_root": "EPERM",
        "bpf": "EPERM",
        "perf_event_open": "EPERM",
        "userfaultfd": "EPERM",
        "add_key": "EPERM",
        "request_key": "EPERM",
        "keyctl": "EPERM",
        "io_uring_enter": "ENOSYS",
        "io_uring_register": "ENOSYS",
    }


@pytest.mark.skipif(platform.machine() != "x86_64", reason="i386 and x32 calls exist only on x86_64")
@pytest.mark.slow
def test_other_system_call_abis_are_refused():
    out = run_child("""
        import mmap

        # push rbx; mov eax, 359 (i386 socket); mov ebx, 2 (AF_INET); mov ecx, 1; xor edx, edx;
        # int 0x80; pop rbx; ret
        code = bytes.fromhex("53 b8 67 01 00 00 bb 02 00 00 00 b9 01 00 00 00 31 d2 cd 80 5b c3")
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        i386_socket = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
        before = i386_socket()
        protect()
        print(json.dumps({
            "i386 socket before": before >= 0,
            "i386 socket after": -i386_socket(),
            # x32 is compiled out of most kernels, where this holds with or without the filter
            "x32 socket": c_outcome(libc.syscall(ctypes.c_long(0x40000000 | NR["socket"]), 2, 1, 0)),
        }))
    """)
    assert out == {"i386 socket before": True, "i386 socket after": 38, "x32 socket": "ENOSYS"}  # 38: ENOSYS


@pytest.mark.slow
def test_numpy_and_torch_work_under_the_filter():
    out = run_child("""
        protect()
        import numpy
        import torch

        torch.set_num_threads(2)
        a = torch.randn(512, 512)
        b = torch.randn(512, 512)
        print(json.dumps({
            "numpy": float(numpy.arange(4).sum()),
            "torch": torch.ones(3).sum().item(),
            "matmul": bool(torch.allclose(a @ b, (a.double() @ b.double()).float(), atol=1e-3)),
            "threads": torch.get_num_threads(),
        }))
    """)
    assert out == {"numpy": 6.0, "torch": 3.0, "matmul": True, "threads": 2}


@pytest.mark.slow
def test_install_raises_seccomp_unavailable_and_installs_nothing():
    out = run_child("""
        def error(pids, pgids):
            try:
                seccomp.install(pids, pgids)
            except Exception as e:
                return [type(e).__name__, str(e)]
            return None

        real_machine = platform.machine
        platform.machine = lambda: "sparc"
        sparc = error([PARENT], [GROUP])
        platform.machine = real_machine
        print(json.dumps({
            "sparc": sparc,
            "not ints": error(["1"], [GROUP]),
            "negative": error([PARENT], [-GROUP]),
            "inet afterwards": outcome(socket.socket, socket.AF_INET),
        }))
    """)
    assert out["sparc"][0] == "SeccompUnavailable" and "sparc" in out["sparc"][1]
    assert out["not ints"][0] == "SeccompUnavailable"
    assert out["negative"][0] == "SeccompUnavailable"
    assert out["inet afterwards"] == "ok"


def test_the_program_is_well_formed_for_both_architectures():
    from autograder.sandbox.worker import seccomp  # building the program installs nothing

    for machine in seccomp.ARCHES:
        code = seccomp.program(machine, [os.getpid(), 1], [os.getpgid(0)])
        assert len(code) % 8 == 0 and len(code) // 8 < 4096  # whole struct sock_filter, under BPF_MAXINSNS
        assert code[-8:] == struct.pack("<HBBI", 0x06, 0, 0, 0x7FFF0000)  # ends in RET ALLOW
    with pytest.raises(seccomp.SeccompUnavailable):
        seccomp.program("x86_64", list(range(1, 300)), [])  # more ids than one BPF jump can skip
