"""A Python that stands for a student's macOS or Windows laptop, on this Linux machine.

Loaded at start-up through a .pth file (tests/test_portable.py writes it into a venv of its own), it takes from the
grader's own code, and from the worker that code starts, everything that only Linux offers: each module and call in
LINUX_ONLY is refused when a file of the `autograder` package imports or calls it (the standard library and torch
still do what their platform needs: on Windows, subprocess has its own code, not Linux's). So a check that passes
here uses nothing of Linux's on its own path. Each refusal is logged (one line to $NOT_LINUX_LOG): the sandbox's
probe (tiers.sandbox_missing) must be refused, and nothing else may be.

docs/architecture.md ("Portability") lists the same names with how the portable path does without each;
tests/test_bundle.py holds the two lists equal.
"""
import builtins
import functools
import importlib.util
import os
import select
import socket
import subprocess
import sys

# What only Linux (or only POSIX: no Windows) offers, as the grader's code would reach it.
LINUX_ONLY = {
    "resource": "module",  # rlimits (walls.py)
    "fcntl": "module",  # flock, the machine floor (machine_floor.py)
    "ctypes.CDLL(None)": "call",  # libc's prctl, unshare and the seccomp filter (walls.py, reaper.py, template.py)
    "os.fork": "call",  # the template forks workers (template.py)
    "os.sched_getaffinity": "call",  # usable cores (runner.py)
    "os.killpg": "call",  # a worker's process group (process.py, reaper.py)
    "os.setsid": "call",
    "os.set_blocking": "call",  # the sandbox's request pipe is written under a deadline (process.Pipes)
    "os.sysconf": "call",
    "os.pidfd_open": "call",
    "os.getuid": "call",  # uids (tiers.py, walls.py)
    "os.geteuid": "call",
    "os.setresuid": "call",
    "os.setresgid": "call",
    "os.setgroups": "call",
    "socket.send_fds": "call",  # descriptors over a Unix socket (template.py)
    "socket.recv_fds": "call",
    "select.select": "call",  # Windows selects sockets only; the sandbox selects pipes (wire.py)
    "subprocess.Popen(pass_fds, start_new_session, preexec_fn, process_group)": "call",
    "/proc": "path",  # processes by pid (reaper.py, walls.py)
}

_LOG = os.environ.get("NOT_LINUX_LOG")
_spec = importlib.util.find_spec("autograder")
_PACKAGE = os.path.realpath(_spec.submodule_search_locations[0]) + os.sep if _spec else None


@functools.lru_cache(maxsize=None)
def _grader_file(filename: str) -> str | None:
    path = os.path.realpath(filename)
    return path if _PACKAGE and path.startswith(_PACKAGE) else None


def _ours(depth: int = 2) -> str | None:
    """The grader's file that made the call, if the caller `depth` frames up is one."""
    return _grader_file(sys._getframe(depth).f_code.co_filename)


def _refuse(what: str, where: str, error: type[Exception] = OSError):
    """Log the refusal and raise what the grader's code would meet on Windows (AttributeError for a missing os
    function, ImportError for a missing module), or OSError."""
    if _LOG:
        with open(_LOG, "a") as log:
            log.write(f"{what}\t{os.path.relpath(where, _PACKAGE)}\n")
    raise error(f"{what} is Linux's: the portable path must not use it ({where})")


def _guard(owner, name: str) -> None:
    real = getattr(owner, name)
    error = AttributeError if owner is not select else OSError  # select exists on Windows, for sockets only

    def guarded(*args, **kwargs):
        where = _ours()
        if where:
            _refuse(f"{owner.__name__}.{name}", where, error)
        return real(*args, **kwargs)

    setattr(owner, name, guarded)


for dotted in (k for k, kind in LINUX_ONLY.items() if kind == "call" and "(" not in k):
    module, _, name = dotted.partition(".")
    _guard({"os": os, "socket": socket, "select": select}[module], name)

_real_import = builtins.__import__


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.partition(".")[0] in ("resource", "fcntl") and globals and _PACKAGE \
            and os.path.realpath(globals.get("__file__") or "").startswith(_PACKAGE):
        _refuse(f"import {name}", globals["__file__"], ImportError)
    return _real_import(name, globals, locals, fromlist, level)


builtins.__import__ = _import

_real_popen_init = subprocess.Popen.__init__
POSIX_ONLY_POPEN = ("pass_fds", "start_new_session", "preexec_fn", "process_group")


def _popen_init(self, *args, **kwargs):
    where = _ours()
    used = [k for k in POSIX_ONLY_POPEN if kwargs.get(k)]
    if where and used:
        _refuse(f"subprocess.Popen({', '.join(used)})", where, ValueError)
    _real_popen_init(self, *args, **kwargs)


subprocess.Popen.__init__ = _popen_init

import ctypes  # noqa: E402  (after the import hook: nothing of the grader's has run yet)

_real_cdll_init = ctypes.CDLL.__init__


def _cdll_init(self, name, *args, **kwargs):
    where = _ours()
    if where and name is None:
        _refuse("ctypes.CDLL(None)", where, TypeError)  # Windows's LoadLibrary takes no None
    _real_cdll_init(self, name, *args, **kwargs)


ctypes.CDLL.__init__ = _cdll_init


def _path_guard(owner, name: str) -> None:
    real = getattr(owner, name)

    def guarded(path, *args, **kwargs):
        where = _ours()
        if where and str(path).startswith("/proc"):
            _refuse(f"{name}({str(path)[:30]})", where)
        return real(path, *args, **kwargs)

    setattr(owner, name, guarded)


for _owner, _name in ((builtins, "open"), (os, "open"), (os, "listdir"), (os, "scandir")):
    _path_guard(_owner, _name)
