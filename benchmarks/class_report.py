"""Section 7 of BENCHMARKS.md: the class report (`autograder report`) of a class of 300 submissions.

    .venv/bin/python benchmarks/class_report.py --build /tmp/class300     # build the batch only (a few minutes); prints it
    .venv/bin/python benchmarks/class_report.py --measure /tmp/class300   # measure a built one; prints the figures
    .venv/bin/python benchmarks/run.py --only-report                      # build, measure, rewrite section 7 in place

Grading 300 submissions takes an hour on 2 cores, and a report reads only the batch folder and the submissions, so
the class is made from a few graded ones. A handful of distinct submissions (the bases: solutions/, the correct
alternatives of tests/alternatives/, catalogue mistakes, a syntax error in every file, part 1's files alone, a
submission of no graded file, and one stopped by the batch's budget) are graded once by `autograder grade-all` on
the whole course (grading.yaml). Then `--build ROOT` writes

    ROOT/export/   a Gradescope "Export Submissions" folder of 300 (submission_metadata.yml: synthetic names, sids,
                   emails, a few groups), each submission its base's files with small edits of its own (a comment,
                   a local name renamed), a few exact copies of another's
    ROOT/batch/    the batch folder grade-all would have written for that export: grades.csv, grades_by_student.csv,
                   canvas.csv, leaderboard.csv, results/<id>/results.json, feedback/<id>.md, journal.jsonl,
                   summary.json (its "source" the export), secret.txt; each row its base's grade, under its own id
                   (feedback and gradebooks written by the grader's own functions), with its own grading seconds.
                   The journal holds each row's content digest and the bases' grading key, so `grade-all
                   ROOT/export --out ROOT/batch` finds all 300 graded (while the grader's code is as it was when the
                   bases were graded). Then `autograder report` writes the report.
    ROOT/bases/    the bases and their graded batches, kept: a second --build into ROOT resumes them, and grades
                   nothing again unless the rubric, the solutions or the grader's code (any of autograder/) changed

After a change to the report's code alone, `autograder report ROOT/batch` writes the page again in seconds: no
build needed.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import importlib.util
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from statistics import median
from typing import Callable

if __name__ == "__main__":  # run as a script: benchmarks/ is no package; its siblings import from the project's root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.batch.gradebook import (canvas_csv, feedback_md, grades_csv, leaderboard_csv, leaderboard_rows,
                                        student_grades_csv, summary_json)
from autograder.batch.inputs import read_batch
from autograder.batch.journal import Journal
from autograder.report import write_results
from autograder.rubric import Rubric, load_rubric
from autograder.verify import load_mistakes, write_edits
from benchmarks.common import ROOT, SOLUTIONS, table

ALTERNATIVES = ROOT / "tests" / "alternatives"
SIZE = 300
MARKER = ".class-report-build"  # a folder --build made, which a later --build may empty
SECRET = "bench-class-report\n"
BUDGET = 2  # seconds: the batch budget that stops the timeout base (grading anything takes longer)
ONE_MISTAKE = ("ngram", "backprop", "rnn", "lstm", "attention", "transformer")  # a base each: the component's first mistake
TWO_MISTAKES = ("causal_mask", "word2vec")  # one base with both
GROUP_EVERY = 23  # every 23rd submission is a group of two
EXACT_COPIES = 4  # submissions whose files are byte for byte another's
CLI = [sys.executable, "-m", "autograder"]


# ---------------------------------------------------------------- the bases


@dataclass(frozen=True)
class Base:
    key: str  # its folder (and id) among the bases
    what: str  # in words, for the section
    weight: int  # its rows in a class of 300 (the correct solutions take what the others leave)
    make: Callable[[Path], object]  # writes its files into a new folder
    timeout: bool = False  # graded in a batch of its own, under a budget it cannot meet


def _copy(source: Path) -> Callable[[Path], object]:
    return lambda dest: shutil.copytree(source, dest, ignore=shutil.ignore_patterns("mistakes.yaml", "__pycache__"))


def _with_mistakes(rubric: Rubric, mistakes: list) -> Callable[[Path], object]:
    def make(dest: Path) -> None:
        write_edits(SOLUTIONS, [(rubric.component(m.component).file, m.old, m.new) for m in mistakes], dest)
        (dest / "mistakes.yaml").unlink(missing_ok=True)
    return make


def _broken(dest: Path) -> None:
    _copy(SOLUTIONS)(dest)
    for f in dest.glob("*.py"):
        f.write_text("def broken(:\n" + f.read_text())


def _part_one(dest: Path) -> None:
    dest.mkdir(parents=True)
    for name in ("ngram.py", "backprop.py"):
        shutil.copy(SOLUTIONS / name, dest / name)


def _nothing_graded(dest: Path) -> None:
    dest.mkdir(parents=True)
    (dest / "README.txt").write_text("I ran out of time, sorry. My notes are below.\n")


def bases(rubric: Rubric) -> list[Base]:
    first = {}
    for m in load_mistakes(rubric):
        first.setdefault(m.component, m)
    out = [Base("correct", "`solutions/`", 0, _copy(SOLUTIONS))]
    out += [Base(f"alt-{d.name}", f"the correct alternative `tests/alternatives/{d.name}`", 12, _copy(d))
            for d in sorted(ALTERNATIVES.iterdir()) if d.is_dir()]
    out += [Base(f"mistake-{c}", f"{c}: {first[c].name}", 14, _with_mistakes(rubric, [first[c]])) for c in ONE_MISTAKE]
    out.append(Base("two-mistakes", " and ".join(f"{c}: {first[c].name}" for c in TWO_MISTAKES), 14,
                    _with_mistakes(rubric, [first[c] for c in TWO_MISTAKES])))
    out += [Base("part1-only", "part 1's files alone (`ngram.py`, `backprop.py`)", 30, _part_one),
            Base("broken", "a syntax error in every file", 12, _broken),
            Base("no-files", "no file the rubric grades (a README.txt)", 4, _nothing_graded),
            Base("timeout", f"`solutions/`, stopped by a batch budget of {BUDGET} s", 4, _copy(SOLUTIONS), timeout=True)]
    return out


def grade_bases(rubric: Rubric, root: Path, say) -> dict[str, tuple[dict, dict]]:
    """Each base graded by `grade-all` (resumed: only what changed is graded again): key -> (its journal row, its
    results.json)."""
    folder, secret = root / "bases", root / "secret.txt"
    secret.write_text(SECRET)
    shutil.rmtree(folder / "submissions", ignore_errors=True)
    shutil.rmtree(folder / "slow", ignore_errors=True)
    all_bases = bases(rubric)
    for b in all_bases:
        b.make(folder / ("slow" if b.timeout else "submissions") / b.key)
    graded = {}
    for source, out, budget in ((folder / "submissions", folder / "batch", []),
                                (folder / "slow", folder / "timeout", ["--budget", str(BUDGET)])):
        started = time.monotonic()
        subprocess.run([*CLI, "grade-all", str(source), "--out", str(out), "--config", str(rubric.path), "--secret-file",
                        str(secret), "-q", *budget], check=True, stdout=subprocess.DEVNULL)
        say(f"graded {source.name}/ in {time.monotonic() - started:.0f} s")
        journal = Journal(out / "journal.jsonl")
        for key in (p.name for p in source.iterdir()):
            graded[key] = (journal.latest[key], json.loads((out / "results" / key / "results.json").read_text()))
    return graded


# ---------------------------------------------------------------- the class


FIRST = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "John", "Margaret", "Claude", "Katherine",
         "Dennis", "Radia", "Ken", "Shafi", "Tim", "Hedy", "Niklaus", "Sophie", "Yoshua", "Fei-Fei", "Geoffrey", "Jürgen",
         "Chioma", "Aditi", "Mateo", "Sun-hee", "Olusegun", "Zainab", "Lars", "Ines", "Tomás", "Mei", "Arjun", "Noor"]
LAST = ["Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy", "Hamilton", "Shannon",
        "Johnson", "Ritchie", "Perlman", "Thompson", "Goldwasser", "Berners-Lee", "Lamarr", "Wirth", "Wilson", "Bengio",
        "Li", "Hinton", "Schmidhuber", "Okafor", "Sharma", "García", "Kim", "Adeyemi", "Hussain", "Nilsson", "Moreau",
        "O'Brien", "Zhang", "Patel", "Haddad"]
COMMENTS = ["TODO: tidy up before the deadline", "worked on this with the TA in office hours", "second attempt",
            "I followed the handout's notation", "tested with check before submitting", "see the lecture notes",
            "finally passes the visible cases", "refactored after the first submission", "vectorised version"]
SUFFIXES = ["_new", "_tmp", "_val", "2", "_out", "_t", "_mine"]


@dataclass
class Student:
    id: str
    base: str
    people: list[tuple[str, str, str]]  # name, sid, email
    copy_of: int | None = None  # an earlier student's index whose files this one submits, byte for byte


def make_class(size: int, rng: random.Random, base_list: list[Base]) -> list[Student]:
    """`size` students, each with a base (in proportion to the bases' weights, the correct solutions taking the rest),
    one or two people, and a few exact copies of an earlier student of the same base."""
    weights = {b.key: b.weight for b in base_list}
    counts = {k: max(1, round(w * size / SIZE)) if w else 0 for k, w in weights.items()}
    counts["correct"] = max(1, size - sum(counts.values()))
    keys = [k for k, n in counts.items() for _ in range(n)][:size]
    rng.shuffle(keys)
    ids = sorted(rng.sample(range(180_000_000, 320_000_000), len(keys)))
    names = rng.sample([(f, l) for f in FIRST for l in LAST], len(keys) + len(keys) // GROUP_EVERY + 1)
    students, n = [], 0
    for i, (sid, key) in enumerate(zip(ids, keys)):
        people = []
        for _ in range(2 if i % GROUP_EVERY == GROUP_EVERY - 1 else 1):
            first, last = names[n]
            n += 1
            email = f"{first}.{last}".lower().replace(" ", "").replace("'", "") + "@example.edu"
            people.append((f"{first} {last}", f"{rng.randrange(10_000_000, 99_999_999)}", email))
        students.append(Student(str(sid), key, people))
    copyable = [i for i, s in enumerate(students) if s.base in ("correct", "part1-only") and i > 0]
    for i in rng.sample(copyable, min(EXACT_COPIES, len(copyable))):
        earlier = [j for j in range(i) if students[j].base == students[i].base and students[j].copy_of is None]
        if earlier:
            students[i].copy_of = rng.choice(earlier)
    return students


def rename_local(text: str, rng: random.Random) -> str:
    """`text` with one name assigned inside one function renamed everywhere in that function (not an argument, a name
    of the module's or a builtin's, an attribute or a keyword argument), checked to change nothing but that name;
    `text` itself where no such name is found."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    rng.shuffle(functions)
    taken = {t.string for t in _tokens(text) if t.type == tokenize.NAME}
    module_level = set(dir(builtins)) | {n.id for stmt in tree.body for n in ast.walk(stmt) if isinstance(n, ast.Name)
                                         and isinstance(n.ctx, ast.Store) and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef))}
    module_level |= {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    module_level |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for fn in functions:
        arguments = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg) if a}
        declared = {n for s in ast.walk(fn) if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
        stored = sorted({n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                        - arguments - declared - module_level - _in_fstrings(text, fn.lineno, fn.end_lineno))
        if not stored:
            continue
        old = rng.choice(stored)
        new = old + rng.choice(SUFFIXES)
        if new in taken:
            continue
        renamed = _renamed(text, old, new, fn.lineno, fn.end_lineno)
        if _same_but_names(renamed, tree, new, old):
            return renamed
    return text


def _same_but_names(renamed: str, tree: ast.AST, new: str, old: str) -> bool:
    """Whether `renamed` parses to `tree` once every name `new` is `old` again: only that name changed."""
    try:
        again = ast.parse(renamed)
    except SyntaxError:
        return False
    for node in ast.walk(again):
        if isinstance(node, ast.Name) and node.id == new:
            node.id = old
    return ast.dump(again) == ast.dump(tree)


def _in_fstrings(text: str, first: int, last: int) -> set[str]:
    """Names that may appear inside an f-string between lines first and last (one token each in Python 3.11)."""
    return {word for t in _tokens(text) if t.type == tokenize.STRING and first <= t.start[0] <= last
            and t.string[:2].lower().lstrip("rb").startswith("f") for word in re.findall(r"[A-Za-z_]\w*", t.string)}


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(text).readline))


def _renamed(text: str, old: str, new: str, first: int, last: int) -> str:
    tokens = [t for t in _tokens(text) if t.type not in (tokenize.NL, tokenize.COMMENT)]
    lines = text.splitlines(keepends=True)
    spots, depth = [], 0
    for i, t in enumerate(tokens):
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
        elif t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
        elif t.type == tokenize.NAME and t.string == old and first <= t.start[0] <= last:
            before = tokens[i - 1].string if i else ""
            after = tokens[i + 1].string if i + 1 < len(tokens) else ""
            if before == "." or (depth > 0 and after == "=" and before in ("(", ",")):
                continue  # an attribute, or a keyword argument
            spots.append(t.start)
    for row, col in sorted(spots, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)


def student_files(base: Path, dest: Path, rng: random.Random, who: str) -> None:
    """The base's files as one student submits them: a comment of their own on top of each Python file, and in one
    function a local name renamed."""
    dest.mkdir(parents=True)
    for path in sorted(base.iterdir()):
        if path.suffix != ".py":
            shutil.copy(path, dest / path.name)
            continue
        text = f"# {who}: {rng.choice(COMMENTS)}\n" + path.read_text()
        (dest / path.name).write_text(rename_local(text, rng))


def write_export(export: Path, students: list[Student], base_dirs: dict[str, Path], rng: random.Random) -> None:
    """A Gradescope "Export Submissions" folder: submission_metadata.yml and one submission_<id>/ per student."""
    export.mkdir(parents=True)
    created = datetime(2026, 11, 20, 23, 59, tzinfo=timezone(timedelta(hours=-8)))
    metadata = []
    for i, s in enumerate(students):
        folder = export / f"submission_{s.id}"
        if s.copy_of is not None:
            shutil.copytree(export / f"submission_{students[s.copy_of].id}", folder)
        else:
            student_files(base_dirs[s.base], folder, rng, s.people[0][0])
        when = created - timedelta(minutes=rng.randrange(0, 4 * 24 * 60))
        metadata.append(f"submission_{s.id}:\n  :submitters:\n"
                        + "".join(f"  - :name: {json.dumps(name, ensure_ascii=False)}\n    :sid: '{sid}'\n    :email: {email}\n"
                                  for name, sid, email in s.people)
                        + f"  :created_at: {when.strftime('%Y-%m-%d %H:%M:%S.%f')}000 -08:00\n  :score: 0.0\n  :results: {{}}\n")
    (export / "submission_metadata.yml").write_text("".join(metadata), encoding="utf-8")


SPEED = re.compile(r"^(\d+\.\d+)x the reference's time \(95% CI (\d+\.\d+)-(\d+\.\d+)")


def with_own_speed(rubric: Rubric, results: dict, rng: random.Random) -> dict:
    """A copy of `results` whose timing cases at full points measured a speed of their own (as each student's would):
    each ratio (its interval, its message, its leaderboard value) times a random factor, kept inside full points and
    above the flag, so that no score changes."""
    results = json.loads(json.dumps(results))
    boards = {k.number: k.leaderboard for c in rubric.components for k in c.cases if k.leaderboard}
    low, high = rubric.timing.flag_below * 3, rubric.timing.full_until * 0.97
    for test in results.get("tests", []):
        extra = test.get("extra_data", {})
        ratio = extra.get("ratio")
        if "timing" not in test.get("tags", []) or not isinstance(ratio, (int, float)) or test["score"] != test["max_score"] \
                or not low <= ratio <= high:
            continue
        new = min(high, max(low, ratio * rng.lognormvariate(0, 0.15)))
        extra["ratio"] = round(new, 4)
        if isinstance(extra.get("ci"), list):
            extra["ci"] = [round(c * new / ratio, 4) for c in extra["ci"]]
            test["output"] = SPEED.sub(f"{new:.2f}x the reference's time (95% CI {extra['ci'][0]:.2f}-{extra['ci'][1]:.2f}",
                                       test["output"])
        board = boards.get(test.get("number"))
        for entry in results.get("leaderboard", []) if board else []:
            if entry["name"] == board.name and board.value in ("speedup", "ratio"):
                entry["value"] = round(1 / new, 4) if board.value == "speedup" else round(new, 4)
    return results


def write_batch(rubric: Rubric, root: Path, students: list[Student], graded: dict[str, tuple[dict, dict]],
                rng: random.Random) -> Path:
    """ROOT/batch as grade-all would have written it for ROOT/export: each student's row and results its base's."""
    export, batch = root / "export", root / "batch"
    batch.mkdir(parents=True)
    shutil.copy(root / "secret.txt", batch / "secret.txt")
    os.chmod(batch / "secret.txt", 0o600)
    entries, _, _ = read_batch(export, batch / "unpacked")
    base_of = {s.id: s.base for s in students}
    rows, lines, started = {}, [], time.time() - 3600
    for e in entries:
        row, results = graded[base_of[e.id]]
        seconds = round(row["seconds"] * rng.uniform(0.85, 1.25), 2) if row["status"] == "ok" else row["seconds"]
        if results.get("tests"):
            results = {**with_own_speed(rubric, results, rng), "execution_time": seconds}
        rows[e.id] = {**row, "id": e.id, "content": e.digest(), "seconds": seconds, "graded_at": started,
                      "leaderboard": results.get("leaderboard", [])}
        started += seconds / 2
        write_results(batch / "results" / e.id / "results.json", results)
        (batch / "feedback").mkdir(exist_ok=True)
        (batch / "feedback" / f"{e.id}.md").write_text(feedback_md(e.id, rows[e.id], results), encoding="utf-8")
        lines.append(json.dumps(rows[e.id], sort_keys=True) + "\n")
    (batch / "journal.jsonl").write_text("".join(lines), encoding="utf-8")
    (batch / "grades.csv").write_text(grades_csv(rubric, entries, rows), encoding="utf-8", newline="")
    (batch / "grades_by_student.csv").write_text(student_grades_csv(rubric, entries, rows), encoding="utf-8", newline="")
    (batch / "canvas.csv").write_text(canvas_csv(rubric, entries, rows), encoding="utf-8", newline="")
    columns, board = leaderboard_rows(rubric.leaderboard, entries, rows)
    if columns:
        (batch / "leaderboard.csv").write_text(leaderboard_csv(columns, board), encoding="utf-8", newline="")
    base_summary = json.loads((root / "bases" / "batch" / "summary.json").read_text())
    record = {k: base_summary[k] for k in ("grader_version", "rubric", "solutions_sha256")}
    record |= {"source": str(export.resolve()), "isolation": base_summary.get("isolation", {})}
    run = {"started": datetime.fromtimestamp(time.time() - 3600, timezone.utc).isoformat(timespec="seconds"),
           "seconds": round(sum(r["seconds"] for r in rows.values()) / 2, 1), "graded": len(rows), "finished": True}
    (batch / "summary.json").write_text(summary_json(rubric, rows, record, [run]), encoding="utf-8")
    return batch


def build(root: Path, size: int = SIZE, rubric: Rubric | None = None, say=print, report: bool = True) -> dict:
    """Build ROOT/export and ROOT/batch (then the report, with `report`); returns what was built, with its seconds."""
    rubric = rubric or load_rubric(ROOT / "grading.yaml")
    root = root.resolve()
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise SystemExit(f"{root} holds files this script did not make: give an empty or new folder")
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).touch()
    clock = time.monotonic()
    graded = grade_bases(rubric, root, say)
    bases_seconds = time.monotonic() - clock
    rng = random.Random(f"class-report-{size}")
    base_list = bases(rubric)
    students = make_class(size, rng, base_list)
    for name in ("export", "batch"):
        shutil.rmtree(root / name, ignore_errors=True)
    folders = {b.key: root / "bases" / ("slow" if b.timeout else "submissions") / b.key for b in base_list}
    write_export(root / "export", students, folders, rng)
    batch = write_batch(rubric, root, students, graded, rng)
    cloning = time.monotonic() - clock - bases_seconds
    say(f"wrote {size} submissions to {root / 'export'} and their batch to {batch} in {cloning:.1f} s")
    built = {"root": str(root), "batch": str(batch), "size": size, "bases_seconds": round(bases_seconds, 1),
             "clone_seconds": round(cloning, 1), "bases": {b.key: b.what for b in base_list},
             "rows": dict(Counter(s.base for s in students)), "exact_copies": sum(s.copy_of is not None for s in students),
             "groups": sum(len(s.people) > 1 for s in students),
             "statuses": dict(Counter(graded[s.base][0]["status"] for s in students)),
             "base_grades": {key: [row["status"], f"{row['score']:g} / {row['max_score']:g}"] for key, (row, _) in graded.items()}}
    if report:
        started = time.monotonic()
        subprocess.run([*CLI, "report", str(batch)], check=True, stdout=subprocess.DEVNULL)
        built["report_seconds"] = round(time.monotonic() - started, 1)
        say(f"autograder report {batch}: {built['report_seconds']:.1f} s")
    (root / "built.json").write_text(json.dumps(built, indent=1) + "\n")
    return built


# ---------------------------------------------------------------- the measurement


GOAL_OPEN = 3.0  # seconds: navigation to the load event in headless chromium
GOAL_BYTES = 5_000_000  # report.html
OPENS = 3  # page openings measured; the median counts
SECTION = "## 7. The class report at 300 submissions"
PAGE_FIGURES = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  return {dom_content_loaded: nav.domContentLoadedEventEnd / 1000, load: nav.loadEventEnd / 1000,
          first_paint: paint ? paint.startTime / 1000 : null, elements: document.getElementsByTagName("*").length};
}"""
# The target of a student link is on screen: present, laid out, inside the viewport.
ON_SCREEN = """id => {
  const e = document.getElementById(id);
  if (!e) return false;
  const r = e.getBoundingClientRect();
  return r.height > 0 && r.width > 0 && r.top < innerHeight && r.bottom > 0;
}"""


def browser_module():
    """tests/browser.py (the test suite's Playwright helper), loaded from its file: tests/ is no package."""
    spec = importlib.util.spec_from_file_location("browser_helper", ROOT / "tests" / "browser.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report_once(batch: Path) -> dict:
    """`autograder report DIR` as a person runs it: its wall seconds and its peak memory (its own process)."""
    started = time.monotonic()
    process = subprocess.Popen([*CLI, "report", str(batch)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"autograder report {batch} failed: {process.stderr.read().decode()[-2000:]}")
    return {"seconds": round(seconds, 2), "peak_mb": round(usage.ru_maxrss / 1024, 1)}


def open_in_chromium(page_file: Path, opens: int = OPENS) -> dict:
    """The page opened `opens` times in headless chromium (one browser, a fresh context each time: nothing cached),
    each timed from the navigation's start to its load event; then one click from the first link to a student's
    section (`#student-<id>`) until that section is on screen. {"missing": why} where no browser can start."""
    helper = browser_module()
    with contextlib.ExitStack() as stack:
        try:
            browser = stack.enter_context(helper.open_browser())
        except helper.BrowserMissing as exc:
            return {"missing": str(exc)}
        runs, click = [], None
        for i in range(opens):
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            started = time.perf_counter()
            page.goto(page_file.as_uri(), wait_until="load", timeout=120_000)
            runs.append({"wall": round(time.perf_counter() - started, 3), **page.evaluate(PAGE_FIGURES), "errors": errors})
            if i == opens - 1:
                click = click_to_student(page)
            context.close()
        return {"browser": browser.version, "runs": runs, "click": click}


def click_to_student(page) -> dict:
    """One click on the overview's first link to a student's section, timed until that section is on screen."""
    link = page.locator('a[href^="#student-"]').first
    if page.locator('a[href^="#student-"]').count() == 0:
        return {"missing": "the page has no link to a #student-<id> section"}
    target = link.get_attribute("href")[1:]
    started = time.perf_counter()
    try:
        link.click(timeout=30_000)
        page.wait_for_function(ON_SCREEN, arg=target, timeout=30_000)
    except Exception as exc:  # Playwright's timeouts and errors: the step is reported as not measured, with why
        return {"missing": f"clicking the link to #{target} failed: {str(exc).splitlines()[0][:200]}"}
    return {"seconds": round(time.perf_counter() - started, 3), "target": target}


def measure(batch: Path) -> dict:
    """The figures of section 7 for a built batch: the report written again, its sizes, the page in chromium."""
    figures = {"report": report_once(batch)}
    figures["bytes"] = {name: (batch / name).stat().st_size for name in ("report.html", "report.json")}
    try:
        similarity = json.loads((batch / "report.json").read_text()).get("similarity", {})
        figures["similar_pairs"] = len(similarity.get("pairs", []))
    except (ValueError, AttributeError):
        pass
    figures["chromium"] = open_in_chromium(batch / "report.html")
    return figures


def run(size: int, root: Path | None, say, rubric: Rubric | None = None) -> dict:
    """Build the class (into `root`, kept; else a temporary folder) and measure it: built.json's and measure()'s
    figures together."""
    with contextlib.ExitStack() as stack:
        if root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="class-report-"))) / "class"
        built = build(root, size, rubric, say=say, report=False)
        say("measuring the report")
        return {**built, **measure(Path(built["batch"]))}


# ---------------------------------------------------------------- section 7


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def section(figures: dict | None, measured: str = "") -> str:
    """Section 7 of BENCHMARKS.md from run()'s figures; `measured` says by what command, when and on which commit."""
    if not figures:
        return "\n\n".join([SECTION, "Not measured in this run (`--report-size 0`). `benchmarks/run.py --only-report` "
                                     "measures this section alone and rewrites it in place."])
    rows, statuses = figures["rows"], figures["statuses"]
    base_rows = [[what, rows.get(key, 0), *figures.get("base_grades", {}).get(key, ["", ""])] for key, what in figures["bases"].items()]
    html_bytes, chromium = figures["bytes"]["report.html"], figures["chromium"]
    parts = [
        SECTION,
        (measured + " " if measured else "")
        + f"A class of {figures['size']} submissions as a Gradescope export (synthetic names, sids and emails; "
        f"{figures['groups']} groups of two), made without grading {figures['size']}: each submission is one of "
        f"{len(figures['bases'])} bases, graded once by `autograder grade-all` on the whole course (grading.yaml), "
        "with small edits of its own (a comment on top of each file, a local name renamed in one function); "
        f"{figures['exact_copies']} are byte-for-byte copies of another's. The batch folder (grades.csv and the other "
        "gradebooks, results/, feedback/, journal.jsonl, summary.json) is each row's base's grade under its own id, "
        "written by the grader's own functions; `benchmarks/class_report.py --build DIR` builds it alone to look at.",
        table(["base", "submissions", "status", "score"], base_rows),
        f"Statuses: {', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))}. Building took "
        f"{figures['bases_seconds']:.0f} s to grade the bases (`grade-all` resumes: a kept `--report-dir` whose bases "
        f"are current grades none) and {figures['clone_seconds']:.0f} s to write the {figures['size']} submissions and "
        "their batch folder.",
    ]
    opened = "not measured"
    if "missing" in chromium:
        browser_rows = [["opening in headless chromium", f"not measured: {chromium['missing']}", f"< {GOAL_OPEN:g} s", ""]]
    else:
        runs = chromium["runs"]
        wall = median(r["wall"] for r in runs)
        opened = f"{wall:.2f} s"
        paints = [r["first_paint"] for r in runs if r["first_paint"] is not None]
        click = chromium["click"] or {"missing": "not tried"}
        each = " / ".join(f"{r['wall']:.2f}" for r in runs)
        browser_rows = [
            [f"opening in headless chromium {chromium['browser']}: navigation to the load event (median of {len(runs)}; "
             "each in a fresh context)", f"{wall:.2f} s ({each})",
             f"< {GOAL_OPEN:g} s", "yes" if wall < GOAL_OPEN else "**no**"],
            ["- the page's own figures: DOMContentLoaded / load / first contentful paint (medians)",
             f"{median(r['dom_content_loaded'] for r in runs):.2f} / {median(r['load'] for r in runs):.2f} / "
             + (f"{median(paints):.2f} s" if paints else "- s"), "", ""],
            ["elements in the page; uncaught script errors while opening", f"{runs[-1]['elements']:,}; "
             f"{len(runs[-1].get('errors', []))}" + (f" ({runs[-1]['errors'][0][:120]})" if runs[-1].get("errors") else ""), "", ""],
            ["a click from the overview to a student's page (`#student-<id>`), until it is on screen",
             f"{click['seconds']:.2f} s" if "seconds" in click else f"not measured: {click['missing']}", "", ""],
        ]
    report = figures["report"]
    rows_ = [["`autograder report DIR`, wall time", f"{report['seconds']:.1f} s", "", ""],
             ["- its peak memory (resident)", f"{report['peak_mb']:.0f} MB", "", ""],
             ["report.html", _mb(html_bytes), f"< {_mb(GOAL_BYTES)}", "yes" if html_bytes < GOAL_BYTES else "**no**"],
             ["report.json", _mb(figures["bytes"]["report.json"]), "", ""]]
    if "similar_pairs" in figures:
        rows_.append(["pairs of submissions flagged as similar (report.json; the page lists the closest 100)", f"{figures['similar_pairs']:,}", "", ""])
    parts.append(table(["", "measured", "goal", "holds"], rows_ + browser_rows))
    small = html_bytes < GOAL_BYTES
    fast = "missing" not in chromium and median(r["wall"] for r in chromium["runs"]) < GOAL_OPEN
    verdict = ("both goals hold" if small and fast else "neither goal holds" if not small and not fast and "missing" not in chromium
               else f"the page {'is' if small else 'is not'} under {_mb(GOAL_BYTES)} and "
                    + (f"{'opens' if fast else 'does not open'} in under {GOAL_OPEN:g} s" if "missing" not in chromium
                       else "its opening was not measured"))
    similar = (f" The similarity section is at its worst here: every submission derives from one of "
               f"{len(figures['bases'])} bases, whose copies share all their tokens but comments and names, so "
               f"{figures['similar_pairs']:,} pairs of submissions are flagged, where a class of independent work flags few."
               if figures.get("similar_pairs") else "")
    parts.append(f"Reading: for a class of {figures['size']}, {verdict} (report.html {_mb(html_bytes)}, opened in "
                 f"{opened}).{similar}")
    return "\n\n".join(parts)


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, metavar="ROOT", help="build the class into ROOT (its export, its batch "
                        "folder ROOT/batch and that batch's report), print where, and stop")
    parser.add_argument("--measure", type=Path, metavar="ROOT", help="measure the class --build made in ROOT (the report "
                        "written again, its sizes, the page in chromium); print the figures and section 7's text")
    parser.add_argument("--size", type=int, default=SIZE, help=f"submissions in the class (default {SIZE})")
    parser.add_argument("--no-report", action="store_true", help="with --build: leave the report unwritten")
    args = parser.parse_args(argv)
    if args.build:
        built = build(args.build, args.size, report=not args.no_report, say=lambda what: print(what, flush=True))
        batch = Path(built["batch"])
        print(f"\nbatch folder: {batch}\nreport: {batch / 'report.html'}\nwrite it again: .venv/bin/autograder report {batch}")
    elif args.measure:
        built = json.loads((args.measure / "built.json").read_text())
        figures = {**built, **measure(Path(built["batch"]))}
        print(json.dumps({k: v for k, v in figures.items() if k not in ("bases", "base_grades")}, indent=1))
        print("\n" + section(figures))
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
