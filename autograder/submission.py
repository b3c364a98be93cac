"""Finding a submission's files: a folder, a .zip of one, or a single .py file.

The files are copied (never imported) into a private folder. Component files
are looked for at the top level, then in one nested folder, which is how
students zip a folder and how Gradescope stores uploads.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .collect import COMPONENT_FILES

API_FILES = frozenset(COMPONENT_FILES.values())
MAX_FILE_BYTES = 1 << 20
MAX_ZIP_BYTES = 64 << 20


class SubmissionError(Exception):
    """The submission cannot be read at all; the message says why."""


@dataclass(frozen=True)
class Submission:
    dir: Path  # flat folder of the submission's .py files
    files: frozenset[str]  # the student-API files present
    notes: tuple[str, ...] = ()  # what was skipped, for the report


def open_submission(path: Path, workdir: Path) -> Submission:
    """Copy the submission's Python files from `path` into `workdir`."""
    if not path.exists():
        raise SubmissionError(f"{path} does not exist")
    workdir.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        sources = {p.relative_to(path).as_posix(): p.read_bytes for p in path.rglob("*.py") if p.is_file()}
    elif path.suffix == ".zip":
        sources = _zip_sources(path)
    elif path.suffix == ".py":
        if path.name not in API_FILES:
            raise SubmissionError(f"a single file must be one of {', '.join(sorted(API_FILES))}; got {path.name}")
        sources = {path.name: path.read_bytes}
    else:
        raise SubmissionError(f"{path.name}: expected a folder, a .zip or a .py file")
    folder = _component_folder(sources)
    notes = []
    for rel, read in sources.items():
        rel_path = PurePosixPath(rel)
        if rel_path.parent.as_posix() != folder:
            continue
        data = read()
        if len(data) > MAX_FILE_BYTES:
            notes.append(f"{rel} skipped: larger than {MAX_FILE_BYTES >> 10} KiB")
            continue
        (workdir / rel_path.name).write_bytes(data)
    files = frozenset(p.name for p in workdir.iterdir() if p.name in API_FILES)
    return Submission(workdir, files, tuple(notes))


def _component_folder(sources: dict) -> str:
    """The folder holding the student-API files: the top level, else one nested folder."""
    by_folder: dict[str, int] = {}
    for rel in sources:
        p = PurePosixPath(rel)
        if p.name in API_FILES and len(p.parts) <= 2 and not p.parts[0].startswith(("__MACOSX", ".")):
            by_folder[p.parent.as_posix()] = by_folder.get(p.parent.as_posix(), 0) + 1
    if not by_folder:
        return "."
    return "." if "." in by_folder else max(by_folder, key=by_folder.get)


def _zip_sources(path: Path) -> dict:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(f"{path.name} is not a readable zip file ({exc})") from None
    members = [m for m in archive.infolist() if m.filename.endswith(".py") and not m.is_dir()]
    for m in members:
        p = PurePosixPath(m.filename)
        if p.is_absolute() or ".." in p.parts:
            raise SubmissionError(f"{path.name} holds an unsafe path: {m.filename}")
    if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
        raise SubmissionError(f"{path.name} unpacks to more than {MAX_ZIP_BYTES >> 20} MiB of Python files")
    return {m.filename: (lambda m=m: archive.read(m)) for m in members}

