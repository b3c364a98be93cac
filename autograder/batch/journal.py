"""What a batch has finished: one JSON line per graded submission, appended and synced once its results are on
disk, so that a batch killed at any moment (even `kill -9`) resumes with nothing lost and nothing graded twice.

A line holds the submission's id, its content digest, the key of what graded it (rubric, solutions, grader and
secret digests) and its row of the gradebook. A submission is done when its latest line has both the digest of
its files now and the key of this batch; otherwise it is graded (again).
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

from .. import __version__

GRADER = Path(__file__).resolve().parents[1]  # the autograder package


def tree_digest(folder: Path | None, suffixes: tuple[str, ...] = ()) -> str:
    """sha256 over a folder's files (names and bytes), those ending in `suffixes` if given; "" for None."""
    if folder is None:
        return ""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        if suffixes and path.suffix not in suffixes:
            continue
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def grading_key(rubric_digest: str, solutions_digest: str, secret: str) -> str:
    """What decides a grade besides the submission: the rubric, the solutions, the grader's code, and the secret."""
    grader = tree_digest(GRADER, (".py", ".yaml", ".txt"))
    secret_digest = hashlib.sha256(secret.encode()).hexdigest()
    return hashlib.sha256("\0".join([rubric_digest, solutions_digest, grader, __version__, secret_digest]).encode()).hexdigest()


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

    def current(self, sid: str, content: str, key: str) -> dict | None:
        """The submission's latest line, when it graded these contents with this key: its row in the gradebook."""
        entry = self.latest.get(sid)
        return entry if entry and entry.get("content") == content and entry.get("key") == key else None

    def done(self, sid: str, content: str, key: str) -> bool:
        """Whether the submission needs no grading: a grading the grader itself failed (infra_error) is graded again."""
        entry = self.current(sid, content, key)
        return entry is not None and entry.get("status") != "infra_error"

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
