"""The commands, one module each, imported by the command line once it knows which command runs (cli.py): a
module's `run(args, ui)` is the command. Here: what every command shares, the rubric and the secret."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from ..rubric import Rubric, load_rubric
from ..terminal import Terminal

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def rubric_of(args, ui: Terminal, components: list[str] | None = None, calls: bool = True) -> Rubric:
    """The rubric is staff input: --config, else the one beside this package (a course's, or a student bundle's);
    never one found in the current folder, which may be a submission's. `components` and `calls`: rubric.load_rubric's."""
    rubric = load_rubric(Path(args.config) if args.config else PROJECT_ROOT / "grading.yaml", components, calls)
    ui.note(f"rubric: {rubric.path} (sha256 {rubric.digest[:12]})")
    return rubric


def read_secret(path: Path | None, ui: Terminal) -> str:
    """Hidden inputs come from this secret; without one each run draws a fresh one, and says so."""
    if path is not None:
        return path.read_text().strip()
    if os.environ.get("AUTOGRADER_SECRET"):
        return os.environ["AUTOGRADER_SECRET"]
    ui.note("note: no --secret-file and no $AUTOGRADER_SECRET: hidden inputs come from a random secret, so another "
            "run draws other hidden inputs")
    return secrets.token_hex(16)
