"""The class report's figures, as data (report.json holds them as they are): each submission as a TA looks it up, and
what the class as a whole got wrong. Read from the batch folder alone: grades.csv, each submission's results.json and
summary.json."""
from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

from ... import judge
from ...mutants import EVIDENCE
from ...report import PRINTED, cause, failures_first
from ...rubric import Rubric, read_yaml
from ...verify import CATALOG, Mistake, MistakesError
from ..gradebook import STATUSES, component_max, import_failure, max_score

LIKELY = re.compile(re.escape(judge.LIKELY) + r"(.+?)\.(?:\s|$)")
NOT_SUBMITTED = "not_submitted"
STUDENT_FAULTS = ("timeout", "crashed")  # a case the student's code ran past its limit in, or killed its worker in


def case_key(number: str) -> tuple:
    """Case numbers in the rubric's order: 5.9 before 5.10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", number))


def students(rubric: Rubric, rows: list[dict], results: dict[str, dict]) -> list[dict]:
    """Each submission: who submitted it, its status and score, per component its points or that it was not
    submitted, its failed cases with one line of cause each, its timing ratios, and where its feedback is."""
    out, most = [], max_score(rubric)
    for row in rows:
        sid, tests = row["submission_id"], results[row["submission_id"]].get("tests", [])
        graded = row["status"] == "ok"
        by_component: dict[str, list[dict]] = defaultdict(list)
        for t in tests:
            by_component[t["tags"][0]].append(t)
        failed = failures_first(tests)
        by_number = {t["number"]: t for t in failed}
        out.append({
            "submission": sid,
            "names": [n for n in row.get("name", "").split("; ") if n],
            "sids": [n for n in row.get("sid", "").split("; ") if n],
            "emails": [n for n in row.get("email", "").split("; ") if n],
            "status": row["status"],
            "score": float(row["score"]) if graded else None,
            "max_score": most,
            "reason": "" if graded else _reason(row, results[sid]),
            "components": {c.id: _component(c, by_component.get(c.id, []), graded) for c in rubric.components},
            "failed": [{"number": t["number"], "name": t["name"], "component": t["tags"][0], "outcome": _outcome(t),
                        "points": [t["score"], t["max_score"]], "cause": cause(t, by_number)}
                       for t in failed if _outcome(t) != NOT_SUBMITTED],
            "timing": [{"case": t["name"], "ratio": t["extra_data"]["ratio"], "flagged": bool(t["extra_data"].get("flagged"))}
                       for t in tests if "timing" in t.get("tags", []) and isinstance(t["extra_data"].get("ratio"), (int, float))],
            "feedback": f"feedback/{sid}.md",
            "results": f"results/{sid}/results.json",
        })
    return out


def _outcome(test: dict) -> str:
    return test.get("extra_data", {}).get("outcome", "passed" if test.get("status") == "passed" else "wrong")


def _component(component, tests: list[dict], graded: bool) -> dict:
    """A component's cell: its points, or why it has none (not graded; not submitted: every case says so), and where
    its file does not import, the error that stopped it (gradebook.import_failure)."""
    if not graded or not tests:
        return {"state": "not_graded", "score": None, "max": component_max(component)}
    if all(_outcome(t) == NOT_SUBMITTED for t in tests):
        return {"state": NOT_SUBMITTED, "score": 0.0, "max": component_max(component)}
    cell = {"state": "graded", "score": sum(float(t["score"]) for t in tests), "max": component_max(component)}
    failure = import_failure(tests)
    return {**cell, "does_not_import": {"error": failure[0], "message": failure[1], "cases": len(tests)}} if failure else cell


def _reason(row: dict, results: dict) -> str:
    """Why a submission was not graded: the first line the grader wrote for it (with the lines it announces, where it
    ends in a colon: "Found: README.txt: ignored"), else what its status means."""
    lines = results.get("output", "").strip().split("\n")
    said = " ".join(line.strip() for line in lines) if lines[0].endswith(":") else lines[0]
    return said[:300] or STATUSES.get(row["status"], row["status"])


def scores(rubric: Rubric, people: list[dict]) -> dict:
    """Score statistics over the graded submissions; a component's over those of them that submitted it."""
    graded = [p for p in people if p["status"] == "ok"]

    def describe(values: list[float], maximum: float, of: int) -> dict:
        return {"values": values, "max": maximum, "n": len(values), "of": of,
                "mean": statistics.fmean(values) if values else None,
                "median": statistics.median(values) if values else None,
                "full_marks": sum(v >= maximum for v in values) / len(values) if values else None}

    return {"total": describe([p["score"] for p in graded], max_score(rubric), len(graded)),
            "components": {c.id: describe([p["components"][c.id]["score"] for p in graded
                                           if p["components"][c.id]["state"] == "graded"], component_max(c), len(graded))
                           for c in rubric.components}}


def cases(rubric: Rubric, people: list[dict], results: dict[str, dict]) -> list[dict]:
    """Per component, in the rubric's order: how many graded submissions submitted it, and each of its cases' pass
    rate among them, hardest first, with its discrimination: its pass rate in the top quarter by total score minus in
    the bottom quarter (near 0: it does not separate strong from weak; negative: the weak pass it more often)."""
    graded = sorted((p for p in people if p["status"] == "ok"), key=lambda p: p["score"])
    out = []
    for c in rubric.components:
        submitted = [p for p in graded if p["components"][c.id]["state"] == "graded"]
        quarter = max(1, len(submitted) // 4)
        bottom, top = {p["submission"] for p in submitted[:quarter]}, {p["submission"] for p in submitted[-quarter:]}
        passed: dict[str, dict[str, bool]] = defaultdict(dict)
        names = {}
        for p in submitted:
            for t in results[p["submission"]].get("tests", []):
                if t["tags"][0] == c.id:
                    passed[t["number"]][p["submission"]] = t.get("status") == "passed"
                    names[t["number"]] = t["name"]

        def rate(among: set[str], by: dict[str, bool]) -> float:
            seen = [by[s] for s in among if s in by]
            return statistics.fmean(seen) if seen else 0.0

        rows = [{"number": n, "case": names[n], "pass_rate": sum(by.values()) / len(by),
                 "discrimination": rate(top, by) - rate(bottom, by), "submissions": len(by)} for n, by in passed.items()]
        out.append({"component": c.id, "part": c.part, "submitted": len(submitted), "graded": len(graded),
                    "cases": sorted(rows, key=lambda r: (r["pass_rate"], case_key(r["number"])))})
    return out


def mistakes(rubric: Rubric, people: list[dict], results: dict[str, dict]) -> list[dict]:
    """One row per likely mistake, the most common first: the judge's hint, or the catalogue's feedback phrase where no
    hint names the mistake, with the catalogue entries it is known as, the cases it was seen in and the submissions
    showing it, each once. A hint counts on a wrong answer only (where the judge writes one), and names the catalogue
    entries whose phrase it holds; a catalogue phrase alone counts only in a component where no case of the submission
    got a hint (a hint explains every element of its case, so the other failures of that component are most likely
    the same mistake seen from another case, and a phrase like "prob(" would name a second one). Only the grader's
    words count, never what the student's code printed under them."""
    catalogue = _catalogue(rubric)
    rows: dict[tuple[str, str], dict] = {}

    def add(source: str, component: str, text: str, sid: str, number: str, known: list[str]) -> None:
        row = rows.setdefault((component, text), {"component": component, "mistake": text, "source": source,
                                                  "known_as": [], "cases": set(), "submissions": set()})
        row["known_as"] += [k for k in known if k not in row["known_as"]]
        row["cases"].add(number)
        row["submissions"].add(sid)

    for p in people:
        if p["status"] != "ok":
            continue
        failed = [t for t in results[p["submission"]].get("tests", []) if t.get("status") != "passed" and _outcome(t) != NOT_SUBMITTED]
        said = {t["number"]: t.get("output", "").split(PRINTED)[0] for t in failed}
        hints = {t["number"]: LIKELY.findall(said[t["number"]]) if _outcome(t) == "wrong" else [] for t in failed}
        hinted = {t["tags"][0] for t in failed if hints[t["number"]]}
        for t in failed:
            component, number = t["tags"][0], t["number"]
            entries = [m for m in catalogue if m.component == component and m.feedback in said[number]]
            for hint in hints[number]:
                source = "mutant" if f"{hint}. {EVIDENCE}" in said[number] else "hint"  # found by a mutant of the reference
                add(source, component, hint, p["submission"], number, [m.name for m in entries if m.feedback in hint])
            if component not in hinted:  # a hint explains this component's failures: a phrase elsewhere is their echo
                for phrase in dict.fromkeys(m.feedback for m in entries):
                    add("catalogue", component, phrase, p["submission"], number, [m.name for m in entries if m.feedback == phrase])
    return sorted(({**r, "cases": sorted(r["cases"], key=case_key), "submissions": sorted(r["submissions"]),
                    "count": len(r["submissions"])} for r in rows.values()),
                  key=lambda r: (-r["count"], r["component"], r["mistake"]))


def _catalogue(rubric: Rubric) -> list[Mistake]:
    """solutions/mistakes.yaml's entries for this rubric's components (a rubric may grade only some)."""
    path = rubric.solutions_dir / CATALOG if rubric.solutions_dir else None
    if path is None or not path.is_file():
        return []
    ids = {c.id for c in rubric.components}
    return [Mistake.model_validate(e) for e in read_yaml(path, list, MistakesError) if isinstance(e, dict) and e.get("component") in ids]


def failure_groups(people: list[dict]) -> list[dict]:
    """Two or more graded submissions that fail exactly the same cases (of the components they submitted)."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for p in people:
        failed = tuple(sorted({f["number"] for f in p["failed"]}, key=case_key))
        if p["status"] == "ok" and failed:
            groups[failed].append(p["submission"])
    return sorted(({"failed_cases": list(k), "count": len(v), "submissions": v} for k, v in groups.items() if len(v) > 1),
                  key=lambda g: (-g["count"], [case_key(n) for n in g["failed_cases"]]))


def timing(rubric: Rubric, people: list[dict]) -> dict:
    """Each timing case's ratios (student time / reference time) over the graded submissions, and those flagged as
    suspiciously fast."""
    ratios: dict[str, list[float]] = defaultdict(list)
    for p in people:
        for t in p["timing"]:
            ratios[t["case"]].append(float(t["ratio"]))
    policy = rubric.timing
    return {"ratios": dict(ratios),
            "flagged": [{"submission": p["submission"], "case": t["case"], "ratio": t["ratio"]}
                        for p in people for t in p["timing"] if t["flagged"]],
            "thresholds": {"full_until": policy.full_until, "zero_at": policy.zero_at, "flag_below": policy.flag_below}}


def ran_badly(people: list[dict]) -> list[dict]:
    """One row per graded submission with cases that timed out or crashed (the student's code), or that the grader
    itself failed on (never the student's doing: a rerun grades them again): how many, and per component and outcome
    those cases, the first of them and its cause (one hang fails a component's every later case)."""
    out = []
    for p in people:
        groups: dict[tuple[str, str], list[dict]] = {}
        for f in p["failed"]:
            if f["outcome"] in (*STUDENT_FAULTS, "infra_error"):
                groups.setdefault((f["component"], f["outcome"]), []).append(f)
        if groups:
            out.append({"submission": p["submission"], "cases": sum(map(len, groups.values())),
                        "groups": [{"component": c, "outcome": o, "cases": [f["number"] for f in fs], "first": fs[0]["number"],
                                    "first_case": fs[0]["name"], "cause": fs[0]["cause"]} for (c, o), fs in groups.items()]})
    return out


def does_not_import(people: list[dict]) -> list[dict]:
    """One row per graded submission with a file that does not import (a syntax or import error): each such
    component, its error and how many cases it failed."""
    return [{"submission": p["submission"], "components": {c: v["does_not_import"] for c, v in p["components"].items()
                                                          if "does_not_import" in v}}
            for p in people if any("does_not_import" in v for v in p["components"].values())]


def changes(summary: dict) -> dict | None:
    """The grades the batch's last regrade changed (summary.json's "changes", where the run wrote one): when it ran,
    and per submission who, the old and new score and the cases that changed ("[ngram] case: 3 -> 5")."""
    found = summary.get("changes")
    if not isinstance(found, dict):
        return None
    rows = [{"submission": str(s.get("id", "")), "names": _names(s.get("names")),
             **{k: s[k] if isinstance(s.get(k), (int, float)) else None for k in ("old", "new", "delta")},
             "cases": [str(c) for c in s.get("cases") or []]}
            for s in found.get("submissions") or [] if isinstance(s, dict)]
    return {"run": _when(str(found.get("run", ""))), "submissions": rows}


def _names(names) -> list[str]:
    """A submission's names as a list, whether summary.json holds them joined by "; " or listed."""
    return [n for n in (names.split("; ") if isinstance(names, str) else names or []) if n]


def operations(people: list[dict], results: dict[str, dict]) -> dict:
    return {"statuses": dict(Counter(p["status"] for p in people)),
            "not_ok": [{"submission": p["submission"], "status": p["status"], "reason": p["reason"]}
                       for p in people if p["status"] != "ok"],
            "seconds": [results[p["submission"]].get("execution_time", 0.0) for p in people if p["status"] == "ok"]}


def header(rubric: Rubric, summary: dict, people: list[dict], generated: str) -> dict:
    """What the report was made from, and how many submissions each statistic covers."""
    runs = summary.get("runs", [])
    return {"course": rubric.course, "generated": generated, "source": summary.get("source", ""),
            "graded_at": _when(runs[-1]["started"]) if runs else "", "rubric": summary.get("rubric", {}),
            "grader_version": summary.get("grader_version", ""), "submissions": len(people),
            "graded": sum(p["status"] == "ok" for p in people),
            "statuses": dict(Counter(p["status"] for p in people))}


def when(moment: datetime) -> str:
    """A moment as a person reads it: 2026-11-27 07:18 UTC."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _when(iso: str) -> str:
    """A run's start (ISO 8601, as summary.json holds it), as `when` writes it."""
    try:
        return when(datetime.fromisoformat(iso))
    except ValueError:
        return iso


def read_results(out: Path, sid: str) -> dict:
    try:
        return json.loads((out / "results" / sid / "results.json").read_text())
    except (OSError, ValueError):
        return {"tests": []}
