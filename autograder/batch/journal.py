"""What a batch has finished: one JSON line per graded submission, appended and synced once its results are on
disk, so that a batch killed at any moment (even `kill -9`) resumes with nothing lost and nothing graded twice.

A line holds the submission's id, its content digest, the key of each component it graded (component_keys: what
decides that component's result) and its row of the gradebook. A component of a submission is graded (again) when
its latest line has other contents, or another key for it; the others keep their results. So a fix to one case
regrades that case's component in every submission, and nothing else.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import secrets
from pathlib import Path

from .. import __version__
from ..cases import CHECKS
from ..rubric import Rubric

GRADER = Path(__file__).resolve().parents[1]  # the autograder package


def tree_digest(folder: Path | None, suffixes: tuple[str, ...] = (), leave_out: set[Path] = frozenset()) -> str:
    """sha256 over a folder's files (names and bytes), those ending in `suffixes` if given, less `leave_out`; "" for
    None."""
    if folder is None:
        return ""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        if (suffixes and path.suffix not in suffixes) or path.resolve() in leave_out:
            continue
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def component_keys(rubric: Rubric, secret: str) -> dict[str, str]:
    """Per component of `rubric`, a digest of what decides its result: its section of the rubric (cases, points,
    parameters, tolerances, forbidden names, staff tests and their files), the rubric's settings every component
    grades by, its solution file, the modules of its checks (cases/ and oracles/ of its name), the rest of the
    grader (the engine), and the secret."""
    specific = {c.id: _check_modules(c) for c in rubric.components}
    engine = tree_digest(GRADER, (".py", ".yaml", ".txt"), leave_out=set().union(*specific.values(), *map(_files, NO_GRADE)))
    shared = "\0".join([__version__, engine, repr(rubric.timing), str(rubric.memory_mb), str(rubric.accept_misnamed),
                        hashlib.sha256(secret.encode()).hexdigest()])
    keys = {}
    for c in rubric.components:
        h = hashlib.sha256(f"{shared}\0{c!r}".encode())
        solution = rubric.solutions_dir / c.file if rubric.solutions_dir else None
        for path in sorted({*specific[c.id], *(rubric.path.parent / k.unittest.file for k in c.cases if k.unittest),
                            *([solution] if solution and solution.is_file() else [])}):
            h.update(str(path).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
        keys[c.id] = h.hexdigest()
    return keys


# The grader's files that decide no grade: the class report, releases, the command line.
NO_GRADE = [GRADER / "batch" / "report", GRADER / "release", GRADER / "cli.py", GRADER / "__main__.py"]


def _files(path: Path) -> set[Path]:
    return {p.resolve() for p in path.rglob("*")} if path.is_dir() else {path.resolve()}


def _check_modules(component) -> set[Path]:
    """The grader's files that hold `component`'s checks, and the oracles of the same name (the reference's answers)."""
    modules = {Path(inspect.getfile(CHECKS[k.check])).resolve() for k in component.cases if k.check in CHECKS}
    return modules | {p for m in modules if (p := GRADER / "oracles" / m.name).is_file() and m.parent.name == "cases"}


def batch_secret(out: Path, secret_file: Path | None, say=None) -> tuple[str | None, Path | None]:
    """--secret-file, else $AUTOGRADER_SECRET, else the batch's own secret.txt in `out`, made on the first run (so that a
    resumed batch draws the same hidden inputs) when `say` is given to tell of it; without `say`, (None, None) where
    none is made yet: no grading can be current."""
    if secret_file is not None:
        return secret_file.read_text().strip(), secret_file.resolve()
    if os.environ.get("AUTOGRADER_SECRET"):
        return os.environ["AUTOGRADER_SECRET"], None
    own = out / "secret.txt"
    if not own.exists():
        if say is None:
            return None, None
        fd = os.open(own, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(16) + "\n")
        say(f"note: no --secret-file and no $AUTOGRADER_SECRET: hidden inputs come from a new secret in {own}, which "
            "later runs of this batch reuse")
    return own.read_text().strip(), own.resolve()


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.latest: dict[str, dict] = {}  # submission id -> its latest line
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:  # the last line of a batch killed while writing it
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                    self.latest[entry["id"]] = entry

    def stale(self, sid: str, content: str, keys: dict[str, str]) -> list[str]:
        """The components of `keys` the submission needs graded: those whose key differs from its latest line's; all where
        that line graded other contents, is a line of an older grader (no keys), the grader's own failure (infra_error),
        or a grading with nothing to keep (not gradable, timed out, crashed) that a key change makes stale."""
        entry = self.latest.get(sid)
        if not entry or entry.get("content") != content or not isinstance(entry.get("keys"), dict):
            return list(keys)
        stale = [cid for cid, key in keys.items() if entry["keys"].get(cid) != key]
        if entry.get("status") == "infra_error" or (stale and entry.get("status") != "ok"):
            return list(keys)  # the grader's failure, or no whole grading to keep (not gradable, timed out, crashed)
        return stale

    def current(self, sid: str, content: str, keys: dict[str, str]) -> dict | None:
        """The submission's latest line, when it graded these contents with these keys: its row in the gradebook (an
        infra_error's too, which a rerun grades again)."""
        entry = self.latest.get(sid)
        fresh = entry and entry.get("content") == content and isinstance(entry.get("keys"), dict)
        return entry if fresh and all(entry["keys"].get(cid) == key for cid, key in keys.items()) else None

    def record(self, entry: dict) -> None:
        """Append one finished submission, durably, before anything else counts it as done."""
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.latest[entry["id"]] = entry
