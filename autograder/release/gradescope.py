"""`autograder gradescope build`: the zip Gradescope builds its grading image from.

Gradescope unpacks the zip into /autograder/source, runs setup.sh there once as root when it builds
the image, copies run_autograder to /autograder/run_autograder and runs it for each submission
(https://gradescope-autograders.readthedocs.io/en/latest/specs/). The zip holds the grader's package
as an install of it would, the rubric, the reference solutions, the pins, and a secret drawn at build
time: hidden inputs stay the same for every submission and regrade of this release.

A zip of some parts (one Gradescope assignment per part) grades those parts only: its rubric is the
course's cut down to their components, every case kept, hidden ones too, with the number the course
gives it, and it holds their solutions and staff tests only. Everything setup.sh reads (the scripts,
the package, the pins) is the same in every zip, so every part's image is set up alike.
"""
from __future__ import annotations

import secrets
import zipfile
from pathlib import Path

import yaml

from ..rubric import Case, Component, Rubric
from . import PROJECT, ReleaseError, package_files
from .bundle import cut_rubric, cut_staff_tests

TEMPLATES = Path(__file__).with_name("gradescope")
SCRIPTS = ("setup.sh", "run_autograder")
SECRET = "secret.txt"  # run_autograder passes it as --secret-file
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest zip date: entries carry no build time


class GradescopeError(ReleaseError):
    """The zip cannot be built from here; the message says why."""


def zip_name(rubric: Rubric, components: list[Component]) -> str:
    """The zip's default name: autograder.zip for the whole course, autograder-part1.zip for part 1 (-part1-part3 for two)."""
    if components == rubric.components:
        return "autograder.zip"
    return "autograder" + "".join(f"-part{n}" for n in rubric.part_numbers(components)) + ".zip"


def zip_entries(rubric: Rubric, components: list[Component]) -> dict[str, bytes]:
    """Each zip entry's name and content, the secret aside: the scripts, the grader's package (what installing it would
    install), the pins, and the rubric that grades `components` with their reference solutions (solutions/<file>.py) and
    staff test files, each at its place relative to grading.yaml. For the whole course, its own rubric and staff test
    files as they are; for fewer components, the rubric and the staff tests cut down to them (cut_rubric, cut_staff_tests)."""
    if rubric.solutions_dir is None:
        raise GradescopeError(f"{rubric.path} names no solutions: build from the grader's rubric, not a student bundle's")
    rubric_dir = rubric.path.parent.resolve()
    if not rubric.solutions_dir.is_relative_to(rubric_dir):
        raise GradescopeError(f"the solutions ({rubric.solutions_dir}) must lie inside the rubric's folder {rubric_dir}")
    solutions = rubric.solutions_dir.relative_to(rubric_dir)
    files = {name: TEMPLATES / name for name in SCRIPTS}
    files |= {p.relative_to(PROJECT).as_posix(): p for p in package_files()}
    files |= {"pyproject.toml": PROJECT / "pyproject.toml", "constraints.txt": PROJECT / "constraints.txt"}
    # The grader loads each component's reference as solutions/<file>; nothing else there (verify's mistakes.yaml) grades.
    files |= {(solutions / file).as_posix(): rubric.solutions_dir / file for file in sorted({c.file for c in components})}
    entries = {name: path.read_bytes() for name, path in files.items()}
    if components == rubric.components:
        entries["grading.yaml"] = rubric.path.read_bytes()
        entries |= {name: (rubric_dir / name).read_bytes() for name in rubric.staff_files}
        return entries
    parts = "; ".join(dict.fromkeys(c.part for c in components))
    entries["grading.yaml"] = (f"# The rubric of {parts}: the course's {rubric.path.name} cut down to these parts when this zip "
                               "was built, every case kept and numbered as in the course; do not edit.\n"
                               + yaml.safe_dump(cut_rubric(rubric, components, _graded), sort_keys=False, width=200)).encode()
    entries |= {name: text.encode() for name, text in cut_staff_tests(rubric, components, _graded).items()}
    return entries


def _graded(component: Component) -> list[Case]:
    """What Gradescope grades of a component: every case, hidden and timing ones too."""
    return component.cases


def build_zip(rubric: Rubric, out: Path, components: list[Component] | None = None) -> list[str]:
    """Write the autograder zip of `components` (default: every one) to `out` with a fresh secret; return its entries' names."""
    entries = zip_entries(rubric, rubric.components if components is None else components)
    entries[SECRET] = (secrets.token_hex(32) + "\n").encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as zf:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, EPOCH)
            info.create_system = 3  # Unix, so that unzip applies the modes below
            info.external_attr = (0o100755 if name in SCRIPTS else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, entries[name])
    return sorted(entries)
