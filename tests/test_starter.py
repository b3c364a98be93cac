"""Tests for generating student starter code from reference solutions, and the rules written into them and the handouts."""

import ast
import textwrap
from pathlib import Path

import pytest
import yaml

from autograder import forbidden
from autograder.rubric import load_rubric
from autograder.release import RULES_BEGIN, RULES_END, ReleaseError, render_rules, rules_text, stale_rules, write_rules
from autograder.release.starter import (
    StarterError,
    render_starter,
    stale_starter,
    strip_solution,
    write_starter,
)

ROOT = Path(__file__).resolve().parents[1]
HEADER = (
    "# Starter code generated from the reference solution by `autograder release`.\n"
    "# Replace each `raise NotImplementedError` with your implementation.\n"
)

SOLUTION = textwrap.dedent(
    '''\
    """Toy n-gram helpers."""

    import functools

    BOS = "<s>"
    EOS = "</s>"  # kept: module constants are part of the interface


    def pad_sentence(tokens: list[str], n: int) -> list[str]:
        """Return tokens with n - 1 BOS in front and one EOS at the end."""
        # BEGIN SOLUTION
        padding = [BOS] * (n - 1)

        return padding + tokens + [EOS]
        # END SOLUTION


    @functools.lru_cache(maxsize=None)
    def vocab_size(
        n: int,
    ) -> int:
        # BEGIN SOLUTION
        return n + 2
        # END SOLUTION


    class NGramLM:
        """An n-gram LM.  Attributes: n, k."""

        def __init__(self, n: int, k: float = 0.0):
            """Store the order and the smoothing constant."""
            self.n = n  # given away: kept before the region
            # BEGIN SOLUTION
            self.k = k
            # END SOLUTION

        @property
        def order(self) -> int:
            """Given away: no region, kept as is."""
            return self.n

        def fit(self, corpus):
            """Count n-grams."""
            # BEGIN SOLUTION
            def helper(sentence):
                return pad_sentence(sentence, self.n)

            return [helper(s) for s in corpus]
            # END SOLUTION
    '''
)

EXPECTED_STARTER = HEADER + textwrap.dedent(
    '''\
    """Toy n-gram helpers."""

    import functools

    BOS = "<s>"
    EOS = "</s>"  # kept: module constants are part of the interface


    def pad_sentence(tokens: list[str], n: int) -> list[str]:
        """Return tokens with n - 1 BOS in front and one EOS at the end."""
        raise NotImplementedError("pad_sentence is not implemented yet")


    @functools.lru_cache(maxsize=None)
    def vocab_size(
        n: int,
    ) -> int:
        raise NotImplementedError("vocab_size is not implemented yet")


    class NGramLM:
        """An n-gram LM.  Attributes: n, k."""

        def __init__(self, n: int, k: float = 0.0):
            """Store the order and the smoothing constant."""
            self.n = n  # given away: kept before the region
            raise NotImplementedError("NGramLM.__init__ is not implemented yet")

        @property
        def order(self) -> int:
            """Given away: no region, kept as is."""
            return self.n

        def fit(self, corpus):
            """Count n-grams."""
            raise NotImplementedError("NGramLM.fit is not implemented yet")
    '''
)


def _load(text: str) -> dict:
    namespace: dict = {}
    exec(compile(text, "starter.py", "exec"), namespace)
    return namespace


def test_strip_solution_gives_exact_starter():
    assert strip_solution(SOLUTION, "ngram.py") == EXPECTED_STARTER


def test_solution_itself_works():
    # Guards the fixture: the regions hold real, runnable code.
    solution = _load(SOLUTION)
    assert solution["pad_sentence"](["a"], 3) == ["<s>", "<s>", "a", "</s>"]
    assert solution["NGramLM"](2).fit([["x"]]) == [["<s>", "x", "</s>"]]


def test_stripped_functions_raise_with_qualname():
    starter = _load(strip_solution(SOLUTION, "ngram.py"))
    with pytest.raises(NotImplementedError, match=r"^pad_sentence is not implemented yet$"):
        starter["pad_sentence"](["a"], 2)
    with pytest.raises(NotImplementedError, match=r"^vocab_size is not implemented yet$"):
        starter["vocab_size"](3)
    with pytest.raises(NotImplementedError, match=r"^NGramLM\.__init__ is not implemented yet$"):
        starter["NGramLM"](2)
    lm = object.__new__(starter["NGramLM"])
    lm.n = 3
    assert lm.order == 3
    with pytest.raises(NotImplementedError, match=r"^NGramLM\.fit is not implemented yet$"):
        lm.fit([])


def test_docstrings_survive_stripping():
    starter = _load(strip_solution(SOLUTION, "ngram.py"))
    assert starter["NGramLM"].fit.__doc__ == "Count n-grams."
    assert starter["__doc__"] == "Toy n-gram helpers."


def test_nested_function_uses_python_qualname():
    source = textwrap.dedent(
        """\
        def outer():
            def inner():
                # BEGIN SOLUTION
                return 1
                # END SOLUTION
            return inner
        """
    )
    starter = _load(strip_solution(source, "nested.py"))
    with pytest.raises(NotImplementedError, match=r"^outer\.<locals>\.inner is not"):
        starter["outer"]()()


def test_crlf_line_endings_are_kept():
    source = (
        'def f():\r\n    """Doc."""\r\n'
        "    # BEGIN SOLUTION\r\n    return 1\r\n    # END SOLUTION\r\n"
    )
    expected = (
        HEADER.replace("\n", "\r\n")
        + 'def f():\r\n    """Doc."""\r\n'
        + '    raise NotImplementedError("f is not implemented yet")\r\n'
    )
    assert strip_solution(source, "crlf.py") == expected


@pytest.mark.parametrize(
    ("source", "line", "reason"),
    [
        pytest.param(
            "def f():\n    # BEGIN SOLUTION\n    return 1\n",
            2,
            "without a matching END",
            id="unmatched-begin",
        ),
        pytest.param(
            "def f():\n    return 1\n    # END SOLUTION\n",
            3,
            "without a matching BEGIN",
            id="unmatched-end",
        ),
        pytest.param(
            "def f():\n    # BEGIN SOLUTION\n    def g():\n        # BEGIN SOLUTION\n"
            "        return 1\n        # END SOLUTION\n    return g\n    # END SOLUTION\n",
            4,
            "nested in the region opened at line 2",
            id="nested",
        ),
        pytest.param(
            "X = 1\n# BEGIN SOLUTION\nY = 2\n# END SOLUTION\n",
            2,
            "not inside a function body",
            id="module-level",
        ),
        pytest.param(
            "class C:\n    # BEGIN SOLUTION\n    x = 1\n    # END SOLUTION\n",
            2,
            "not inside a function body",
            id="class-body",
        ),
        pytest.param(
            "def f():\n    # BEGIN SOLUTION\n    x = 1\n    # END SOLUTION\n    return x\n",
            4,
            "does not reach the end",
            id="short-region",
        ),
        pytest.param(
            "def f():\n    # BEGIN SOLUTION\n    return 1\n\n\ndef g():\n    # END SOLUTION\n"
            "    return 2\n",
            7,
            "END SOLUTION is not in the body of f",
            id="end-in-next-function",
        ),
        pytest.param(
            "def f():\n    # BEGIN SOLUTION\n    return 1\n\n\nX = 2\n    # END SOLUTION\n",
            7,
            "END SOLUTION is not in the body of f",
            id="end-after-following-code",
        ),
        pytest.param(
            'def f():\n    """Doc."""\n    # BEGIN SOLUTION\n    # END SOLUTION\n',
            3,
            "holds no code",
            id="empty-body",
        ),
        pytest.param(
            'def f():\n    # BEGIN SOLUTION\n    """Doc."""\n    return 1\n    # END SOLUTION\n',
            2,
            "after its docstring",
            id="before-docstring",
        ),
        pytest.param(
            "def f():\n    x = 1  # BEGIN SOLUTION\n    return x\n    # END SOLUTION\n",
            2,
            "line of its own",
            id="marker-after-code",
        ),
        pytest.param(
            "def f():\n    # BEGIN SOLUTION here\n    return 1\n    # END SOLUTION\n",
            2,
            "malformed solution marker",
            id="marker-with-text",
        ),
        pytest.param(
            'def f():\n    return """\n    BEGIN SOLUTION\n    """\n',
            3,
            "marker text left outside any region",
            id="marker-text-in-string",
        ),
        pytest.param(
            "def f(:\n    return 1\n",
            1,
            "syntax error",
            id="syntax-error",
        ),
    ],
)
def test_malformed_solution_raises_with_file_and_line(source, line, reason):
    with pytest.raises(StarterError) as raised:
        strip_solution(source, "bad.py")
    message = str(raised.value)
    assert message.startswith(f"bad.py:{line}: "), message
    assert reason in message


def test_starter_error_is_a_value_error():
    assert issubclass(StarterError, ValueError)


def _write_solutions(solutions: Path) -> None:
    solutions.mkdir()
    (solutions / "ngram.py").write_text(SOLUTION)
    (solutions / "tokenize_lab.py").write_text(
        "def split(text):\n    # BEGIN SOLUTION\n    return text.split()\n    # END SOLUTION\n"
    )
    # Helpers and tests are not released.
    (solutions / "_shared.py").write_text("def helper():\n    return 1\n")
    (solutions / "test_ngram.py").write_text("def test_x():\n    assert True\n")


def test_render_starter_selects_released_files(tmp_path):
    solutions = tmp_path / "solutions"
    _write_solutions(solutions)
    rendered = render_starter(solutions)
    assert list(rendered) == ["ngram.py", "tokenize_lab.py"]
    assert rendered["ngram.py"] == EXPECTED_STARTER


def test_write_and_stale_round_trip(tmp_path):
    solutions = tmp_path / "solutions"
    starter = tmp_path / "out" / "starter"
    _write_solutions(solutions)

    assert stale_starter(solutions, starter) == ["ngram.py", "tokenize_lab.py"]
    assert write_starter(solutions, starter) == ["ngram.py", "tokenize_lab.py"]
    assert (starter / "ngram.py").read_text() == EXPECTED_STARTER
    assert stale_starter(solutions, starter) == []

    (solutions / "tokenize_lab.py").write_text(
        '"""Edited."""\n\n\ndef split(text):\n    # BEGIN SOLUTION\n    return text.split()\n'
        "    # END SOLUTION\n"
    )
    assert stale_starter(solutions, starter) == ["tokenize_lab.py"]
    write_starter(solutions, starter)
    assert stale_starter(solutions, starter) == []

    (starter / "orphan.py").write_text("X = 1\n")
    assert stale_starter(solutions, starter) == ["orphan.py"]
    (starter / "__init__.py").write_text("")  # not generated, so never managed
    write_starter(solutions, starter)
    assert not (starter / "orphan.py").exists()
    assert (starter / "__init__.py").exists()
    assert stale_starter(solutions, starter) == []

    (starter / "ngram.py").unlink()
    assert stale_starter(solutions, starter) == ["ngram.py"]

    (starter / "tokenize_lab.py").write_text("# hand-edited\n")
    assert stale_starter(solutions, starter) == ["ngram.py", "tokenize_lab.py"]


# ---- the rules written into the handouts and solution docstrings -------------------------------------------

def test_committed_rules_name_everything_grading_yaml_and_the_tamper_tables_refuse():
    """Every forbidden module and call of each component, by its own name, in its handout and in the starter docstring
    of its file; every entry of the tamper scan's tables in every handout and starter docstring; and nothing stale."""
    rubric = load_rubric(ROOT / "grading.yaml")
    assert stale_rules(rubric) == []
    tables = [*forbidden.REACHING, *forbidden.TAMPER_MODULES, *forbidden.CODE_BUILTINS, *forbidden.NAME_ARGUMENT,
              *forbidden.FRAME_ATTRIBUTES, *forbidden.SYS_ATTRIBUTES, *forbidden.ALLOWED_DUNDERS]
    for c in rubric.components:
        handout = (ROOT / "assignments" / f"{c.id}.md").read_text()
        docstring = ast.get_docstring(ast.parse((ROOT / "starter" / c.file).read_text()))
        names = [*c.forbidden.modules, *(call.rsplit(".", 1)[1] for call in c.forbidden.calls), *c.forbidden.operators, *tables]
        for text in (handout, docstring):
            assert [n for n in names if f"`{n}`" not in " ".join(text.split())] == [], (c.id, c.file)
    assert "`GroupNorm`" in (ROOT / "assignments" / "transformer.md").read_text()


def _course(tmp_path: Path, handout: str, solution: str):
    """The course's rubric cut down to ngram, with only ngram's handout and solution file."""
    (tmp_path / "assignments").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "assignments" / "ngram.md").write_text(handout)
    (tmp_path / "solutions" / "ngram.py").write_text(solution)
    spec = yaml.safe_load((ROOT / "grading.yaml").read_text())
    spec["parts"] = [{"name": spec["parts"][0]["name"], "components": ["ngram"]}]
    spec["components"] = {"ngram": {**spec["components"]["ngram"], "unittests": []}}
    (tmp_path / "grading.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_rubric(tmp_path / "grading.yaml")


@pytest.mark.parametrize("handout, solution, message", [
    ("# N-grams\n", f'"""N-grams.\n\n{RULES_BEGIN[".py"]}\n"""\n', "ngram.md: put the line '<!-- BEGIN RULES"),
    (f"{RULES_BEGIN['.md']}\n", '"""N-grams."""\n', "must end with a line '<!-- END RULES -->'"),
    (f"{RULES_BEGIN['.md']}\n{RULES_END['.md']}\n", f'"""N-grams."""\n\nNOTES = """\n{RULES_BEGIN[".py"]}\n"""\n',
     "that closes the module docstring"),
], ids=["no markers in a handout", "no end marker", "the marker outside the module docstring"])
def test_misplaced_rules_markers_are_refused_with_the_file(tmp_path, handout, solution, message):
    rubric = _course(tmp_path, handout, solution)
    with pytest.raises(ReleaseError) as caught:
        render_rules(rubric)
    assert message in str(caught.value)


def test_release_writes_the_rules_between_the_markers_and_leaves_the_rest(tmp_path):
    handout = f"# N-grams\n\nIntro.\n\n{RULES_BEGIN['.md']}\nold words\n{RULES_END['.md']}\n\nAfter.\n"
    solution = f'"""N-grams.\n\n{RULES_BEGIN[".py"]}\nold words\n"""\n\nBOS = "<s>"\n'
    rubric = _course(tmp_path, handout, solution)
    assert stale_rules(rubric) == ["assignments/ngram.md", "solutions/ngram.py"]
    assert write_rules(rubric) == ["assignments/ngram.md", "solutions/ngram.py"]
    assert stale_rules(rubric) == [] and write_rules(rubric) == []
    ngram = [rubric.component("ngram")]
    assert (tmp_path / "assignments" / "ngram.md").read_text() == handout.replace(
        "old words", "\n".join(rules_text(ngram, markdown=True)))
    assert (tmp_path / "solutions" / "ngram.py").read_text() == solution.replace("old words", "\n".join(rules_text(ngram, markdown=False)))
    assert "No module or call is forbidden in this component." in render_rules(rubric)[tmp_path / "assignments" / "ngram.md"]
