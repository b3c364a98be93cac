"""What a batch grades: a Gradescope "Export Submissions" archive, or a folder of submissions.

A Gradescope export (zipped or not, perhaps wrapped in `assignment_<id>_export/`) holds
`submission_metadata.yml`, whose keys are Ruby symbols (`:submitters:`, `:name:`, `:sid:`, `:email:`,
`:created_at:`, ...), beside one `submission_<id>/` folder per submission. Any other folder is a class of
submissions: each entry (a folder, a `.zip`, a `.py` or an `.ipynb`) is one, its name (less the suffix) its id.
No link in the input is followed: an entry or `submission_<id>/` that is a link is listed, and refused when graded
(open_submission); a metadata file that is a link refuses the export.

A batch accounts for every submission it can see, and one bad submission never stops it: a member of a zipped export that
cannot be read (corrupt, truncated, encrypted, an unsafe path) makes its submission an entry with a `problem`, not
graded; so does a folder the metadata lists but the export lacks; a `submission_<id>/` folder the metadata does not list
is graded under its folder name, with a `note` saying so. Only what makes the whole input unreadable (no zip at all,
metadata that is not what Gradescope writes) refuses the batch.
"""
from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import json
import os
import re
import shutil
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import yaml

from ..terminal import printable
from ..submission.reading import open_file_within, read_within, walk, zip_link, zip_name

METADATA = "submission_metadata.yml"
SUBMISSION_SUFFIXES = (".zip", ".py", ".ipynb")
MAX_EXPORT_BYTES = 4 << 30  # an export larger than this once unpacked is refused, not unpacked
MAX_FIELD = 256  # characters of a submitter's name, sid or email kept: no real one is longer, and a spreadsheet cell holds 32767


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
    problem: str = ""  # why the export holds this submission unreadably: it is not graded, and its row says this
    note: str = ""  # what a TA should know of how it was found (not listed in the metadata)

    def digest(self) -> str:
        """sha256 over the submission's files, names and bytes, and its links' targets (what a link names is never
        read), and its problem: what the journal keys a grading by."""
        h = hashlib.sha256(self.problem.encode())
        if not (self.path.exists() or self.path.is_symlink()):
            return h.hexdigest()
        linked = self.path.is_symlink()
        root = self.path if self.path.is_dir() and not linked else self.path.parent
        found = walk(root) if root == self.path else {self.path.name: os.readlink(self.path) if linked else None}
        for rel, target in found.items():
            h.update(rel.encode())
            h.update(b"\0")
            h.update(_file_digest(root, rel) if target is None else b"link\0" + os.fsencode(target))
        return h.hexdigest()


def _file_digest(root: Path, rel: str) -> bytes:
    """sha256 of a regular file inside `root`, opened as read_within opens it but read whole, however large: a file
    past the grader's read limit is still part of what the submission is. One that cannot be read (not a regular
    file, no permission) is that: open_submission says so when the submission is graded."""
    try:
        with open_file_within(root, rel) as f:
            return hashlib.file_digest(f, "sha256").digest()
    except OSError as exc:
        return f"unreadable: {errno.errorcode.get(exc.errno, exc.errno)}".encode()


class Batch(NamedTuple):
    entries: list[Entry]  # sorted by id
    kind: str  # "Gradescope export" or "folder of submissions"
    strays: tuple[str, ...] = ()  # members of a zipped export that could not be read and belong to no submission

    def selected(self, only: tuple[str, ...], source: Path) -> list[Entry]:
        """The entries that `only` names (grade-all's --only), all without it."""
        if not only:
            return self.entries
        unknown = sorted(set(only) - {e.id for e in self.entries})
        if unknown:
            raise ExportError(f"--only names submissions not in {source}: {', '.join(unknown)}")
        return [e for e in self.entries if e.id in only]


def read_batch(source: Path, unpack_to: Path) -> Batch:
    """The submissions in `source`. A zip is unpacked under `unpack_to` first (once: an unpacked copy of the same zip
    is reused), each member on its own: one that cannot be read is a problem of the submission it belongs to."""
    if not source.exists():
        raise ExportError(f"{source} does not exist")
    unreadable: dict[str, str] = {}
    if source.is_file():
        if not zipfile.is_zipfile(source):
            raise ExportError(f"{source} is neither a folder nor a readable zip archive (a zip cut short by a failed "
                              "download is not one: download it again)")
        source, unreadable = _unpacked(source, unpack_to)
        metadata = next((why for name, why in unreadable.items() if PurePosixPath(name).name == METADATA), None)
        if metadata:
            raise ExportError(f"{metadata}: without it the export cannot be read; download it again")
    export = _export_root(source)
    if export:
        return _with_problems(_gradescope(export), "Gradescope export", source, unreadable)
    return _with_problems(_folder(source, unreadable), "folder of submissions", source, unreadable)


UNREADABLE = ".unreadable.json"  # in an unpacked export: each member that could not be unpacked, and why


def _unpacked(archive: Path, unpack_to: Path) -> tuple[Path, dict[str, str]]:
    """The folder `archive` is unpacked to, and the members that could not be (path in the zip -> why)."""
    with open(archive, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()[:16]
    target = unpack_to / f"{archive.stem}-{digest}"
    if (target / ".complete").exists():
        return target, json.loads((target / UNREADABLE).read_text())
    try:
        z = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ExportError(f"{archive.name} cannot be read as a zip archive ({exc}); download it again") from None
    unreadable: dict[str, str] = {}
    with z:
        members = []
        for m in z.infolist():
            name = zip_name(m)
            if name is None:
                unreadable[_safe_name(m.filename)] = (f"{archive.name} holds an unsafe path, {printable(m.filename)} (it would be "
                                                      "written outside the folder it is unpacked to): not unpacked")
            else:
                members.append((m, name))
        if sum(m.file_size for m, _ in members) > MAX_EXPORT_BYTES:
            raise ExportError(f"{archive.name} unpacks to more than {MAX_EXPORT_BYTES >> 30} GiB")
        shutil.rmtree(target, ignore_errors=True)  # what a run killed while unpacking left
        entries = [(m, name, target / name, zip_link(z, m)) for m, name in members]
        for m, name, path, link in sorted(entries, key=lambda e: e[3] is not None):  # links last: nothing is written through one
            try:
                _unpack(z, m, path, link, target)
            except UNREADABLE_MEMBER as exc:
                path.unlink(missing_ok=True)  # what was written of it before the damage
                unreadable[name] = f"{name} could not be read from {archive.name}: {_damage(exc)}"
    (target / UNREADABLE).write_text(json.dumps(unreadable))
    (target / ".complete").touch()
    return target, unreadable


def _unpack(archive: zipfile.ZipFile, member: zipfile.ZipInfo, path: Path, link: str | None, top: Path) -> None:
    """One entry written at `path`: a link entry as a link (`link`, its target), never followed here, as open_submission
    judges it; an entry below a link is left out (open_submission refuses that link), so is a link named like a folder
    of entries; of a file and a link of one name, the link stays (links come last), to be judged."""
    if any(p.is_symlink() for p in path.parents if p.is_relative_to(top)):
        return
    if member.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if link is not None and path.is_dir() and not path.is_symlink():
        return  # a folder of the same name holds entries already: they stay, inside
    if path.is_symlink() or path.is_file():
        path.unlink()
    if link is not None:
        path.symlink_to(link)
        return
    with archive.open(member) as source, open(path, "wb") as out:
        shutil.copyfileobj(source, out)
    with contextlib.suppress(ValueError, OverflowError):  # the zip's time, as unzip keeps it: the newer of two copies is graded
        os.utime(path, (when := datetime.datetime(*member.date_time).timestamp(), when))


# What reading one damaged member of a zip raises: a bad CRC or header (BadZipFile), corrupt deflate data (zlib.error),
# a member cut short (EOFError), a password (RuntimeError), a compression zipfile lacks (NotImplementedError).
UNREADABLE_MEMBER = (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError)


def _damage(exc: Exception) -> str:
    """What is wrong with a member that could not be read, in words (zipfile's messages quote the member's ZipInfo)."""
    if isinstance(exc, RuntimeError) and "encrypted" in str(exc):
        return "it is encrypted, and only its password opens it"
    if isinstance(exc, zipfile.BadZipFile) and str(exc).startswith("Bad CRC-32"):
        return "its bytes do not match the checksum the zip holds for them (the zip is damaged there)"
    if isinstance(exc, (zlib.error, EOFError)):
        return "its compressed data is damaged or cut short"
    return f"{type(exc).__name__}: {printable(str(exc))[:200]}"


def _safe_name(filename: str) -> str:
    """An unsafe member's path as a key of the unreadable members: its safe parts, so that it can be placed (the
    submission whose folder it names), never used to write."""
    parts = [p for p in filename.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or "."


def _with_problems(entries: list[Entry], kind: str, unpacked: Path, unreadable: dict[str, str]) -> Batch:
    """`entries` with each unreadable member (path in the zip -> why) the problem of the submission it lies in; those
    in none are the batch's strays."""
    problems: dict[str, list[str]] = {}
    strays = []
    for name, why in unreadable.items():
        path = unpacked / name
        owner = next((e for e in entries if path == e.path or path.is_relative_to(e.path)), None)
        if owner is None:
            strays.append(why)
        else:
            problems.setdefault(owner.id, []).append(why)
    done = [replace(e, problem="; ".join(filter(None, [e.problem, *problems.get(e.id, [])]))) if e.id in problems else e
            for e in entries]
    return Batch(done, kind, tuple(strays))


def _export_root(folder: Path) -> Path | None:
    """The folder holding submission_metadata.yml: `folder` itself, or its one `assignment_<id>_export/`."""
    if _has_metadata(folder):
        return folder
    inner = [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and _has_metadata(p)]
    if len(inner) > 1:
        raise ExportError(f"{folder} holds {len(inner)} Gradescope exports ({', '.join(p.name for p in inner)}); grade one at a time")
    return inner[0] if inner else None


def _has_metadata(folder: Path) -> bool:
    return (folder / METADATA).is_file() or (folder / METADATA).is_symlink()  # a link: found, to be refused


def _gradescope(export: Path) -> list[Entry]:
    path = export / METADATA
    try:
        data = read_within(export, METADATA)
    except OSError as exc:
        why = "it is a link, which the grader does not follow" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise ExportError(f"{path} cannot be read: {why}") from None
    try:
        metadata = yaml.load(data, Loader=_MetadataLoader)  # bytes: the reader's errors are YAMLErrors
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None)
        raise ExportError(f"{path}{where}: not valid YAML" + (f" ({printable(problem)})" if problem else "")) from None
    if not isinstance(metadata, dict):
        raise ExportError(f"{path}: expected a mapping of submission folders to their metadata")
    entries = []
    for key, meta in metadata.items():
        folder = export / str(key)
        if not re.fullmatch(r"submission_[0-9]+", str(key)):
            raise ExportError(f"{path}: {key!r} is not a submission folder name (submission_<id>)")
        if not isinstance(meta, dict):
            raise ExportError(f"{path}: the metadata of {key} is not a mapping")
        submitters = meta.get(":submitters:", meta.get(":submitters", []))
        if not isinstance(submitters, list):
            raise ExportError(f"{path}: :submitters: of {key} is not a list")
        people = tuple(Submitter(**{k: _field(_symbol(person, k), f"{path}: :{k}: of a submitter of {key}")
                                    for k in ("name", "sid", "email")})
                       for person in submitters if isinstance(person, dict))
        missing = "" if folder.is_dir() or folder.is_symlink() else (  # a link is that submission's to refuse
            f"{METADATA} lists {key}, but the export holds no folder {key}/: download the export again")
        entries.append(Entry(str(key).removeprefix("submission_"), folder, people, problem=missing))
    listed = {e.path.name for e in entries}
    for folder in export.iterdir():
        if re.fullmatch(r"submission_[0-9]+", folder.name) and folder.name not in listed and (folder.is_dir() or folder.is_symlink()):
            entries.append(Entry(folder.name.removeprefix("submission_"), folder,
                                 note=f"not listed in {METADATA}: graded under its folder's name, with no submitter"))
    return sorted(entries, key=lambda e: _id_order(e.id))


class _MetadataLoader(yaml.SafeLoader):
    """yaml.safe_load's loader, which also reads what a Ruby tag marks (`!ruby/object:...`, as Rails may write) as plain
    data, and refuses a key given twice (YAML would keep the last silently, and lose a submission's metadata)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"{key.value!r} is given twice", key.start_mark)
                seen.add(key.value)
        return super().construct_mapping(node, deep)


def _untagged(loader: _MetadataLoader, suffix: str, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_MetadataLoader.add_multi_constructor("!", _untagged)


def _field(value, what: str) -> str:
    """A submitter's name, sid or email as the gradebooks show it: on one line, with nothing a terminal would act on
    (students choose their names), and at most MAX_FIELD characters. Not text (a list, a mapping) is refused: its
    text could be exponentially long (YAML aliases), and Gradescope never writes one."""
    if value is None:
        return ""
    if not isinstance(value, (str, int, float, datetime.date)):
        raise ExportError(f"{what} is a {type(value).__name__}, not text; correct it in the file")
    text = _spelled(str(value))
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 1] + "…"


JOINERS = "\u200c\u200d"  # zero-width non-joiner and joiner: ordinary between the letters of Persian, Arabic and Indic names


def _spelled(text: str) -> str:
    """printable(text), but for a joiner between two letters (or a letter's marks: an Indic virama), which is part of how
    the name is spelled; anywhere else it is escaped like any character that hides."""
    def letter(c: str) -> bool:
        return unicodedata.category(c)[0] in "LM"

    kept = {i for i, c in enumerate(text) if c in JOINERS and 0 < i < len(text) - 1 and letter(text[i - 1]) and letter(text[i + 1])}
    return "".join(c if i in kept else printable(c) for i, c in enumerate(text))


def _symbol(mapping: dict, key: str):
    """A value under a Ruby-symbol key, as Gradescope writes them (`:name:`); plain keys are accepted too."""
    for k in (f":{key}:", f":{key}", key):
        if k in mapping:
            return mapping[k]
    return None


def _folder(folder: Path, unreadable: dict[str, str]) -> list[Entry]:
    """Each entry of `folder` a submission; so is each top-level member of a zipped class that could not be unpacked."""
    entries, ids = [], {}
    lost = [folder / name for name in unreadable if "/" not in name and not (folder / name).exists()]
    for path in sorted([*folder.iterdir(), *lost]):
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
