from __future__ import annotations

import _posixsubprocess
import dataclasses
import os
import shutil
import signal
import subprocess
from pathlib import Path

import matplotlib.font_manager  # noqa: F401  (first, for its font cache: see below)
import pytest
import torch

from autograder.rubric import load_rubric
from autograder.runner import GradeRun, grade
from autograder.sandbox.host.tiers import Isolation, isolation_for
from autograder.submission import open_submission
from autograder.verify import load_mistakes, write_variant

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
MISTAKES = load_mistakes(load_rubric(ROOT / "grading.yaml"))  # solutions/mistakes.yaml, checked


@pytest.fixture(scope="session")
def rubric():
    return load_rubric(ROOT / "grading.yaml")


@pytest.fixture(scope="session")
def quick_rubric(rubric):
    """The real rubric with 3-second case timeouts, for submissions that hang on purpose."""
    components = [dataclasses.replace(c, cases=[dataclasses.replace(k, timeout=3.0) for k in c.cases]) for c in rubric.components]
    return dataclasses.replace(rubric, components=components)


# matplotlib builds its font cache on its first import where none is saved yet (a fresh machine, an empty MPLCONFIGDIR),
# and where fontconfig is installed (Debian's chromium brings it) that runs `fc-list`: a process the guard below would
# blame on whichever unmarked test imported matplotlib first. Importing it above, before any test, builds the cache then.

# ---- the tiers: a test not marked slow starts no process ----------------------------------------------------------
# `make test-fast` runs `-m "not slow and not network"`, so a test that starts a worker or a subprocess without the
# slow mark would make the fast tier slow, or be left out of nothing. Every way Python starts a process is refused
# while an unmarked test's setup, call or teardown runs; the refusal is a pytest failure (a BaseException, which
# `except Exception` does not swallow), and the test fails afterwards even if its code caught that somehow.
_STARTERS = [(subprocess.Popen, "_execute_child"), (subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec"),
             (os, "fork"), (os, "forkpty"), (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system")]


class _Refusing:
    def __init__(self):
        self.item = None
        self.attempts: list[str] = []

    def install(self):
        for owner, name in _STARTERS:
            real = getattr(owner, name, None)
            if real is not None:
                setattr(owner, name, self._wrap(real, f"{getattr(owner, '__name__', owner)}.{name}"))

    def _wrap(self, real, what: str):
        def starter(*args, **kwargs):
            if self.item is None:
                return real(*args, **kwargs)
            message = (f"{self.item.nodeid} started a process ({what}) but is not marked slow: mark it "
                       f"@pytest.mark.slow (or its module `pytestmark = pytest.mark.slow`), so `make test-fast` leaves it out")
            self.attempts.append(message)
            pytest.fail(message, pytrace=False)
        return starter


_REFUSING = _Refusing()
_REFUSING.install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _guarded(item))


def _guarded(item):
    if item.get_closest_marker("slow") or item.get_closest_marker("network"):
        return (yield)
    _REFUSING.item, _REFUSING.attempts = item, []
    try:
        result = yield
    finally:
        _REFUSING.item = None
    if _REFUSING.attempts:
        pytest.fail(_REFUSING.attempts[0], pytrace=False)
    return result


# ---- make test's parallel pass (pytest -n 2) -------------------------------------------------------------------
# Tests go to xdist's processes one by one, except the modules whose module-scoped fixtures are expensive (a bundle,
# a Gradescope root after setup.sh, a module-wide worker, a Ray cluster): each of those goes whole to one process, so
# the fixture is built once. (xdist_group marks would say this in the modules, but pytest 9.2 with xdist 3.8 ignores
# them: issue 1386 of pytest-xdist.) These modules are collected first, so that the long units start first.
ONE_PROCESS = ("tests/test_bundle.py", "tests/test_gradescope.py", "tests/test_security_os.py", "tests/test_worker_walls.py",
               "tests/test_report.py", "tests/test_ray.py", "tests/test_mistakes.py", "tests/test_malformed_returns.py",
               "tests/test_unread_code.py", "tests/test_forbidden_operators.py", "tests/test_leftovers.py", "tests/test_unittests.py")


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneProcessModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return file if file in ONE_PROCESS else nodeid

    return OneProcessModules(config, log)


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():  # tests marked gpu run where there is one (benchmarks/device.sh)
        skip = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False here")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in ONE_PROCESS)  # stable: files stay whole


def default_sigint() -> None:
    """Popen's preexec_fn for a command a test interrupts: SIGINT back to its default, as a terminal starts a command,
    though the tests run as a background job (whose commands inherit SIGINT ignored, so Python would not raise
    KeyboardInterrupt on it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def with_staff_tests(folder: Path) -> None:
    """The staff test files grading.yaml names (its `unittests:`, relative to it) beside a copy of it in `folder`."""
    shutil.copytree(ROOT / "autograder_tests", folder / "autograder_tests", dirs_exist_ok=True)


def isolation(rubric, tier=None) -> Isolation:
    """What a grading in a test runs under: `tier`, or the strongest one here for the rubric's files (to enter)."""
    return Isolation(tier) if tier else isolation_for(rubric.path.parent, rubric.solutions_dir)


def grade_folder(rubric, folder: Path, tmp_path: Path, tier=None, **kwargs) -> GradeRun:
    submission = open_submission(folder, tmp_path / "graded-copy")
    with isolation(rubric, tier) as entered:
        return grade(rubric, submission, secret="tests", isolation=entered, **kwargs)


def solutions_with(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of solutions/ with one edit in one file; the edit must apply exactly once."""
    assert (SOLUTIONS / file).read_text().count(old) == 1, f"the variant's anchor must occur once in {file}: {old!r}"
    return write_variant(SOLUTIONS, file, old, new, tmp_path / "variant")


def scores_by_component(run: GradeRun) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for r in run.results:
        got, most = out.get(r.case.component, (0.0, 0.0))
        out[r.case.component] = (got + r.score, most + r.max_score)
    return out

