"""The tamper scan refuses what reaches into the grader's process; the scans follow the files a component imports."""
import importlib.util
from pathlib import Path

import pytest
from conftest import ROOT, SOLUTIONS, grade_folder, scores_by_component, solutions_with

from autograder.forbidden import forbidden_names, scan_submission, scan_tampering, submission_files, syntax_error
from autograder.sandbox.host.process import Forbidden

# (source, the line flagged, a word its finding names)
TAMPERING = [
    ("import gc", 1, "gc"),
    ("import numpy as np\nfrom ctypes import pythonapi", 2, "ctypes"),
    ("import importlib.util", 1, "importlib"),
    ("import inspect", 1, "inspect"),
    ("import builtins", 1, "builtins"),
    ("import pickle", 1, "pickle"),
    ("import guard", 1, "guard"),
    ("from autograder.sandbox import guard", 1, "autograder"),
    ("import __main__", 1, "__main__"),
    ("def f():\n    import gc\n    return gc.get_objects()", 2, "gc"),
    ("x = eval('1')", 1, "eval"),
    ("run = exec", 1, "exec"),
    ("np = __import__('numpy')", 1, "__import__"),
    ("names = globals()", 1, "globals"),
    ("breakpoint()", 1, "breakpoint"),
    ("def f(obj, name):\n    return getattr(obj, name)", 2, "getattr"),
    ("def f(obj):\n    setattr(obj, 'w' + '1', None)", 2, "setattr"),
    ("def f(fn):\n    return getattr(fn, '__globals__')", 2, "__globals__"),
    ("get = getattr", 1, "getattr"),
    ("from operator import attrgetter\nget = attrgetter('__glo' + 'bals__')", 2, "attrgetter"),
    ("import sys\nguard = sys.modules['guard']", 2, "sys.modules"),
    ("import sys as s\nfinders = s.meta_path", 2, "sys.meta_path"),
    ("import sys\nframe = sys._getframe()", 2, "sys._getframe"),
    ("import sys\nsys.settrace(None)", 2, "sys.settrace"),
    ("from sys import modules", 1, "modules"),
    ("import sys\nsame = sys", 2, "sys"),
    ("import sys\nframe = sys.exc_info()[2].tb_frame", 2, "tb_frame"),
    ("def f(gen):\n    return gen.gi_frame.f_back", 2, "f_back"),
    ("def f():\n    return f.__globals__", 2, "__globals__"),
    ("cells = (lambda: 0).__closure__", 1, "__closure__"),
    ("classes = object.__subclasses__()", 1, "__subclasses__"),
    ("b = __builtins__", 1, "__builtins__"),
    ("def f(fn):\n    return f'{fn.__code__}'", 2, "__code__"),
    ("def f(fn):\n    match fn:\n        case object(__globals__=g):\n            return g", 3, "__globals__"),
    ("import numpy as np\nlib = np.ctypeslib", 2, "ctypeslib"),
    ("from numpy.lib.stride_tricks import as_strided", 1, "as_strided"),
    # sys under another name, and what imports, reads or runs what a string names (tests/test_security_data.py, UNSEEN)
    ("import threading\nfinders = threading._sys.meta_path", 2, "sys"),
    ("import threading\ns = threading._sys", 2, "sys"),
    ("import os\nm = getattr(os, '_sys')", 2, "_sys"),
    ("def f(obj):\n    return obj.meta_path", 2, "meta_path"),
    ("from string import Formatter\nget = Formatter().get_field", 2, "get_field"),
    ("from unittest import mock\nmock.patch('guard.Guard.tampered', None).start()", 1, "mock"),
    ("import unittest\npatch = unittest.mock.patch", 2, "mock"),
    ("import pkgutil", 1, "pkgutil"),
    ("import numpy as np\nloader = np.pkgutil", 2, "pkgutil"),
    ("import timeit\ntimeit.timeit('1')", 1, "timeit"),
    ("import typing\nhints = typing.get_type_hints(len)", 2, "get_type_hints"),
    # routes to a frame and to strings run as code that the worker's audit hook leaves to a library (audit.py)
    ("import logging\nframe = logging.currentframe()", 2, "currentframe"),
    ("import rlcompleter", 1, "rlcompleter"),
    ("import audit", 1, "audit"),
    ("import logging.config\nlogging.config.dictConfig({})", 2, "dictConfig"),
    ("import trace", 1, "trace"),
]

INNOCENT = [
    "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n",
    "class A:\n    def __repr__(self):\n        return self.__class__.__name__\n",
    "def weight(self):\n    return getattr(self, 'weight', None), hasattr(self, '__len__')\n",
    "import math, os, sys\neps = sys.float_info.epsilon\nprint(math.pi, file=sys.stderr)\n",
    "from __future__ import annotations\n",
    'if __name__ == "__main__":\n    print("hello")\n',
    "import numpy as np\nx = np.zeros(3)\nn = x.__len__()\n",
    "from types import SimpleNamespace\nns = SimpleNamespace(a=1)\n",
    "import torch\nm = torch.nn.Linear(2, 2)\nn = len(list(m.modules()))\nprint(torch.__version__)\n",
    "import torch\nt = torch.trace(torch.eye(3))\n",
    "def f(exc):\n    return exc.code\n",
    "import re\npattern = re.compile('a+')\n",
    "import os, signal, subprocess, socket, threading\nwith open('notes.txt') as f:\n    f.read()\n",
    "try:\n    pass\nexcept ValueError as exc:\n    message = str(exc)\n",
]


def _scan(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "mine.py"
    path.write_text(source)
    return scan_tampering(path)


@pytest.mark.parametrize("source, line, word", TAMPERING, ids=[t[0] for t in TAMPERING])
def test_tampering_is_named_with_its_line(tmp_path, source, line, word):
    found = _scan(tmp_path, source)
    assert len(found) == 1 and found[0].startswith(f"line {line}: "), found
    assert word in found[0] and "not allowed in submissions" in found[0] and "grader" in found[0]


@pytest.mark.parametrize("source", INNOCENT, ids=[s.splitlines()[-1].strip() for s in INNOCENT])
def test_ordinary_code_is_not_flagged(tmp_path, source):
    assert _scan(tmp_path, source) == []


@pytest.mark.parametrize("folder", ["solutions", "starter", "examples/submission"])
def test_shipped_files_pass_the_tamper_scan(folder):
    files = sorted((ROOT / folder).glob("*.py"))
    assert files and {f.name: scan_tampering(f) for f in files} == {f.name: [] for f in files}


def _folder(tmp_path: Path, **files: str) -> Path:
    for name, source in files.items():
        (tmp_path / f"{name}.py").write_text(source)
    return tmp_path


def test_a_forbidden_call_in_an_imported_helper_is_found(tmp_path):
    folder = _folder(tmp_path, lstm="from helpers import go\n\n\ndef lstm_step():\n    return go()\n",
                     helpers="import torch\n\n\ndef go():\n    return torch.nn.LSTM(2, 3)\n")
    assert forbidden_names(folder, "lstm.py", Forbidden(calls=("torch.nn.LSTM",))) == ["helpers.py line 5: use of torch.nn.LSTM"]
    assert scan_submission(folder, "lstm.py") == []  # a forbidden name is no tampering: only reaching it costs points


def test_imports_are_followed_at_any_depth_and_only_to_submission_files(tmp_path):
    folder = _folder(tmp_path, lstm="import numpy\n\n\ndef f():\n    from . import helpers\n",
                     helpers="import deep, broken\nimport lstm\n", deep="x = 1\n\nimport gc\n", broken="def (:\n", unused="import gc\n")
    assert submission_files(folder, "lstm.py") == [folder / f for f in ("broken.py", "deep.py", "helpers.py", "lstm.py")]
    found = scan_submission(folder, "lstm.py")
    assert len(found) == 1 and found[0].startswith("deep.py line 3: import of gc")


def test_a_file_the_component_does_not_import_is_not_scanned(tmp_path):
    folder = _folder(tmp_path, ngram="import math\n", other="import gc\nimport torch\n")
    assert submission_files(folder, "ngram.py") == [folder / "ngram.py"]
    assert scan_submission(folder, "ngram.py") == forbidden_names(folder, "ngram.py", Forbidden(modules=("torch",))) == []


@pytest.mark.slow
def test_tampering_fails_its_component_only(rubric, tmp_path):
    line = (SOLUTIONS / "ngram.py").read_text().splitlines().index("import math") + 2
    folder = solutions_with(tmp_path, "ngram.py", "import math\n", "import math\nimport gc\n")
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    ngram = [r for r in run.results if r.case.component == "ngram"]
    assert ngram and not any(r.passed for r in ngram)
    assert all(f"line {line}: import of gc" in r.output for r in ngram), ngram[0].output
    got, most = scores_by_component(run)["backprop"]
    assert got == most > 0


@pytest.mark.slow
def test_tampering_in_code_that_never_runs_is_refused_before_anything_runs(rubric, tmp_path):
    """Unlike a forbidden name, a back door costs the component even where no case would reach it: the scan is static."""
    unused = "\n\ndef _never_called():\n    import gc\n\n    return gc.get_objects()\n"
    folder = solutions_with(tmp_path, "ngram.py", "import math\n", "import math\n" + unused)
    line = (folder / "ngram.py").read_text().splitlines().index("    import gc") + 1
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram"])
    assert run.results and all(not r.passed for r in run.results)
    assert all(f"refused before any of it ran: line {line}: import of gc" in r.output for r in run.results), run.results[0].output
    assert run.isolation["held"] == {}  # no worker reported its walls: none started


def test_a_syntax_error_is_found_as_importing_the_file_raises_it(tmp_path):
    # The runner fails a component whose file cannot be imported without starting a worker, with this message.
    path = tmp_path / "ngram.py"
    path.write_text("BOS = '<s>'\n\ndef pad_sentence(:\n    pass\n")
    spec = importlib.util.spec_from_file_location("ngram", path)
    with pytest.raises(SyntaxError) as raised:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert str(syntax_error(path)) == str(raised.value) == "invalid syntax (ngram.py, line 3)"
    assert all(syntax_error(f) is None for f in SOLUTIONS.glob("*.py"))
