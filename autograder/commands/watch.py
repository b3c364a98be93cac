"""`check --watch`: the visible cases of a component again on every save of its files, as `check` runs them, in the
time of the cases themselves.

The grader stays up between runs with its imports done and the rubric loaded, under one isolation. The template
that sandboxed workers fork from (sandbox/host/template.py) and the reference's worker for timing cases are started
once, on this, the main thread (a sandboxed process dies with the thread that started it), and replaced only once
gone; each run forks fresh workers, in a fresh copy of the submission, so its cases, isolation and feedback are
`check`'s. In the portable tier nothing forks: each run spawns its workers as `check` does.

Saves are seen by comparing snapshots of what open_submission reads: the code files and notebooks of the folder (or
the one file given), hidden folders, __pycache__ and Python environments left out. On Linux, inotify (through libc:
no dependency) says when to look, at once; elsewhere the folder is polled. An editor writes a save in a burst
(truncate then write, or a temporary file then a rename), so a change is run once the files have held still, with
no event, for SETTLE_SECONDS. A change in a requested component's own file (or its notebook) checks the requested
components of that file; a change in any other file (a helper module, another component's file) may reach any of
them through an import, so it checks them all.

Ctrl-C (and SIGTERM, SIGHUP: cli.stops_as_interrupts) ends it through the context managers: workers killed, the
template closed, scratch folders removed, and cli.main's exit status 130 (143, 129).
"""
from __future__ import annotations

import ctypes
import os
import select
import stat
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path, PurePosixPath

from rich.markup import escape

from ..cases import TIMING
from ..report import print_table
from ..rubric import Component, Rubric, RubricError
from ..runner import grade, reference_worker, warm_template
from ..sandbox.host import scratch
from ..sandbox.host.floor import Floor
from ..sandbox.host.template import Template
from ..sandbox.host.tiers import Isolation, Tier, TierUnavailable, is_python_environment, student_isolation
from ..submission import Submission, open_submission
from ..submission.names import CODE, joined, notebook_name
from ..submission.reading import SubmissionError
from ..terminal import USAGE_ERROR, Terminal, printable
from ..timing import kept_started
from . import rubric_of
from .check import students_own, visible_cases_line
from .grade import print_account

POLL_SECONDS = 0.05  # a stat of each file the submission reads: cheap, and half of it is the wait a save sees
EVENTS_POLL_SECONDS = 1.0  # with inotify, a look this often all the same: a folder made since the last look is not watched
SETTLE_SECONDS = 0.03  # a burst of writes is over once the files held still this long
SETTLE_MOST = 2.0  # files written without pause (a generated file) still get checked after this
ASIDE = ("__pycache__", "__MACOSX")  # with hidden folders: never read by open_submission

Stamp = tuple[int, int, int]  # mtime in ns, size, inode: a save changes one (an editor's rename-save the inode)


def snapshot(path: Path, seen: list[Path] | None = None) -> dict[str, Stamp]:
    """What a save changes of each file open_submission reads at `path`, by its path inside it (a .zip, .py or
    .ipynb given: that file). Links are stamped, not followed, as open_submission reads them. The folders looked
    in are added to `seen`."""
    if not path.is_dir():
        stamp = _stamp(path)
        if seen is not None:
            seen.append(path.parent)
        return {path.name: stamp} if stamp else {}
    found: dict[str, Stamp] = {}
    folders = [(path, "")]
    while folders:
        folder, rel = folders.pop()
        if seen is not None:
            seen.append(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError:  # removed or unreadable since it was listed: what open_submission will say, if anything
            continue
        for entry in entries:
            inside = f"{rel}{entry.name}"
            if entry.name.startswith(".") or entry.name in ASIDE:
                continue
            if entry.is_dir(follow_symlinks=False):
                if not is_python_environment(Path(entry.path)):
                    folders.append((Path(entry.path), inside + "/"))
            elif CODE.fullmatch(entry.name) and (stamp := _stamp(Path(entry.path))):
                found[inside] = stamp
    return found


def _stamp(path: Path) -> Stamp | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino) if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) else None


def changes(before: dict[str, Stamp], after: dict[str, Stamp]) -> dict[str, str]:
    """Each file that differs between two snapshots: changed, added or removed."""
    said = {rel: "changed" for rel in before.keys() & after.keys() if before[rel] != after[rel]}
    said |= {rel: "added" for rel in after.keys() - before.keys()}
    said |= {rel: "removed" for rel in before.keys() - after.keys()}
    return dict(sorted(said.items()))


def selected(changed: Iterable[str], components: list[Component]) -> list[Component]:
    """The components to check again after these files changed (`components`: those requested, in order)."""
    own: dict[str, set[str]] = {}  # a requested component's file, and its notebook -> that file
    for c in components:
        own.setdefault(c.file, set()).add(c.file)
        own.setdefault(notebook_name(c.file), set()).add(c.file)
    files: set[str] = set()
    for rel in changed:
        name = unicodedata.normalize("NFC", PurePosixPath(rel).name)
        if name not in own:  # another file may be imported by any of them
            return list(components)
        files |= own[name]
    return [c for c in components if c.file in files]


class Inotify:
    """Linux's inotify, through libc: `pause` returns at the first change in the folders watched. `opened` is None
    where the OS has none (macOS, Windows) or refuses one (its limit of instances reached)."""

    # IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF
    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800

    def __init__(self, libc, fd: int):
        self.libc, self.fd = libc, fd

    @classmethod
    def opened(cls) -> Inotify | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)  # IN_NONBLOCK, IN_CLOEXEC: the same bits
        except (OSError, AttributeError):
            return None
        return cls(libc, fd) if fd >= 0 else None

    def watch(self, folders: list[Path]) -> None:
        """Watch these folders too (one watched already keeps its watch; one gone since the snapshot is left out)."""
        for folder in folders:
            self.libc.inotify_add_watch(self.fd, os.fsencode(folder), self.MASK)

    def pause(self, seconds: float) -> bool:
        """Wait up to `seconds`, less at the first event: whether one came (all that came are read)."""
        if not select.select([self.fd], [], [], seconds)[0]:
            return False
        try:
            while os.read(self.fd, 1 << 16):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        os.close(self.fd)


class Watcher:
    """Waits for saves at `path`: woken by inotify where there is one, else by polling. `pause` (time.sleep's
    signature; true when woken by an event) is for tests."""

    def __init__(self, path: Path, pause: Callable[[float], bool | None] | None = None):
        self.path, self.events = path, None if pause else Inotify.opened()
        self.pause = pause or (self.events.pause if self.events else time.sleep)
        self.poll = EVENTS_POLL_SECONDS if self.events else POLL_SECONDS
        self.seen = self._snapshot()

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc) -> None:
        if self.events:
            self.events.close()

    def _snapshot(self) -> dict[str, Stamp]:
        folders: list[Path] = []
        now = snapshot(self.path, folders)
        if self.events:
            self.events.watch(folders)
        return now

    def wait(self) -> dict[str, str]:
        """Block until some files changed and then held still: what changed since the last call (or since the start).
        A file written while a run reads it or after is seen by the next call, against what the run was told."""
        while True:
            self.pause(self.poll)
            now = self._snapshot()
            if now == self.seen:
                continue
            most = time.monotonic() + SETTLE_MOST
            while time.monotonic() < most:
                woken = self.pause(SETTLE_SECONDS)
                later = self._snapshot()
                if later == now and not woken:
                    break
                now = later
            said, self.seen = changes(self.seen, now), now
            if said:  # a burst that put every file back as it was changed nothing
                return said


def trigger_line(changed: dict[str, str], components: list[Component]) -> str:
    """What started a run: "ngram.py changed: checking ngram"."""
    shown = [f"{printable(rel)} {how}" for rel, how in list(changed.items())[:3]]
    more = [f"{len(changed) - 3} more files"] * (len(changed) > 3)
    return f"{joined(shown + more, 'and')}: checking {', '.join(c.id for c in components)}"


class _Warm:
    """What stays up between runs: the template the submission's workers fork from, and the reference's worker for
    timing cases, each started on the thread that makes the runs (where they live as long as it does) and started
    again only once gone."""

    def __init__(self, rubric: Rubric, tier: Tier, components: list[Component]):
        self.tier, self.visible = tier, [(c, [k for k in c.cases if k.visible]) for c in components]
        self.template: Template | None = None
        timed = [k for _, cases in self.visible for k in cases if k.check in TIMING]
        self.reference = reference_worker(rubric, tier, timed) if timed else None

    def __enter__(self) -> _Warm:
        return self

    def __exit__(self, *exc) -> None:
        if self.template:
            self.template.close()
        if self.reference:
            self.reference.stop()

    def ready(self, submission: Submission, components: list[Component]) -> dict:
        """grade's `template` and `reference` for a run of `components` on `submission`."""
        if self.template is None or self.template.gone:
            if self.template:
                self.template.close()
            self.template = warm_template(self.visible, submission, self.tier)
        if self.reference and any(k.visible and k.check in TIMING for c in components for k in c.cases):
            kept_started(self.reference, Floor())
        return {"template": self.template, "reference": self.reference}


def run(args, ui: Terminal) -> int:
    """`check --watch`: a check of the requested components now, then again on each save of their files, until
    Ctrl-C; only a rubric, component or tier that cannot be used ends it early (USAGE_ERROR)."""
    folder = Path(args.dir)
    try:
        rubric = rubric_of(args, ui, args.component or None, calls=False)
        components = [rubric.component(c) for c in args.component] if args.component else list(rubric.components)
        if not folder.exists():
            raise SubmissionError(f"{folder.resolve()} does not exist: run check where your files are, or give --dir")
        isolation, portable = student_isolation(rubric.path.parent, rubric.solutions_dir, args.require_tier)
    except (RubricError, SubmissionError, TierUnavailable, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    if portable:
        ui.note(portable)
    ui.warn(isolation.tier.warning)
    with Watcher(folder) as watcher, isolation, _Warm(rubric, isolation.tier, components) as warm:
        runs = _Runs(rubric, folder, isolation, warm, ui)
        runs.check(f"checking {', '.join(c.id for c in components)}", components)
        while True:
            ui.note(f"watching {folder.resolve()} for changes; Ctrl-C stops")
            changed = watcher.wait()
            todo = selected(changed, components)
            runs.check(trigger_line(changed, todo), todo)


class _Runs:
    """Checks of one folder, each as `check` makes it, with what stays warm between them."""

    def __init__(self, rubric: Rubric, folder: Path, isolation: Isolation, warm: _Warm, ui: Terminal):
        self.rubric, self.folder, self.isolation, self.warm, self.ui = rubric, folder, isolation, warm, ui
        self.account: tuple | None = None  # the account last printed: printed again only when it changes

    def check(self, heading: str, components: list[Component]) -> None:
        """One check under `heading`; a submission that cannot be opened is said, and the next save checked."""
        ui, rubric = self.ui, self.rubric
        ui.out.print(f"\n[bold]{datetime.now():%H:%M:%S} {escape(heading)}[/]", highlight=False)
        try:
            with scratch.folder("check") as copies:
                submission = open_submission(self.folder, copies / "submission", accept_misnamed=rubric.accept_misnamed,
                                             graded=rubric.files)
                run = grade(rubric, submission, secret="local", isolation=self.isolation, visible_only=True,
                            component_ids=[c.id for c in components], **self.warm.ready(submission, components))
        except (SubmissionError, OSError) as exc:  # a file saved half-way, or removed: said, and the next save checked
            ui.error(f"{exc} (in {self.folder.resolve()})")
            return
        print_table(run, ui.out, ui.verbosity)
        account = students_own(submission.account, rubric, self.folder)
        if account != self.account:
            print_account(account, ui)
            self.account = account
        ui.out.print(visible_cases_line(run), highlight=False)
