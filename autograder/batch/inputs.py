"""What a batch grades: a Gradescope "Export Submissions" archive, or a folder of submissions.

A Gradescope export (zipped or not, perhaps wrapped in `assignment_<id>_export/`) holds
`submission_metadata.yml`, whose keys are Ruby symbols (`:submitters:`, `:name:`, `:sid:`, `:email:`,
`:created_at:`, ...), beside one `submission_<id>/` folder per submission. Any other folder is a class of
submissions: each entry (a folder, a `.zip`, a `.py` or an `.ipynb`) is one, its name (less the suffix) its id.
"""
from __future__ import annotations

import hashlib
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

METADATA = "submission_metadata.yml"
SUBMISSION_SUFFIXES = (".zip", ".py", ".ipynb")
MAX_EXPORT_BYTES = 4 << 30  # an export larger than this once unpacked is refused, not unpacked


class ExportError(Exception):
    """The batch's input cannot be read: the message says what is wrong with it."""


@dataclass(frozen=True)
class Submitter:
    name: str = ""
    sid: str = ""
    email: str = ""


@dataclass(frozen=True)
class Entry:
    """One submission of the batch: its id, where it is, and who submitted it (several for a group)."""

    id: str
    path: Path
    submitters: tuple[Submitter, ...] = field(default=())

    def digest(self) -> str:
        """sha256 over the submission's files, names and bytes: what the journal keys a grading by."""
        h = hashlib.sha256()
        files = sorted(p for p in self.path.rglob("*") if p.is_file()) if self.path.is_dir() else [self.path]
        for path in files:
            h.update(path.relative_to(self.path).as_posix().encode() if self.path.is_dir() else path.name.encode())
            h.update(b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
        return h.hexdigest()


def read_batch(source: Path, unpack_to: Path) -> tuple[list[Entry], str]:
    """The submissions in `source`, sorted by id, and what kind of input it was. A zip is unpacked under
    `unpack_to` first (once: an unpacked copy of the same zip is reused)."""
    if not source.exists():
        raise ExportError(f"{source} does not exist")
    if source.is_file():
        if not zipfile.is_zipfile(source):
            raise ExportError(f"{source} is neither a folder nor a zip archive")
        source = _unpacked(source, unpack_to)
    export = _export_root(source)
    if export:
        return _gradescope(export), "Gradescope export"
    return _folder(source), "folder of submissions"


def _unpacked(archive: Path, unpack_to: Path) -> Path:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    target = unpack_to / f"{archive.stem}-{digest}"
    if (target / ".complete").exists():
        return target
    with zipfile.ZipFile(archive) as z:
        members = z.infolist()
        for m in members:
            name = PurePosixPath(m.filename)
            if name.is_absolute() or ".." in name.parts:
                raise ExportError(f"{archive.name} holds an unsafe path: {m.filename}")
        if sum(m.file_size for m in members) > MAX_EXPORT_BYTES:
            raise ExportError(f"{archive.name} unpacks to more than {MAX_EXPORT_BYTES >> 30} GiB")
        z.extractall(target)
    (target / ".complete").touch()
    return target


def _export_root(folder: Path) -> Path | None:
    """The folder holding submission_metadata.yml: `folder` itself, or its one `assignment_<id>_export/`."""
    if (folder / METADATA).is_file():
        return folder
    inner = [p for p in folder.iterdir() if p.is_dir() and (p / METADATA).is_file()]
    if len(inner) > 1:
        raise ExportError(f"{folder} holds {len(inner)} Gradescope exports ({', '.join(p.name for p in inner)}); grade one at a time")
    return inner[0] if inner else None


def _gradescope(export: Path) -> list[Entry]:
    path = export / METADATA
    try:
        metadata = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        raise ExportError(f"{path}{where}: not valid YAML") from None
    if not isinstance(metadata, dict):
        raise ExportError(f"{path}: expected a mapping of submission folders to their metadata")
    entries = []
    for key, meta in metadata.items():
        folder = export / str(key)
        if not re.fullmatch(r"submission_\d+", str(key)):
            raise ExportError(f"{path}: {key!r} is not a submission folder name (submission_<id>)")
        if not isinstance(meta, dict):
            raise ExportError(f"{path}: the metadata of {key} is not a mapping")
        submitters = meta.get(":submitters:", meta.get(":submitters", []))
        if not isinstance(submitters, list):
            raise ExportError(f"{path}: :submitters: of {key} is not a list")
        people = tuple(Submitter(**{k: str(_symbol(person, k) or "") for k in ("name", "sid", "email")})
                       for person in submitters if isinstance(person, dict))
        entries.append(Entry(str(key).removeprefix("submission_"), folder, people))
    present = {p.name for p in export.iterdir() if p.is_dir()}
    missing = [e.path.name for e in entries if e.path.name not in present]
    if missing:
        raise ExportError(f"{path} lists submissions whose folders are not in the export: {', '.join(missing[:5])}")
    return sorted(entries, key=lambda e: _id_order(e.id))


def _symbol(mapping: dict, key: str):
    """A value under a Ruby-symbol key, as Gradescope writes them (`:name:`); plain keys are accepted too."""
    for k in (f":{key}:", f":{key}", key):
        if k in mapping:
            return mapping[k]
    return None


def _folder(folder: Path) -> list[Entry]:
    entries, ids = [], {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        if not (path.is_dir() or path.suffix in SUBMISSION_SUFFIXES):
            continue  # a class list or notes beside the submissions
        sid = path.name if path.is_dir() else path.stem
        if sid in ids:
            raise ExportError(f"{ids[sid].name} and {path.name} would both be submission {sid!r}: rename one")
        ids[sid] = path
        entries.append(Entry(sid, path))
    if not entries:
        raise ExportError(f"{folder} holds no submissions (folders, .zip, .py or .ipynb files)")
    return sorted(entries, key=lambda e: _id_order(e.id))


def _id_order(sid: str):
    """Numeric ids in numeric order, then the rest by name."""
    return (0, int(sid), "") if sid.isdigit() else (1, 0, sid)
