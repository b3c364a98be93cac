"""The class report's similarity section (autograder/batch/report/similarity.py): one row per pair of submissions,
exact copies first, then the closest, compare_files' own shares, and the side-by-side views' marks and budget. In
process, on small classes built here: no grading, no subprocess."""
import ast
import importlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, SOLUTIONS

sim = importlib.import_module("autograder.batch.report.similarity")  # the package exports the function by that name

ALTERNATIVES = ROOT / "tests" / "alternatives"
STARTER = ROOT / "starter"
# who derives from whom: no pair of different families may be flagged
FAMILIES = [{"1", "2"}, {"9", "10", "11", "12", "21"}, {"32"}, {"33"}, {"40", "41"}]
RENAMED = re.compile(r"\b(probs|counts|logits|hidden|weights|x|h|scores)\b")  # names a copier changes


def renamed(text: str) -> str:
    """A copy that hides: blank lines and a comment on top, names changed (each gets _mine, which no original has)."""
    return "\n\n# my own work\n" + RENAMED.sub(r"\1_mine", text)


def edited(text: str, edits: int, tag: str) -> str:
    """`text` with a statement of the student's own before each of `edits` return statements spread over the file."""
    lines = text.split("\n")
    spots = sorted({s.lineno for s in ast.walk(ast.parse(text)) if isinstance(s, ast.Return)})
    for line in sorted({spots[i * len(spots) // edits] for i in range(edits)}, reverse=True):
        indent = re.match(r"\s*", lines[line - 1])[0]
        lines.insert(line - 1, f"{indent}mine_{tag}_{line} = {line} * 3 + len(str({line}))")
    return "\n".join(lines)


def write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_bytes(text.encode())


def read(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.glob("*.py")}


def class_folder(root: Path) -> Path:
    """The class: 1 gpt_style and 2 a renamed copy of it; 9 and 10 copies of solutions/ (9's ngram.py with CRLF line
    endings), 21 one with word2vec.py left out; 11, 12 solutions/ with a few and with more edits of their own; 32 and
    33 two more independently written correct submissions; 40 and 41 the untouched starter."""
    folder = root / "class"
    gpt, solutions = read(ALTERNATIVES / "gpt_style"), read(SOLUTIONS)
    write(folder / "1", gpt)
    write(folder / "2", {f: renamed(t) for f, t in gpt.items()})
    write(folder / "10", solutions)
    write(folder / "9", {f: t.replace("\n", "\r\n") if f == "ngram.py" else t for f, t in solutions.items()})
    write(folder / "21", {f: t for f, t in solutions.items() if f != "word2vec.py"})
    write(folder / "11", {f: edited(t, 2, "a") for f, t in solutions.items()})
    write(folder / "12", {f: edited(t, 8, "b") for f, t in solutions.items()})
    shutil.copytree(ALTERNATIVES / "float64_internals", folder / "32")
    shutil.copytree(ALTERNATIVES / "fused_hoisted", folder / "33")
    for sid in ("40", "41"):
        shutil.copytree(STARTER, folder / sid)
    return folder


def run(rubric, root: Path, folder: Path, **kwargs) -> dict:
    return sim.similarity(rubric, {"source": str(folder)}, root / "out", **kwargs)


@pytest.fixture(scope="module")
def graded(rubric, tmp_path_factory):
    root = tmp_path_factory.mktemp("similarity")
    folder = class_folder(root)
    return folder, run(rubric, root, folder)


def pair(result: dict, a: str, b: str) -> dict | None:
    return next((p for p in result["pairs"] if (p["a"], p["b"]) == (a, b)), None)


def test_each_pair_is_one_row_and_each_file_listed_once(graded, rubric):
    """attention.py serves two components (attention and causal_mask): it is compared once, and a pair is one row."""
    _, result = graded
    assert [c.file for c in rubric.components].count("attention.py") == 2  # what the test is about
    rows = [(p["a"], p["b"]) for p in result["pairs"]]
    assert len(rows) == len(set(rows)) and all(len(p["files"]) == len({f["file"] for f in p["files"]}) for p in result["pairs"])
    copies = pair(result, "9", "10")
    assert sorted(f["file"] for f in copies["files"]) == sorted(rubric.files)  # every file once, attention.py too
    assert result["compared"] == 11 and "note" not in result
    assert not json.dumps({k: v for k, v in result.items() if k != "pairs"}).count("views")


def test_ids_are_in_the_batchs_order(graded):
    """Numeric ids compare numerically: the pair of 9 and 10 would be (10, 9) as text."""
    _, result = graded
    assert all(int(p["a"]) < int(p["b"]) for p in result["pairs"])
    assert result["groups"] == [["9", "10", "11", "12", "21"], ["1", "2"]]  # the largest first
    assert [(p["a"], p["b"]) for p in result["pairs"][:2]] == [("9", "10"), ("9", "21")]


def test_exact_copies_come_first_and_are_marked_exact(graded):
    """9, 10 and 21 are exact copies (CRLF line endings and a file left out do not matter), closeness 1, and come
    before the renamed copy (1, 2), also closeness 1, whose ids are smaller."""
    _, result = graded
    exact = [(p["a"], p["b"]) for p in result["pairs"] if p["exact"]]
    assert exact == [("9", "10"), ("9", "21"), ("10", "21")]
    assert [(p["a"], p["b"]) for p in result["pairs"][:len(exact)]] == exact
    assert all(p["closeness"] == 1 and all(f["identical"] and f["similarity"] == [1, 1] for f in p["files"])
               for p in result["pairs"][:len(exact)])
    crlf = next(f for f in pair(result, "9", "10")["files"] if f["file"] == "ngram.py")
    assert crlf["identical"]
    assert len(pair(result, "10", "21")["files"]) == 7  # word2vec.py: only 10 has it


def test_a_renamed_copy_is_flagged_but_not_exact(graded):
    _, result = graded
    copy = pair(result, "1", "2")
    assert copy is not None and not copy["exact"] and copy["closeness"] == 1
    assert len(copy["files"]) == 8 and not any(f["identical"] for f in copy["files"])
    assert result["pairs"].index(copy) == 3  # right after the exact copies


def test_independent_correct_submissions_are_not_flagged(graded):
    """solutions/ (10), gpt_style (1), float64_internals (32) and fused_hoisted (33) were written independently: no
    pair across families is flagged, and every pair within one (but the starter's) is."""
    _, result = graded
    family = {sid: i for i, f in enumerate(FAMILIES) for sid in f}
    flagged = {(p["a"], p["b"]) for p in result["pairs"]}
    assert all(family[a] == family[b] for a, b in flagged)
    within = {(a, b) for f in FAMILIES[:2] for a in f for b in f if int(a) < int(b)}
    assert flagged == within


def test_the_untouched_starter_is_not_a_pair(graded):
    """40 and 41 both submitted the starter, byte for byte: the starter is boilerplate, nothing is left to compare."""
    _, result = graded
    assert not any({"40", "41"} & {p["a"], p["b"]} for p in result["pairs"])
    assert all("40" not in g and "41" not in g for g in result["groups"])


def test_pairs_are_ordered_by_closeness_which_weighs_the_flagged_files_by_tokens(graded):
    _, result = graded
    keys = [(not p["exact"], -p["closeness"], int(p["a"]), int(p["b"])) for p in result["pairs"]]
    assert keys == sorted(keys)
    few, more = pair(result, "10", "11"), pair(result, "10", "12")
    assert 1 > few["closeness"] > more["closeness"] >= sim.DEFAULT_THRESHOLD
    assert result["pairs"].index(few) < result["pairs"].index(more)
    for p in (few, more):  # the files' similarities are each side's share; the closeness lies among them
        shares = [s for f in p["files"] for s in f["similarity"]]
        assert min(shares) <= p["closeness"] <= max(shares)
        assert [min(f["similarity"]) for f in p["files"]] == sorted((min(f["similarity"]) for f in p["files"]), reverse=True)


def test_the_shares_are_compare_files_own(graded):
    """Each side's share and the tokens are what copydetect's compare_files says of the two files, the starter as
    boilerplate: a share of distinct fingerprints (or of k-gram positions) would differ on the edited copies."""
    from copydetect import CodeFingerprint, compare_files

    folder, result = graded
    checked = 0
    for a, b in (("10", "11"), ("10", "12"), ("11", "12"), ("1", "2"), ("9", "12")):
        for row in pair(result, a, b)["files"]:
            f = row["file"]
            boilerplate = np.array(sorted(CodeFingerprint(str(STARTER / f), sim.SIMILARITY_K, sim.SIMILARITY_WINDOW).hashes))
            prints = [CodeFingerprint(f, sim.SIMILARITY_K, sim.SIMILARITY_WINDOW, boilerplate,
                                      fp=io.StringIO((folder / sid / f).read_bytes().decode().replace("\r\n", "\n")))
                      for sid in (a, b)]
            tokens, shares, _ = compare_files(*prints)
            assert row["similarity"] == [round(float(s), 3) for s in shares] and row["tokens"] == tokens, (a, b, f)
            checked += 1
    assert checked == 40


def test_the_marks_cover_whole_tokens_that_the_other_side_has(graded):
    """The views of the renamed copy: marks in bounds, sorted, apart, each starting and ending on a token of the
    code (not inside a name, not on blank space: copydetect's own offsets slip after a class name and after leading
    blank lines), and each marked text is in the other file once the renaming is undone."""
    _, result = graded
    copy = pair(result, "1", "2")
    assert [v["file"] for v in copy["views"]] == [f["file"] for f in copy["files"]]
    word = re.compile(r"\w")
    for view in copy["views"]:
        assert "class " in view["code"][0] or view["file"] != "transformer.py"
        for side, (code, marks) in enumerate(zip(view["code"], view["marks"])):
            other = view["code"][1 - side]
            assert marks and marks == sorted(marks)
            assert all(0 <= s < e <= len(code) for s, e in marks)
            assert all(e1 < s2 for (_, e1), (s2, _) in zip(marks, marks[1:]))
            for s, e in marks:
                assert not code[s].isspace() and not code[e - 1].isspace(), (view["file"], code[s:e])
                assert s == 0 or not (word.match(code[s - 1]) and word.match(code[s])), (view["file"], code[s - 1:e])
                assert e == len(code) or not (word.match(code[e - 1]) and word.match(code[e])), (view["file"], code[s:e + 1])
                text = code[s:e]
                assert (RENAMED.sub(r"\1_mine", text) if side == 0 else text.replace("_mine", "")) in other, (view["file"], text)
        marked = sum(e - s for s, e in view["marks"][0])
        assert marked > 0.3 * len(view["code"][0].strip())  # the student's code, not only a sliver of it


def test_the_views_are_the_submitted_code(graded):
    folder, result = graded
    for p in result["pairs"]:
        for view in p.get("views", []):
            for sid, code in zip((p["a"], p["b"]), view["code"]):
                assert code == (folder / sid / view["file"]).read_bytes().decode().replace("\r\n", "\n")


def test_views_go_to_the_first_pairs_within_the_budget(rubric, tmp_path, monkeypatch, graded):
    """The closest pairs carry views, their files in order, until the characters of code would pass VIEW_BUDGET; then
    no later pair has any; "shown" counts the pairs with views."""
    folder, full = graded
    assert sim.SIDE_BY_SIDE == 20 and 500_000 <= sim.VIEW_BUDGET <= 2_000_000

    def size(sid: str, file: str) -> int:
        return len((folder / sid / file).read_text())

    def check(result: dict, budget: int) -> None:
        with_views = [i for i, p in enumerate(result["pairs"]) if "views" in p]
        assert with_views == list(range(result["shown"]))  # the first pairs, as many as "shown" says
        views = [(p, v) for p in result["pairs"] for v in p.get("views", [])]
        assert sum(len(c) for _, v in views for c in v["code"]) <= budget
        rows = [(p, f) for p in result["pairs"][:sim.SIDE_BY_SIDE] for f in p["files"]]
        assert [(p["a"], p["b"], v["file"]) for p, v in views] == [(p["a"], p["b"], f["file"]) for p, f in rows[:len(views)]]
        if len(views) < len(rows):  # the next view would not have fitted
            p, f = rows[len(views)]
            assert sum(len(c) for _, v in views for c in v["code"]) + size(p["a"], f["file"]) + size(p["b"], f["file"]) > budget

    check(full, sim.VIEW_BUDGET)
    assert 2 <= full["shown"] < len(full["pairs"]) == 11
    monkeypatch.setattr(sim, "VIEW_BUDGET", 400_000)
    small = run(rubric, tmp_path, folder)
    check(small, 400_000)
    assert 2 <= small["shown"] < full["shown"]
    bare = lambda result: [{k: v for k, v in p.items() if k != "views"} for p in result["pairs"]]  # noqa: E731
    assert bare(small) == bare(full)  # the budget changes the views only
    first = full["pairs"][0]
    sizes = [size(first["a"], f["file"]) + size(first["b"], f["file"]) for f in first["files"]]
    assert sizes[1] > sizes[2]  # attention.py, backprop.py, lstm.py: the second would not fit where the third would
    monkeypatch.setattr(sim, "VIEW_BUDGET", sizes[0] + sizes[2])
    cut = run(rubric, tmp_path / "cut", folder)
    check(cut, sizes[0] + sizes[2])
    assert cut["shown"] == 1 and len(cut["pairs"][0]["views"]) == 1
    monkeypatch.setattr(sim, "VIEW_BUDGET", 10 ** 9)
    monkeypatch.setattr(sim, "SIDE_BY_SIDE", 3)
    assert run(rubric, tmp_path / "again", folder)["shown"] == 3


def test_nothing_to_compare_says_why(rubric, tmp_path):
    result = sim.similarity(rubric, {"source": str(tmp_path / "gone")}, tmp_path)
    assert result["pairs"] == [] and result["compared"] == 0 and result["shown"] == 0 and "not where" in result["note"]


def test_a_file_is_filtered_as_copydetect_filters_it_whole():
    """The filtered code, lexed in pieces cut where statements begin, is copydetect's filter_code of the whole file,
    on the course's files and on the places a cut could go wrong; each character points at the text it stands for."""
    from copydetect.utils import filter_code

    tricky = [
        "\n\n\nclass A:\n    def f(self):\n        return 1\n",  # leading blank lines; a class name
        "try:\n    import numpy\nexcept ImportError as e:\n    raise ImportError('x') from e\nimport os\nx = os.sep\n",
        "\ufeffx = '''\nnot = a statement\n'''; y = 2\ny = 3",  # a byte-order mark; a cut inside a string; no newline at the end
        "@decorator\ndef g(a,\n      b):  # a comment\n    '''doc'''\n    return f'{a!r:>{b}}' + \"s\"\n",
        "def broken(:\n    pass\n",  # not Python: lexed whole
    ]
    folders = (SOLUTIONS, STARTER, *(ALTERNATIVES / d for d in ("gpt_style", "fused_hoisted", "float64_internals")))
    texts = tricky + [p.read_text() for d in folders for p in sorted(d.glob("*.py"))]
    lexer = sim._Filter()
    for text in texts:
        filtered, starts, ends = lexer(text, "x.py")
        assert filtered == filter_code(text, "x.py")[0], text[:80]
        assert len(starts) == len(ends) == len(filtered) and (starts < ends).all() and (ends <= len(text)).all()
        tokens: dict[tuple[int, int], str] = {}  # each character points at its whole token: one letter for a name or
        for i, c in enumerate(filtered):       # a string, the token itself for what is kept (keywords, operators, numbers)
            tokens[starts[i], ends[i]] = tokens.get((starts[i], ends[i]), "") + c
        assert all(text[s:e] == token or token in ("V", "F", "O", "S", "P", '"') for (s, e), token in tokens.items())
        names = [i for i, c in enumerate(filtered) if c in "VFO"]
        assert all(text[starts[i]:ends[i]].isidentifier() for i in names)
