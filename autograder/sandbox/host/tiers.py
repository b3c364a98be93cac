"""Isolation tiers: the strongest wall this machine can put around the worker.

Chosen once per run, printed, and recorded in results.json:

- root: the grader runs as root (Gradescope, a grading container). Each worker
  runs as a uid of its own with no account, in its own network namespace, and
  everything the grader keeps from students (the project folder but for the
  Python it runs on, solutions/, the grader's package, results and secret
  files) loses its permissions for others.
- bubblewrap: unprivileged, with `bwrap` and user namespaces. The worker sees a
  read-only root holding only system files and Python, a private /tmp, its
  scratch folder, and PID and network namespaces of its own (shared with the
  other workers of its submission, forked from one template: template.py).
- same-user: neither. The worker shares the grader's uid and file system; what
  still holds is listed in SECURITY.md.
- portable: no sandbox at all, for `check` on a student's own machine where the
  sandbox cannot run (macOS, Windows: it needs Linux). The code checked is the
  student's own, so nothing is walled off; each component still runs in a
  process of its own under each case's time limit (process.Spawned). Never
  chosen by choose_tier: `grade`, `grade-all` and Gradescope refuse it.

In every sandbox tier the worker also applies resource limits and the seccomp filter
(sandbox/worker/seccomp.py) itself, and the parent is undumpable and reaps every
process the student leaves behind (sandbox/host/reaper.py). A tier is only chosen
after a probe shows it can start Python; otherwise the grader says why and
takes the next one.
"""
from __future__ import annotations

import ctypes
import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import reaper

ORDER = ("same-user", "bubblewrap", "root")  # weakest first
GUARANTEES = {
    "root": "a uid of its own, no network, grader files unreadable",
    "bubblewrap": "private mounts, PIDs and network; grader files not mounted",
    "same-user": "same user, resource limits, seccomp where it loads; grader files readable",
    "portable": "no sandbox: your own code on your own machine, a process per component with time limits",
}
# Ids no account or other grader uses: each grader process gets its own, so one
# grader's sweep (kill every process of the uid) never touches another's workers.
STUDENT_ID_BASE = 1 << 30
STUDENT_IDS = 4  # uids per grader: two lanes (runner.py), each one for its component and one for a started worker
ID_STRIDE = 1 << 22  # above any pid (pid_max is at most 2^22): a grader's k-th uid is no other grader's j-th


class TierUnavailable(Exception):
    """--require-tier asked for more than this machine offers."""


@dataclass(frozen=True)
class Tier:
    name: str
    notes: tuple[str, ...] = ()  # why each stronger tier was not used
    student_id: int | None = None  # root tier: uid and gid of the workers
    hidden: tuple[Path, ...] = ()  # what the worker must not read
    bwrap: str | None = None  # bubblewrap tier, and the root tier where bwrap is installed
    python_paths: tuple[Path, ...] = field(default=(), repr=False)  # read-only binds for bwrap

    @property
    def walled(self) -> bool:
        """Whether workers wall themselves in (every tier but portable)."""
        return self.name != "portable"

    def with_id(self, k: int) -> Tier:
        """This tier with the grader's k-th student uid (root tier; k < STUDENT_IDS): one component's worker can then
        start while what another component left running is killed by uid."""
        assert 0 <= k < STUDENT_IDS
        return self if self.student_id is None else replace(self, student_id=self.student_id + k * ID_STRIDE)

    @property
    def guarantees(self) -> str:
        mounts = "; private mounts and PIDs (bubblewrap)" if self.name == "root" and self.bwrap else ""
        return GUARANTEES[self.name] + mounts

    def record(self) -> dict:
        return {"tier": self.name, "guarantees": self.guarantees, "notes": list(self.notes)}

    def command(self, argv: list[str], scratch: Path, workdir: Path) -> list[str]:
        """The command line that starts `argv` inside this tier's walls."""
        if self.bwrap is None:
            return argv
        as_root = self.student_id is not None
        return [*bubblewrap_args(self.bwrap, self.python_paths, scratch, workdir, as_root, self.hidden), "--", *argv]


def choose_tier(hidden: list[Path], require: str = "same-user") -> Tier:
    """The strongest tier that works here, at least `require`; `hidden` lists what students must not read. Never the
    portable tier: where the sandbox cannot run, grading refuses to (only a student's `check` falls back)."""
    missing = sandbox_missing()
    if missing:
        raise TierUnavailable(f"grading runs only in the sandbox ({missing}); on a student's own machine, `check` runs "
                              "the visible cases without it")
    hidden = tuple(p.resolve() for p in hidden if p.exists())
    notes: list[str] = []
    bwrap = shutil.which("bwrap")
    paths = python_paths(hidden)
    if os.geteuid() == 0:
        tier = _root_tier(hidden, bwrap, paths, notes)
    else:
        notes.append("root tier unavailable: the grader is not running as root")
        tier = _bubblewrap_tier(hidden, bwrap, paths, notes)
    tier = tier or Tier("same-user", tuple(notes), hidden=hidden)
    if ORDER.index(tier.name) < ORDER.index(require):
        raise TierUnavailable(f"--require-tier {require}, but the strongest tier here is {tier.name}: " + "; ".join(notes))
    return tier


def _root_tier(hidden, bwrap, paths, notes) -> Tier | None:
    uid = STUDENT_ID_BASE + os.getpid()
    become = f"import os; os.setgroups([]); os.setresgid({uid}, {uid}, {uid}); os.setresuid({uid}, {uid}, {uid}); import numpy"
    probe = [sys.executable, "-I", "-c", become]
    if bwrap:  # bubblewrap's mounts also make a Python under /root reachable for the uid
        tier = Tier("root", tuple(notes), student_id=uid, hidden=hidden, bwrap=bwrap, python_paths=paths)
        reason = _probe(tier, probe)
        if reason is None:
            return tier
        notes.append(f"bubblewrap unavailable as root: {reason}")
    else:
        notes.append("bubblewrap not installed (Debian package bubblewrap): no private mounts")
    tier = Tier("root", tuple(notes), student_id=uid, hidden=hidden)
    reason = _probe(tier, probe)
    if reason is None:
        return tier
    notes.append(f"root tier unavailable: Python cannot start as an unprivileged uid ({reason})")
    return None


def _bubblewrap_tier(hidden, bwrap, paths, notes) -> Tier | None:
    if bwrap is None:
        notes.append("bubblewrap tier unavailable: bwrap is not installed (Debian package bubblewrap)")
        return None
    tier = Tier("bubblewrap", tuple(notes), hidden=hidden, bwrap=bwrap, python_paths=paths)
    reason = _probe(tier, [sys.executable, "-I", "-c", "import numpy"])
    if reason is not None:
        notes.append(f"bubblewrap tier unavailable: {reason}")
        return None
    return tier


def _probe(tier: Tier, argv: list[str]) -> str | None:
    """None when argv runs cleanly inside `tier`, from an empty scratch folder as a worker would, else
    the last line of what went wrong. A tier and command that ran cleanly once in this process are not probed again
    (a batch job or a test session chooses its tier for each submission); one that failed is, as the failure may pass."""
    key = (tier, tuple(argv))
    if key in _PROBED_CLEAN:
        return None
    reason = _run_probe(tier, argv)
    if reason is None:
        _PROBED_CLEAN.add(key)
    return reason


_PROBED_CLEAN: set[tuple[Tier, tuple[str, ...]]] = set()


def _run_probe(tier: Tier, argv: list[str]) -> str | None:
    with tempfile.TemporaryDirectory(prefix="autograder-probe-") as scratch:
        os.chmod(scratch, 0o755)  # the student uid of the root tier starts in it
        try:
            done = subprocess.run(tier.command(argv, Path(scratch), Path(scratch)), capture_output=True, text=True,
                                  timeout=60, cwd=scratch, env={"LC_ALL": "C.UTF-8"})
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def python_paths(hidden: tuple[Path, ...]) -> tuple[Path, ...]:
    """What the worker's Python needs to see: its prefixes and sys.path, and the folders of CUDA's driver that
    workers are told of (cuda_driver_dirs), less anything hidden or holding it. Python's own prefixes are kept
    even when they hold something hidden (results or a secret a TA wrote into the venv): bubblewrap_args masks
    that, and Python keeps its files."""
    prefixes = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    wanted = [*prefixes, *(Path(p) for p in sys.path if p and os.path.isdir(p)), *cuda_driver_dirs()]
    keep: list[Path] = []
    for path in (p.resolve() for p in wanted):
        holds = any(h.is_relative_to(path) for h in hidden) and not any(path.is_relative_to(p) for p in prefixes)
        if holds or any(path.is_relative_to(h) for h in hidden):
            continue
        if not any(path.is_relative_to(k) for k in keep):
            keep = [k for k in keep if not k.is_relative_to(path)] + [path]
    return tuple(sorted(keep))


def cuda_driver_dirs(environ=os.environ) -> tuple[Path, ...]:
    """The folders of the grader's LD_LIBRARY_PATH that hold CUDA's driver library (libcuda.so.1), which a GPU
    machine may keep where only that variable finds it (/usr/local/nvidia/lib64); workers start with an empty
    environment, and without them torch in a worker sees no GPU. Only absolute folders that, like their libcuda,
    nobody but root or the grader can write: at the root tier a worker starts as root, and a library the student
    could put on its search path (an empty entry is the current folder: the submission) would run as root before
    the worker walls itself in."""
    found: list[Path] = []
    for entry in environ.get("LD_LIBRARY_PATH", "").split(":"):
        folder = Path(entry)
        if folder.is_absolute() and folder not in found and _grader_only(folder) and _grader_only(folder / "libcuda.so.1"):
            found.append(folder)
    return tuple(found)


def _grader_only(path: Path) -> bool:
    """Whether `path` exists, owned by root or the grader, and writable by no group or other user."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & 0o022


def bubblewrap_args(bwrap: str, python: tuple[Path, ...], scratch: Path, workdir: Path, as_root: bool,
                    hidden: tuple[Path, ...] = ()) -> list[str]:
    # As root, no user namespace: the worker must still be able to drop to the student uid inside.
    unshare = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"] if as_root else ["--unshare-all"]
    args = [bwrap, *unshare, "--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):  # merged /usr: keep the link, it points into /usr
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in ("/usr", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime"):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    made: set[Path] = set()
    for path in python:
        if not path.is_relative_to("/usr"):
            # bwrap makes missing parents 0700; the student uid must be able to walk through them
            for parent in reversed(path.parents[:-1]):
                if parent not in made and parent != Path("/tmp"):  # /tmp is bwrap's own tmpfs, 0755
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            args += ["--ro-bind", str(path), str(path)]
    for device in sorted(glob.glob("/dev/nvidia*")):  # a lent GPU
        args += ["--dev-bind", device, device]
    return [*args, *_masks(hidden, [Path("/usr"), *python]), "--bind", str(scratch), str(scratch), "--chdir", str(workdir)]


def _masks(hidden: tuple[Path, ...], bound: list[Path]) -> list[str]:
    """Mounts over each hidden path inside a bound folder (results or a secret a TA put in the venv): an empty
    read-only folder over a folder, /dev/null over a file. What is hidden stays out of reach without taking
    Python's folder with it, which would leave workers nothing to start."""
    args: list[str] = []
    for path in hidden:
        if path.exists() and any(path.is_relative_to(b) for b in bound):
            args += ["--tmpfs", str(path), "--remount-ro", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    return args


def hide(paths: tuple[Path, ...]) -> None:
    """Root tier: take every permission for others off what the worker must not read."""
    for path in paths:
        try:
            os.chmod(path, os.stat(path).st_mode & ~0o007)
        except FileNotFoundError:
            pass


def grader_files(rubric_dir: Path, solutions_dir: Path | None, extra: list[Path]) -> list[Path]:
    """What students must not read: the rubric's folder entry by entry (but for the Python that runs
    the worker, which may live there as .venv), solutions/, the grader's own package, and `extra`."""
    package = Path(__file__).resolve().parents[2]  # autograder/
    python = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    inside = [p for p in rubric_dir.resolve().iterdir() if not any(py.is_relative_to(p) for py in python)]
    return [*inside, *([solutions_dir] if solutions_dir else []), package, *extra]


class Isolation:
    """A tier put in force for this process, once (the command line enters it; so do tests and benchmarks):
    the grader becomes undumpable and a subreaper and, at the root tier, its files are hidden from students.
    Grading under it changes nothing process-wide; leaving it kills what students left running."""

    def __init__(self, tier: Tier):
        self.tier, self.notes = tier, list(tier.notes)

    def __enter__(self) -> Isolation:
        if self.tier.walled:
            self.notes += reaper.harden_parent()
        if self.tier.name == "root":
            hide(self.tier.hidden)
        return self

    def __exit__(self, *exc) -> None:
        if self.tier.walled:
            for uid in {self.tier.with_id(k).student_id for k in range(STUDENT_IDS)}:
                reaper.sweep(uid)

    def record(self) -> dict:
        return {**self.tier.record(), "notes": list(self.notes)}


def isolation_for(rubric_dir: Path, solutions_dir: Path | None, extra: list[Path] = (), require: str = "same-user") -> Isolation:
    """The strongest isolation here (at least `require`) for grading with this rubric: not yet entered."""
    return Isolation(choose_tier(grader_files(rubric_dir, solutions_dir, list(extra)), require))


def sandbox_missing() -> str | None:
    """Why the sandbox cannot run on this machine, or None when it can: its walls are Linux's (walls.py: resource
    limits, prctl, seccomp; the machine floor's flock; templates that fork)."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux, and this is {platform.system() or sys.platform}"
    try:
        import fcntl  # noqa: F401
        import resource  # noqa: F401

        ctypes.CDLL(None, use_errno=True).prctl  # noqa: B018
    except (ImportError, OSError, AttributeError, TypeError) as exc:
        return f"the sandbox needs Linux's resource, fcntl and prctl ({exc})"
    return None


def student_isolation(rubric_dir: Path, solutions_dir: Path | None, require: str = "portable") -> tuple[Isolation, str | None]:
    """What `check` runs under on a student's machine: the sandbox where it can run, else the portable tier, with the
    one line that says so (None in the sandbox). `require` above portable refuses the fallback."""
    missing = sandbox_missing()
    if missing is None:
        return isolation_for(rubric_dir, solutions_dir, require="same-user" if require == "portable" else require), None
    if require != "portable":
        raise TierUnavailable(f"--require-tier {require}, but {missing}")
    line = (f"No sandbox here ({missing}): your code runs in a plain process per component, with the grader's cases, "
            "time limits, rules and messages.")
    return Isolation(Tier("portable", (missing,))), line
