"""Reading a submission's files: a folder's or a zip's, each with when it was last modified, none past a read limit.

A submission is read only inside itself. A link in it (a symbolic link in a
folder, a zip entry with link mode bits) is followed one step, to a file of the
submission, taken within it; any other link (absolute, climbing out, to a
folder, to another link, to nothing) is skipped and accounted for, and nothing
it names is opened. A submission that is itself a link is refused. Below the
submission's top every name is opened with O_NOFOLLOW, so that a file or folder
swapped for a link after it was listed is not followed either.
"""
from __future__ import annotations

import codecs
import errno
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import BinaryIO, NamedTuple

from ..terminal import printable
from .names import CODE

MAX_FILE_BYTES = 1 << 20
MAX_NOTEBOOK_BYTES = 64 << 20  # read limit: outputs and images make notebooks far larger than their code, which MAX_FILE_BYTES limits
MAX_ZIP_BYTES = 64 << 20
PATH_MAX = 4096  # Linux's: no link's target is longer
_CODING = re.compile(rb"[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")  # PEP 263's encoding declaration, on the first or second line


class SubmissionError(Exception):
    """The submission cannot be read at all, or holds nothing to grade; the message says why."""


class Source(NamedTuple):
    """A file of the submission: its bytes, and when it was last modified (None when that cannot be told)."""

    read: Callable[[], bytes]
    modified: Callable[[], datetime | None]


def size(n: int) -> str:
    """`n` bytes, for messages: 3 KiB, 1.5 MiB."""
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def zip_sources(path: Path) -> dict[str, Source | str]:
    """A source for each file of zip `path` (or why a link there is not followed, or why an entry is not read), by its
    path inside the zip. SubmissionError when the zip cannot be read, holds a path leaving it, or unpacks too large."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(f"{path.name} is not a readable zip file ({exc})") from None
    members, earlier = {}, {}
    for m in archive.infolist():
        name = zip_name(m)
        if name is None:
            raise SubmissionError(f"{path.name} holds an unsafe path: {printable(m.filename)}; zip the folder again, from inside it")
        if name in members:  # appending to a zip adds an entry beside the old one; unzip keeps the last, and so does this
            earlier[f"{name} (an earlier entry)"] = f"the zip holds {name} again after this entry: the last one is read"
        if not m.is_dir():
            members[name] = m
    if sum(m.file_size for name, m in members.items() if CODE.fullmatch(PurePosixPath(name).name)) > MAX_ZIP_BYTES:
        raise SubmissionError(f"{path.name} unpacks to more than {MAX_ZIP_BYTES >> 20} MiB of Python files and notebooks")
    return earlier | linked({name: zip_link(archive, m) for name, m in members.items()},
                            lambda name: archive.read(members[name].filename), lambda name: _zip_time(members[name]))


def _zip_time(member: zipfile.ZipInfo) -> datetime | None:
    """When a zip entry's file was last modified, as the zip keeps it (local time, to two seconds); None for a date that
    is none (a damaged or hand-made zip)."""
    try:
        return datetime(*member.date_time)
    except ValueError:
        return None


def zip_name(member: zipfile.ZipInfo) -> str | None:
    """A zip entry's path inside the archive, with Windows' backslashes as slashes (PowerShell 5.1 writes
    `hw1\\ngram.py`, which zipfile converts only on Windows); None when it would leave the folder it is unpacked to."""
    name = member.filename.replace("\\", "/")
    p = PurePosixPath(name)
    return None if p.is_absolute() or ".." in p.parts or not p.parts else p.as_posix()


def zip_link(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> str | None:
    """The target of a link entry (Unix mode bits S_IFLNK, its bytes the target, as `unzip` restores it); None for a
    file, and for a link whose target the zip cannot give: reading it then says why."""
    if not stat.S_ISLNK(member.external_attr >> 16):
        return None
    try:
        with archive.open(member) as f:
            return f.read(PATH_MAX).decode(errors="replace")
    except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError):
        return None


def walk(root: Path) -> dict[str, str | None]:
    """The files and links in folder `root` and below, by path inside it, in sorted order: None for a file, the target
    for a link. No link is followed, a folder's neither (each is listed through open_within); pipes, sockets and
    devices are left out."""
    found: dict[str, str | None] = {}
    folders: list[tuple[str, ...]] = [()]
    while folders:
        parts = folders.pop()
        fd = open_within(root, parts, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    rel = "/".join((*parts, entry.name))
                    if entry.is_symlink():
                        found[rel] = os.readlink(entry.name, dir_fd=fd)
                    elif entry.is_dir(follow_symlinks=False):
                        folders.append((*parts, entry.name))
                    elif entry.is_file(follow_symlinks=False):
                        found[rel] = None
        finally:
            os.close(fd)
    return dict(sorted(found.items(), key=lambda item: PurePosixPath(item[0])))


def open_within(root: Path, parts: Sequence[str], flags: int) -> int:
    """A descriptor of root/parts[0]/.../parts[-1] (of `root` for no parts), opened one name at a time, each with
    O_NOFOLLOW: a link below `root` is never followed, even one put in place of a file or folder after it was listed.
    `root` itself was named by whoever runs the grader, and is opened as named."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for i, name in enumerate(parts):
        last = i == len(parts) - 1
        try:
            inner = os.open(name, (flags if last else os.O_RDONLY | os.O_DIRECTORY) | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd


def open_file_within(root: Path, rel: str) -> BinaryIO:
    """The regular file `rel` (a path inside folder `root`), open for reading, no link below `root` followed;
    OSError else (EINVAL for a pipe, device or folder in its place, which O_NONBLOCK keeps from blocking the open)."""
    f = open(open_within(root, rel.split("/"), os.O_RDONLY | os.O_NONBLOCK), "rb")
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        f.close()
        raise OSError(errno.EINVAL, "not a regular file")
    return f


def read_within(root: Path, rel: str, limit: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """The bytes of the regular file `rel` inside `root` (open_file_within), none past `limit` (the largest file the
    grader reads: a huge file costs nothing); OSError else."""
    with open_file_within(root, rel) as f:
        data = f.read(limit + 1)
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"it is {size(max(os.fstat(f.fileno()).st_size, len(data)))}, more than the "
                                       f"{size(limit)} the grader reads")
        return data


def modified_within(root: Path, rel: str) -> datetime | None:
    """When the file `rel` inside folder `root` was last modified (local time): its own time, read in its folder opened
    as open_within opens it, no link below `root` followed; None when it cannot be read."""
    *folders, name = rel.split("/")
    try:
        fd = open_within(root, folders, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return datetime.fromtimestamp(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime)
        finally:
            os.close(fd)
    except OSError:
        return None


def linked(found: dict[str, str | None], read: Callable[[str], bytes],
           modified: Callable[[str], datetime | None]) -> dict[str, Source | str]:
    """A source for each of `found` (path -> None for a file, the target for a link), given `read` and `modified` to read a
    file and its time by its path; a link is the file it names within the submission, or gives why it is not followed."""
    folders = {parent.as_posix() for rel in found for parent in PurePosixPath(rel).parents}

    def source(rel: str, target: str | None) -> Source | str:
        inside = rel if target is None else _within(rel, target)
        if inside is None:
            return (f"{rel} is a link to something outside the submission: not followed "
                    "(submit the files themselves, not links to them)")
        if inside in found and found[inside] is None:
            return Source(lambda: read(inside), lambda: modified(inside))
        named = "a link" if inside in found else "a folder" if inside in folders else "nothing in the submission"
        return f"{rel} is a link to {named}: not followed (a link is followed only to a file of the submission)"

    return {rel: source(rel, target) for rel, target in found.items()}


def _within(rel: str, target: str) -> str | None:
    """The path inside the submission that link `rel` names by `target`, taken there without following anything ("."
    for its top); None when it leaves the submission: an absolute target, or one climbing above the top."""
    if target.startswith("/"):
        return None
    parts = list(PurePosixPath(rel).parent.parts)
    for part in target.split("/"):
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts) or "."


def utf8(data: bytes) -> tuple[bytes, str]:
    """A .py file's code as UTF-8, which Python reads, and how it was converted: Windows Notepad saves UTF-16, and
    older editors their code page. A file declaring its encoding (PEP 263) is left as it is, as Python reads it."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16").encode(), "converted from UTF-16 to UTF-8 (save it as UTF-8)"
        except UnicodeDecodeError:
            return data, ""  # not UTF-16 after all: grading reports what Python makes of it
    try:
        data.decode("utf-8")
        return data, ""
    except UnicodeDecodeError:
        pass
    if any(_CODING.match(line) for line in data.split(b"\n", 2)[:2]):
        return data, ""
    try:
        text, codec = data.decode("cp1252"), "Windows-1252"
    except UnicodeDecodeError:  # bytes cp1252 leaves undefined
        text, codec = data.decode("latin-1"), "Latin-1"
    return text.encode(), f"converted from {codec} to UTF-8, as it is not UTF-8 (save it as UTF-8)"
