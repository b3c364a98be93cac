"""Scratch folders: the copies of a submission, and of the worker's side, that grading makes under the system's
temporary folder, each named for the process that owns it: autograder-<kind>-pid<N>-<random>.

Every ending its owner lives through removes them on the way out (context managers and `close`, run for Ctrl-C and
for SIGTERM and SIGHUP too, which the command line turns into KeyboardInterrupt). An owner killed outright (SIGKILL,
the OOM killer, a batch's job killed for overrunning its budget or stopped with its batch) removes nothing, so the
pid in the name says whose a folder is: `sweep` removes the folders of every owner no longer alive, and never one of
a live process (another batch on the same machine). A process sweeps before it makes its first folder, and a batch
after each job it kills. At the root tier a folder may hold files of the student uids: the grader runs as root
there, so removing it takes them too.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .tiers import sandbox_missing

_OWNED = re.compile(r"autograder-[a-z-]+-pid([1-9][0-9]{0,6})-\w+")  # pids stay below 2**22 (the kernel's pid_max)
_swept_in: int | None = None  # the process that has swept (a forked child has not)


def make(kind: str, under: Path | None = None) -> Path:
    """A new folder of this process's, in `under` (default: the system's temporary folder)."""
    global _swept_in
    if _swept_in != os.getpid():
        _swept_in = os.getpid()
        sweep()
    return Path(tempfile.mkdtemp(prefix=f"autograder-{kind}-pid{os.getpid()}-", dir=under))


@contextlib.contextmanager
def folder(kind: str) -> Iterator[Path]:
    """A new folder of this process's while the block runs."""
    path = make(kind)
    try:
        yield path
    finally:
        remove(path)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def sweep() -> None:
    """Remove the folders in the system's temporary folder that this user's processes made and that outlived them."""
    if sandbox_missing():  # a student's laptop (a check's folder goes on its way out): only the sandbox's graders sweep
        return
    top = Path(tempfile.gettempdir())
    try:
        names = os.listdir(top)
    except OSError:
        return
    for name in names:
        match = _OWNED.fullmatch(name)
        if match and _ours(top / name) and not _alive(int(match[1])):
            remove(top / name)  # rmtree refuses a link, and one swapped in while it runs


def _ours(path: Path) -> bool:
    """A folder (not a link to one) of this user's: another user's are theirs to sweep. Root sweeps any: at the root
    tier a worker's folder belongs to the student uid it runs as."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and os.geteuid() in (0, st.st_uid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True
