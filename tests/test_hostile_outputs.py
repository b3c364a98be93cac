"""Every file a person opens is inert (architecture.md, "Inputs that cross the boundary"): hostile names, ids and
outputs pass through the real writers (the gradebooks, leaderboard.csv, feedback/<id>.md, report.html), and each test
reads back what was written as the person's program would (the csv module for a spreadsheet, markdown-it's CommonMark
for a Markdown viewer, html.parser for a browser), asserting which defence held and what the person sees."""
import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import ROOT, SOLUTIONS
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from autograder.batch.gradebook import canvas_csv, feedback_md, grades_csv, leaderboard_csv, leaderboard_rows, student_grades_csv
from autograder.batch.inert import csv_value, md_fence
from autograder.batch.inputs import Entry, Submitter
from autograder.batch.report import build_report
from autograder.rubric import load_rubric

RUBRIC = load_rubric(ROOT / "grading.yaml")

# ---- CSV: a spreadsheet evaluates a cell that starts a formula ------------------------------------------------------

FORMULAS = [  # each would be evaluated as it stands; each must reach the TA behind one single quote
    '=HYPERLINK("http://127.0.0.1:9/x","click")',
    "=1+1",
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "=cmd|' /C calc'!A0",  # DDE
    "@cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    " =1+1",
    "\n=1+1",
    "＝1+1",  # full-width: some spreadsheets read it as =
    "'=1+1",  # a leading quote of the student's own is kept, behind the added one
    "-",
]
PLAIN = ["Ada Lovelace", "O'Brien, Pat", "Ada\n=1+1", "1+1=2", "'Ilima", "-1.5", "42"]  # read as they stand
TRIGGERS = tuple("=+-@＝＋－＠")
NUMBER = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")  # what a spreadsheet reads as a plain number


def starts_formula(cell: str) -> bool:
    """OWASP's rule: a formula character first (tab and CR included), or after leading whitespace; a number is none."""
    return cell[:1] in ("\t", "\r") or (cell.lstrip().startswith(TRIGGERS) and not NUMBER.fullmatch(cell.strip()))


def read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def entry(sid: str, *people: Submitter) -> Entry:
    return Entry(sid, Path("unused"), people)


def ok_row(score: float = 1.0) -> dict:
    return {"status": "ok", "score": score, "max_score": 196.0, "components": {"ngram": score}, "parts": {}}


@pytest.mark.parametrize("value", FORMULAS + PLAIN, ids=repr)
def test_grades_csv_shows_each_submitter_field_as_text(value):
    written = grades_csv(RUBRIC, [entry("1001", Submitter(value, value, value))], {"1001": ok_row()})
    header, row = read(written)
    cells = dict(zip(header, row))
    shown = "'" + value if value in FORMULAS else value
    assert (cells["name"], cells["sid"], cells["email"]) == (shown, shown, shown)
    assert not any(starts_formula(c) for c in row)
    assert (cells["score"], cells["ngram"], cells["max_score"]) == ("1", "1", "196")


def test_a_group_and_the_graders_numbers_read_as_they_stand():
    people = (Submitter("=1+1", "-2+3", "@x"), Submitter("Ada", "007", "ada@example.edu"))
    header, row = read(grades_csv(RUBRIC, [entry("1001", *people)], {"1001": ok_row(-1.5)}))
    cells = dict(zip(header, row))
    assert (cells["name"], cells["sid"], cells["email"]) == ("'=1+1; Ada", "'-2+3; 007", "'@x; ada@example.edu")
    assert (cells["score"], cells["ngram"]) == ("-1.5", "-1.5")  # the grader's own negative numbers stay numbers


def test_leaderboard_csv_shows_names_and_text_values_as_text_and_numbers_as_numbers():
    board = [{"name": "speedup", "value": -1.5, "order": "desc"}, {"name": "=1+1", "value": "=HYPERLINK(\"x\")", "order": "desc"}]
    entries = [entry("1001", Submitter('=HYPERLINK("http://127.0.0.1:9/x","click")')), entry("1002", Submitter("-2+3"))]
    rows = {"1001": {"leaderboard": board}, "1002": {"leaderboard": [{"name": "speedup", "value": 2.0, "order": "desc"}]}}
    header, *table = read(leaderboard_csv(*leaderboard_rows(["speedup", "=1+1"], entries, rows)))
    assert header == ["rank", "submission_id", "name", "speedup", "'=1+1"]
    assert table == [["1", "1002", "'-2+3", "2.0", ""], ["2", "1001", "'=HYPERLINK(\"http://127.0.0.1:9/x\",\"click\")", "-1.5", "'=HYPERLINK(\"x\")"]]


@pytest.mark.parametrize("writer", [student_grades_csv, canvas_csv])
def test_the_per_student_gradebooks_show_each_submitter_field_as_text(writer):
    people = [Submitter(value, value, value) for value in FORMULAS + PLAIN]
    _, *table = read(writer(RUBRIC, [entry("1001", *people)], {"1001": ok_row()}))
    assert not any(starts_formula(cell) for row in table for cell in row)
    assert [csv_value(row[0]) for row in table] == [p.name for p in people]  # a row per student, the name first in both


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(), st.text())
def test_any_submitter_text_reaches_a_cell_that_starts_no_formula(name, sid, email):
    header, row = read(grades_csv(RUBRIC, [entry("1001", Submitter(name, sid, email))], {"1001": ok_row()}))
    cells = dict(zip(header, row))
    for field, value in (("name", name), ("sid", sid), ("email", email)):
        assert not starts_formula(cells[field])
        assert cells[field] in (value, "'" + value)  # what the TA sees: the original, perhaps behind one quote
        assert csv_value(cells[field]) == value  # what the report reads back


# ---- Markdown: a fence that ends early lets what follows render ------------------------------------------------------

MD = MarkdownIt("commonmark")
ESCAPES = [  # student text: an exception message, what the code printed, a not-graded reason
    "```\n# Score: 100 / 100\n<script>alert(1)</script>\n```",
    "ok\n````\n# Score: 100 / 100",
    "``````````\n## forged case: 5 / 5\n``````````",
    "```",
    "~~~\n# Score: 100 / 100\n~~~",
    "</pre><script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "ok\r```\r# Score: 100 / 100",  # CR ends a line in CommonMark
    "trailing newline\n",
    "`inline` and ``` in a line",
]
NAMES = ["<img src=x onerror=alert(1)>", "</h2><script>alert(1)</script>", "x\n# Score: 100 / 100", "*bold* _it_ [l](http://x) `c`",
         "ends with #", "\\", "&lt;b&gt;"]


def read_as_commonmark(text: str) -> str:
    """What a Markdown reader makes of text before parsing it: its line endings and NUL (CommonMark 2.1, 2.3)."""
    return re.sub(r"\r\n?", "\n", text).replace("\0", "\ufffd")


def fenced(text: str) -> str:
    """The content of a fence holding `text`: a fence's content ends with a line ending."""
    text = read_as_commonmark(text)
    return text if text == "" or text.endswith("\n") else text + "\n"


def in_a_heading(text: str) -> str:
    return read_as_commonmark(text).replace("\n", " ")


def feedback(text: str, *, sid: str = "1001", name: str = "[ngram] pad_sentence, n = 1") -> str:
    """feedback/<sid>.md of a submission graded, with `text` as the results' output and a failed case's, then of one
    not graded, with `text` as the reason."""
    case = {"number": "1.1", "name": name, "visibility": "visible", "status": "failed", "tags": ["ngram"], "score": 0.0,
            "max_score": 2.0, "output": text, "extra_data": {"check": "ngram.padding", "outcome": "wrong"}}
    graded = feedback_md(sid, {"status": "ok", "score": 0.0, "max_score": 2.0, "message": ""}, {"output": text, "tests": [case]})
    not_graded = feedback_md(sid, {"status": "crashed", "score": 0.0, "max_score": 2.0, "message": text}, {"output": text, "tests": []})
    return f"{graded}\n{not_graded}"


def blocks(markdown: str) -> list[tuple[str, str]]:
    """The document as a reader sees it: each block's type and text (a heading's or paragraph's inline text, a fence's
    content), failing on any HTML or inline markup."""
    tokens = MD.parse(markdown)
    assert not [t for t in tokens if t.type == "html_block"]
    shown = []
    for i, t in enumerate(tokens):
        if t.type == "fence":
            shown.append(("fence", t.content))
        elif t.type == "inline":
            assert {c.type for c in t.children} <= {"text"}, [(c.type, c.content) for c in t.children]
            shown.append((tokens[i - 1].type, "".join(c.content for c in t.children)))
    return shown


def skeleton(text: str, sid: str = "1001", name: str = "[ngram] pad_sentence, n = 1") -> list[tuple[str, str]]:
    """What feedback() must read as: the grader's own headings and lines, and each student text in one fence (an empty
    message of a case is left out)."""
    head = [("heading_open", f"Submission {in_a_heading(sid)}".strip()), ("paragraph_open", "Score: 0 / 2")]
    case = [("fence", fenced(text))] if text else []
    return [*head, ("fence", fenced(text)), ("heading_open", f"1.1 {in_a_heading(name)}: 0 / 2"), *case,
            *head, ("paragraph_open", "Not graded:"), ("fence", fenced(text))]


@pytest.mark.parametrize("text", ESCAPES, ids=repr)
def test_student_text_in_feedback_stays_inside_its_fence(text):
    markdown = feedback(text)
    assert blocks(markdown) == skeleton(text)
    longest = max(map(len, re.findall(r"`+", text)), default=0)
    assert all(len(t.markup) > max(longest, 2) for t in MD.parse(markdown) if t.type == "fence")  # it outlasts every run


@pytest.mark.parametrize("name", NAMES, ids=repr)
def test_names_in_feedback_headings_read_as_plain_text(name):
    assert blocks(feedback("1 != 2", sid=name, name=name)) == skeleton("1 != 2", sid=name, name=name)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_the_content_of_exactly_its_fence(text):
    assert blocks(md_fence(text)) == [("fence", fenced(text))]
    assert blocks(feedback(text)) == skeleton(text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_name_reads_as_itself_in_a_heading(name):
    assert blocks(feedback("x", sid="1001", name=name)) == skeleton("x", sid="1001", name=name)


# ---- HTML: the class report -------------------------------------------------------------------------------------------

HOSTILE_ID = "<img src=x onerror=alert(1)>"
CASE = "[ngram] </td><script>alert(1)</script>"
MISTAKE = '<img src=x onerror="alert(1)">'
CODE = "</pre><script>alert(1)</script>"
PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "nav", "section", "h1", "h2", "h3", "h4", "p", "small", "b",
             "table", "thead", "tbody", "tr", "th", "td", "img", "details", "summary", "div", "span", "i", "a", "pre", "mark",
             "button", "label", "input", "script"}


class Page(HTMLParser):
    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)


def hostile_batch(tmp_path: Path) -> Path:
    """A finished batch of a folder of submissions whose ids, case names, outputs and code are hostile; the same code
    in three of them, so the report shows it side by side."""
    source, out = tmp_path / "class", tmp_path / "out"
    ids = [HOSTILE_ID, "=1+1", "\r-2+3", "late"]
    for sid in ids[:3]:
        (source / sid).mkdir(parents=True)
        (source / sid / "ngram.py").write_text((SOLUTIONS / "ngram.py").read_text() + f"\n# {CODE}\n")
    rows = {sid: ok_row() for sid in ids[:3]} | {"late": {**ok_row(0.0), "status": "crashed"}}
    out.mkdir()
    (out / "grades.csv").write_text(grades_csv(RUBRIC, [entry(sid) for sid in ids], rows), newline="")
    for sid in ids:
        output = CODE if sid == "late" else f"Wrong. Likely mistake: {MISTAKE}. Your code printed:\n| {CODE}"
        test = {"number": "1.1", "name": CASE, "status": "failed", "score": 0.0, "max_score": 1.0, "tags": ["ngram"], "output": output}
        (out / "results" / sid).mkdir(parents=True)
        (out / "results" / sid / "results.json").write_text(json.dumps({"output": output, "tests": [test]}))
    (out / "summary.json").write_text(json.dumps({"source": str(source), "rubric": {"sha256": "0" * 64}, "grader_version": "test"}))
    return out


@pytest.mark.slow  # matplotlib runs fc-list where its font cache is not built yet
def test_the_report_escapes_every_student_text_and_shows_the_original(tmp_path):
    out = hostile_batch(tmp_path)
    data = build_report(out, RUBRIC)
    ngram = next(c for c in data["cases"] if c["component"] == "ngram")
    assert ngram["cases"][0]["submissions"] == 3  # each id, read back from grades.csv, found its results
    assert {frozenset((p["a"], p["b"])) for p in data["similarity"]["pairs"]} == \
        {frozenset(pair) for pair in (("\r-2+3", HOSTILE_ID), ("\r-2+3", "=1+1"), (HOSTILE_ID, "=1+1"))}
    html = (out / "report.html").read_text()
    page = Page(html)
    assert {tag for tag, _ in page.tags} <= PAGE_TAGS
    assert not [(tag, attrs) for tag, attrs in page.tags if any(name.startswith("on") for name, _ in attrs)]
    # The page's one script is the grader's own file, word for word: no student text is ever inside a script.
    script = (ROOT / "autograder" / "batch" / "report" / "page.js").read_text()
    assert [tag for tag, _ in page.tags].count("script") == 1 and f"<script>{script}</script>" in html
    assert all(dict(attrs)["src"].startswith("data:image/png;base64,") for tag, attrs in page.tags if tag == "img")
    links = [dict(attrs)["href"] for tag, attrs in page.tags if tag == "a"]
    assert links and all(h.startswith(("#", "feedback/", "results/")) for h in links), links  # never javascript:, never elsewhere
    text = "".join(page.text)
    for shown in (HOSTILE_ID, CASE.removeprefix("[ngram] "), MISTAKE, CODE):  # the originals, no quote added, as text
        assert shown in text, shown
    assert "'=1+1" not in text


def test_student_text_cannot_add_a_mistake_to_the_class_report():
    """The report's Mistakes table counts only the grader's words: the defence is that a hint is read from a wrong
    answer's message before "Your code printed:", so a printed or raised "Likely mistake: ..." adds no row."""
    from autograder.batch.report.figures import mistakes

    def test(kind: str, output: str) -> dict:
        return {"number": "1.1", "status": "failed", "tags": ["ngram"], "output": output, "extra_data": {"outcome": kind}}

    results = {"1": {"tests": [test("wrong", "Wrong count. Likely mistake: the EOS token is missing.\nYour code printed:\n"
                                             "| Likely mistake: forged by printing.")]},
               "2": {"tests": [test("raised", "Your code raised ValueError: Likely mistake: forged by raising.")]}}
    found = mistakes(RUBRIC, [{"submission": "1", "status": "ok"}, {"submission": "2", "status": "ok"}], results)
    hints = {m["mistake"] for m in found if m["source"] == "hint"}
    assert hints == {"the EOS token is missing"}
