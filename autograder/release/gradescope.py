"""`autograder gradescope build`: the zip Gradescope builds its grading image from.

Gradescope unpacks the zip into /autograder/source, runs setup.sh there once as root when it builds
the image, copies run_autograder to /autograder/run_autograder and runs it for each submission
(https://gradescope-autograders.readthedocs.io/en/latest/specs/). The zip holds the grader's package
as an install of it would, the rubric, the reference solutions, the pins, and a secret drawn at build
time: hidden inputs stay the same for every submission and regrade of this release.
"""
from __future__ import annotations

import secrets
import zipfile
from pathlib import Path

from ..rubric import Rubric
from . import PROJECT, ReleaseError, package_files

TEMPLATES = Path(__file__).with_name("gradescope")
SCRIPTS = ("setup.sh", "run_autograder")
SECRET = "secret.txt"  # run_autograder passes it as --secret-file
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest zip date: entries carry no build time


class GradescopeError(ReleaseError):
    """The zip cannot be built from here; the message says why."""


def release_files(rubric: Rubric) -> dict[str, Path]:
    """Each zip entry's name and the file it copies: the grader's package (what installing it would
    install), the rubric as grading.yaml, its solutions/*.py at the same place relative to it, the pins."""
    if rubric.solutions_dir is None:
        raise GradescopeError(f"{rubric.path} names no solutions: build from the grader's rubric, not a student bundle's")
    rubric_dir = rubric.path.parent.resolve()
    if not rubric.solutions_dir.is_relative_to(rubric_dir):
        raise GradescopeError(f"the solutions ({rubric.solutions_dir}) must lie inside the rubric's folder {rubric_dir}")
    solutions = rubric.solutions_dir.relative_to(rubric_dir)
    files = {name: TEMPLATES / name for name in SCRIPTS}
    files |= {p.relative_to(PROJECT).as_posix(): p for p in package_files()}
    files |= {"grading.yaml": rubric.path, "pyproject.toml": PROJECT / "pyproject.toml", "constraints.txt": PROJECT / "constraints.txt"}
    # The grader loads reference modules as solutions/<name>.py; nothing else there (verify's mistakes.yaml) grades.
    files |= {(solutions / p.name).as_posix(): p for p in rubric.solutions_dir.glob("*.py")}
    files |= {name: rubric_dir / name for name in rubric.staff_files}  # at the same place relative to grading.yaml
    return files


def build_zip(rubric: Rubric, out: Path) -> list[str]:
    """Write the autograder zip to `out` with a fresh secret; return its entries' names."""
    files = release_files(rubric)
    entries = {name: path.read_bytes() for name, path in files.items()}
    entries[SECRET] = (secrets.token_hex(32) + "\n").encode()
    with zipfile.ZipFile(out, "w") as zf:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, EPOCH)
            info.create_system = 3  # Unix, so that unzip applies the modes below
            info.external_attr = (0o100755 if name in SCRIPTS else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, entries[name])
    return sorted(entries)
