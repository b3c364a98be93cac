"""Isolation tiers: the strongest wall this machine can put around the worker.

Chosen once per run, printed, and recorded in results.json:

- root: the grader runs as root (Gradescope, a grading container). Each worker
  runs as a uid of its own with no account, in its own network namespace. With
  bubblewrap, the worker's mounts leave out everything the grader keeps from
  students (the project folder but for Python environments, solutions/, the
  grader's package, results and secret files); without it, those lose their
  permissions for others while graders run, and get them back when the last
  one ends (hide, unhide).
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
takes the next one. The strongest tier is remembered per machine and user
(state_dir()): a weaker one later is said first, with its cause and how to mend it.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import json
import os
import platform
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
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
class Weakened:
    """A tier weaker than this machine gave this user before: which one it gave, since when, why the stronger ones
    failed now (the probes' notes) and what mends it."""

    was: str
    since: str
    cause: str
    mend: str
    remembered: str  # the file that remembers it: deleting it forgets a tier this machine is no longer meant to give


@dataclass(frozen=True)
class Tier:
    name: str
    notes: tuple[str, ...] = ()  # why each stronger tier was not used
    student_id: int | None = None  # root tier: uid and gid of the workers
    hidden: tuple[Path, ...] = ()  # what the worker must not read
    bwrap: str | None = None  # bubblewrap tier, and the root tier where bwrap is installed
    python_paths: tuple[Path, ...] = field(default=(), repr=False)  # read-only binds for bwrap
    weakened: Weakened | None = field(default=None, compare=False)

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
        weakened = {"weakened": asdict(self.weakened)} if self.weakened else {}
        return {"tier": self.name, "guarantees": self.guarantees, "notes": list(self.notes), **weakened}

    @property
    def warning(self) -> str | None:
        return weakened_warning(self.record())

    def command(self, argv: list[str], scratch: Path, workdir: Path) -> list[str]:
        """The command line that starts `argv` inside this tier's walls."""
        if self.bwrap is None:
            return argv
        as_root = self.student_id is not None
        return [*bubblewrap_args(self.bwrap, self.python_paths, scratch, workdir, as_root, self.hidden), "--", *argv]


def weakened_warning(record: dict) -> str | None:
    """What to say before anything else when a tier (its record: Tier.record) is weaker than the one this machine gave
    before; None when it is not."""
    w = record.get("weakened")
    return w and (f"isolation is weaker than before: {record['tier']} ({record['guarantees']}), where this machine gave "
                  f"{w['was']} (since {w['since']}). Cause: {w['cause']}. To mend: {w['mend']}. If the weaker tier is meant, "
                  f"delete {w['remembered']}")


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
    tier = replace(tier, weakened=compared_with_before(tier, bwrap))
    if ORDER.index(tier.name) < ORDER.index(require):
        mend = f" (to mend: {tier.weakened.mend})" if tier.weakened else ""
        raise TierUnavailable(f"--require-tier {require}, but the strongest tier here is {tier.name}: " + "; ".join(notes) + mend)
    return tier


def state_dir() -> Path:
    """The grader's own per-user state, outside any project (nothing here is shipped): $XDG_STATE_HOME/autograder,
    by default ~/.local/state/autograder."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "autograder"


def _rank(name: str, bwrap: bool) -> tuple[int, bool]:
    return ORDER.index(name), bwrap  # the root tier with bubblewrap's mounts above the root tier without


def compared_with_before(tier: Tier, bwrap: str | None) -> Weakened | None:
    """How `tier` is weaker than the strongest this machine gave this user before (None when it is not), remembering
    it when it is the strongest yet. Keyed by machine and uid, so a home shared by machines or users mixes no memories."""
    try:
        path = state_dir() / "tiers.json"
    except RuntimeError:  # no home to keep it in: nothing remembered
        return None
    key = f"{platform.node()} uid {os.geteuid()}"
    try:
        known = json.loads(path.read_text())
        before = known.get(key) if isinstance(known, dict) else None
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known, before = {}, None
    now = _rank(tier.name, tier.bwrap is not None)
    if isinstance(before, dict) and before.get("tier") in ORDER:
        was = _rank(before["tier"], bool(before.get("bwrap")))
        if was > now:
            name = before["tier"] + (" with bubblewrap" if before["tier"] == "root" and was[1] else "")
            return Weakened(name, str(before.get("since", "?")), "; ".join(tier.notes) or "?",
                            _mend(before, tier, bwrap), str(path))
        if was == now:
            return None
    known[key] = {"tier": tier.name, "bwrap": tier.bwrap is not None, "since": time.strftime("%Y-%m-%d")}
    with contextlib.suppress(OSError):  # a home that cannot be written remembers nothing
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = path.with_name(f".{path.name}.{os.getpid()}")
        fresh.write_text(json.dumps(known, indent=1))
        os.replace(fresh, path)
    return None


def _mend(before: dict, tier: Tier, bwrap: str | None) -> str:
    """What gives back the tier remembered in `before`: root again, bubblewrap again, or the permissions for others
    on the folders of this Python that the student uid of the root tier must enter (lost to a chmod, or to an older
    grader's hiding)."""
    steps = []
    if before["tier"] == "root" and os.geteuid() != 0:
        steps.append("run the grader as root, as before")
    if before.get("bwrap") and bwrap is None:
        steps.append("install bubblewrap (apt-get install bubblewrap)")
    if before["tier"] == "root" and os.geteuid() == 0:
        closed = closed_to_others(tier.hidden, bwrap is not None)
        if closed:
            steps.append("chmod o+rx " + " ".join(shlex.quote(str(p)) for p in closed))
    return "; ".join(steps) or "what the cause names, then run again"


def closed_to_others(hidden: tuple[Path, ...], with_bwrap: bool) -> list[Path]:
    """The folders of this Python (those bubblewrap binds, and the folders between them and its sys.path and
    executable) that others cannot enter and list: a worker that drops to the student uid cannot import from them.
    Without bubblewrap, which makes the folders above those it binds, their parents too."""
    bound = python_paths(hidden)
    inner = [Path(p).resolve() for p in [*sys.path, Path(sys.executable).parent] if p and os.path.isdir(p)]
    folders: set[Path] = set()
    for top in bound:
        folders.update([top, *([] if with_bwrap else top.parents)])
        for path in inner:
            folders.update(p for p in [path, *path.parents] if p.is_relative_to(top))
    return sorted(p for p in folders if not _open_to_others(p))


def _open_to_others(path: Path) -> bool:
    try:
        return os.stat(path).st_mode & 0o005 == 0o005
    except OSError:
        return True  # gone: nothing to mend


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

    def walkable(path: Path) -> list[str]:
        """bwrap makes a bound path's missing parents 0700; the student uid must be able to walk through them."""
        parents = [p for p in reversed(path.parents[:-1]) if p not in made and p != Path("/tmp")  # /tmp: bwrap's tmpfs, 0755
                   and not any(p.is_relative_to(bound) for bound in (Path("/usr"), *python))]
        made.update(parents)
        return [arg for parent in parents for arg in ("--perms", "0755", "--dir", str(parent))]

    for path in python:
        if not path.is_relative_to("/usr"):
            args += [*walkable(path), "--ro-bind", str(path), str(path)]
    for device in sorted(glob.glob("/dev/nvidia*")):  # a lent GPU
        args += ["--dev-bind", device, device]
    # the scratch folder's parents too: a TMPDIR below /tmp (/tmp/grading) is no parent bwrap has
    return [*args, *_masks(hidden, [Path("/usr"), *python]), *walkable(scratch), "--bind", str(scratch), str(scratch),
            "--chdir", str(workdir)]


def _masks(hidden: tuple[Path, ...], bound: list[Path]) -> list[str]:
    """Mounts over each hidden path inside a bound folder (results or a secret a TA put in the venv): an empty
    read-only folder over a folder, /dev/null over a file. What is hidden stays out of reach without taking
    Python's folder with it, which would leave workers nothing to start."""
    args: list[str] = []
    for path in hidden:
        if path.exists() and any(path.is_relative_to(b) for b in bound):
            args += ["--tmpfs", str(path), "--remount-ro", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    return args


def hide(paths: tuple[Path, ...], holder: str) -> list[str]:
    """Root tier without bubblewrap: take every permission for others off what the worker must not read, for as long as
    some grader on this machine holds them hidden (unhide). The modes taken are recorded, under a lock, in a file every
    grader of this user shares, so that a grader ending never bares what another one still grades behind. Returns a note
    where nothing can be recorded: the files are then hidden for good."""
    try:
        record = _locked_record()
    except OSError as exc:
        _take(paths, {})
        return [f"the grader's files stay hidden from others after this run: their modes could not be recorded ({exc})"]
    with _hiding(record) as hiding:
        hiding["holders"][holder] = _process(os.getpid())
        _take(paths, hiding["modes"])
    return []


def _take(paths: tuple[Path, ...], modes: dict[str, int]) -> None:
    for path in paths:
        mode = _mode(path)
        if mode is not None and mode & 0o007:  # one hidden already keeps the mode recorded by whoever hid it
            modes[str(path)] = mode
            os.chmod(path, mode & ~0o007)


def unhide(holder: str) -> None:
    """`holder` no longer needs the files hidden: when no live grader does, give each file hidden back its mode, unless
    someone changed it since (then it stays as they left it)."""
    with contextlib.suppress(OSError), _hiding(_locked_record()) as hiding:
        hiding["holders"].pop(holder, None)
        if hiding["holders"]:
            return
        for path, mode in hiding["modes"].items():
            if _mode(Path(path)) == mode & ~0o007:
                os.chmod(path, mode)
        hiding["modes"] = {}


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _process(pid: int) -> list:
    """A process as (pid, start time): a pid reused by another process is not mistaken for a grader still running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return [pid, int(f.read().rsplit(b")", 1)[1].split()[19])]
    except (OSError, ValueError, IndexError):
        return [pid, None]


def _locked_record():
    """The record of what is hidden (state_dir()/hidden.json), open and locked for this process alone."""
    import fcntl  # here, not on import: the portable tier imports this module on any OS

    path = state_dir() / "hidden.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    f = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600), "r+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX)
    except OSError:
        f.close()
        raise
    return f


@contextlib.contextmanager
def _hiding(record):
    """The record's {"holders": {holder: [pid, start]}, "modes": {path: mode}}, written back and unlocked on leaving;
    holders no longer running (a grader killed) are dropped on the way in."""
    with record:
        try:
            hiding = json.loads(record.read() or "{}")
        except ValueError:
            hiding = {}
        holders = hiding.get("holders", {})
        hiding = {"holders": {h: p for h, p in holders.items() if _process(p[0]) == p}, "modes": dict(hiding.get("modes", {}))}
        try:
            yield hiding
        finally:
            record.seek(0)
            record.truncate()
            record.write(json.dumps(hiding, indent=1))


def is_python_environment(path: Path) -> bool:
    """A virtual environment or a Python installation: what some worker's Python may run from."""
    return (path / "pyvenv.cfg").exists() or any(path.glob("bin/python*"))


def grader_files(rubric_dir: Path, solutions_dir: Path | None, extra: list[Path]) -> list[Path]:
    """What students must not read: the rubric's folder entry by entry, solutions/, the grader's own package, and
    `extra`. Never a Python environment there (.venv, or any other: hiding one would keep the workers of the next run
    that starts from it from starting as the student uid), nor a folder holding the Python that runs the grader."""
    package = Path(__file__).resolve().parents[2]  # autograder/
    python = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    inside = [p for p in rubric_dir.resolve().iterdir()
              if not any(py.is_relative_to(p) for py in python) and not (p.is_dir() and is_python_environment(p))]
    return [*inside, *([solutions_dir] if solutions_dir else []), package, *extra]


class Isolation:
    """A tier put in force for this process, once (the command line enters it; so do tests and benchmarks):
    the grader becomes undumpable and a subreaper and, at the root tier without bubblewrap (whose mounts leave the
    grader's files out), its files are hidden from students until it leaves. Grading under it changes nothing
    process-wide; leaving it kills what students left running and gives the files hidden back their modes (or, for a
    process that never leaves, such as a batch's job, its exit does)."""

    def __init__(self, tier: Tier):
        self.tier, self.notes = tier, list(tier.notes)
        self.holder: str | None = None

    def __enter__(self) -> Isolation:
        if self.tier.walled:
            self.notes += reaper.harden_parent()
        if self.tier.name == "root" and self.tier.bwrap is None:
            self.holder = secrets.token_hex(8)
            atexit.register(self._unhide)
            self.notes += hide(self.tier.hidden, self.holder)
        return self

    def __exit__(self, *exc) -> None:
        if self.tier.walled:
            for uid in {self.tier.with_id(k).student_id for k in range(STUDENT_IDS)}:
                reaper.sweep(uid)
        atexit.unregister(self._unhide)
        self._unhide()  # after the sweep: no student process is left to read what is bared

    def _unhide(self) -> None:
        if self.holder is not None:
            unhide(self.holder)
            self.holder = None

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
