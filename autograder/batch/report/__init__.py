"""The class report: what course staff learn from a finished batch, as `report.html` (one self-contained page,
plots embedded) and `report.json` (the same figures as data). Built from the batch folder alone: grades.csv,
each submission's results.json, summary.json, and the submissions themselves for the similarity section.
"""
from __future__ import annotations

import base64
import html
import io
import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from ... import judge
from ...report import PRINTED
from ...rubric import Rubric, read_yaml
from ...verify import CATALOG, Mistake, MistakesError
from ..gradebook import component_max, max_score, write_atomically
from ..inert import read_csv
from .similarity import DEFAULT_THRESHOLD, similarity

LIKELY = re.compile(re.escape(judge.LIKELY) + r"(.+?)\.(?:\s|$)")
from .similarity import SIDE_BY_SIDE
LISTED = 500  # pairs listed on the page (report.json lists all)


def build_report(out: Path, rubric: Rubric, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """Write out/report.json and out/report.html from the finished batch in `out`; returns the report's data."""
    rows = read_csv(out / "grades.csv")  # the values as graded, the quotes that kept them inert in a spreadsheet gone
    results = {r["submission_id"]: _results(out, r["submission_id"]) for r in rows}
    summary = json.loads((out / "summary.json").read_text())
    graded = [r for r in rows if r["status"] == "ok"]
    data = {
        "submissions": len(rows),
        "scores": _scores(rubric, graded),
        "cases": _cases(graded, results),
        "mistakes": _mistakes(rubric, graded, results),
        "failure_groups": _failure_groups(graded, results),
        "timing": _timing(rubric, graded, results),
        "operations": _operations(rows, results),
        "similarity": similarity(rubric, summary, out, threshold),
    }
    pairs = data["similarity"]["pairs"]
    as_data = {**data, "similarity": {**data["similarity"], "pairs": [{k: v for k, v in p.items() if k != "code"} for p in pairs]}}
    write_atomically(out / "report.json", json.dumps(as_data, indent=2))
    write_atomically(out / "report.html", _page(rubric, data, summary))
    return data


def _results(out: Path, sid: str) -> dict:
    try:
        return json.loads((out / "results" / sid / "results.json").read_text())
    except (OSError, ValueError):
        return {"tests": []}


# ---- the figures as data ------------------------------------------------------------------------------------------


def _scores(rubric: Rubric, graded: list[dict]) -> dict:
    def describe(values: list[float], maximum: float) -> dict:
        return {"values": values, "max": maximum, "mean": statistics.fmean(values) if values else None,
                "median": statistics.median(values) if values else None,
                "full_marks": sum(v >= maximum for v in values) / len(values) if values else None}

    return {"total": describe([float(r["score"]) for r in graded], max_score(rubric)),
            "components": {c.id: describe([float(r.get(c.id) or 0) for r in graded], component_max(c))
                           for c in rubric.components}}


def _cases(graded: list[dict], results: dict) -> list[dict]:
    """Per case: pass rate, and discrimination: its pass rate in the top quarter by total score minus in the bottom
    quarter (near 0: it does not separate strong from weak; negative: the weak pass it more often)."""
    ranked = sorted(graded, key=lambda r: float(r["score"]))
    quarter = max(1, len(ranked) // 4)
    bottom, top = {r["submission_id"] for r in ranked[:quarter]}, {r["submission_id"] for r in ranked[-quarter:]}
    passed: dict[str, dict[str, bool]] = defaultdict(dict)
    for r in graded:
        for test in results[r["submission_id"]].get("tests", []):
            passed[test["name"]][r["submission_id"]] = test.get("status") == "passed"
    cases = []
    for name, by in passed.items():
        rate = sum(by.values()) / len(by)
        top_rate = statistics.fmean([by[s] for s in top if s in by]) if top & by.keys() else 0.0
        bottom_rate = statistics.fmean([by[s] for s in bottom if s in by]) if bottom & by.keys() else 0.0
        cases.append({"case": name, "pass_rate": rate, "discrimination": top_rate - bottom_rate, "submissions": len(by)})
    return sorted(cases, key=lambda c: (c["discrimination"], c["pass_rate"]))


def _mistakes(rubric: Rubric, graded: list[dict], results: dict) -> list[dict]:
    """Each named likely mistake (the judge's hints, and the catalogue's feedback phrases) with the submissions
    whose failed cases name it, the most common first. Only the grader's message counts, never what the student's
    code printed under it; a hint counts only on a wrong answer, where the judge wrote it (the catalogue also names
    exceptions and forbidden calls, so it reads every failure's message)."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    catalogue = _catalogue(rubric)
    for r in graded:
        failed = [(t, t.get("output", "").split(PRINTED)[0]) for t in results[r["submission_id"]].get("tests", [])
                  if t.get("status") != "passed"]
        for test, said in failed:
            if test.get("extra_data", {}).get("outcome", "wrong") == "wrong":
                for name in LIKELY.findall(said):
                    found[("hint", name)].add(r["submission_id"])
        for m in catalogue:
            if any(m.feedback in said and m.component in t.get("tags", []) for t, said in failed):
                found[("catalogue", f"{m.component}: {m.name}")].add(r["submission_id"])
    return sorted(({"source": source, "mistake": name, "count": len(ids), "submissions": sorted(ids)}
                   for (source, name), ids in found.items()), key=lambda m: (-m["count"], m["mistake"]))


def _catalogue(rubric: Rubric) -> list[Mistake]:
    """solutions/mistakes.yaml's entries for this rubric's components (a rubric may grade only some)."""
    path = rubric.solutions_dir / CATALOG if rubric.solutions_dir else None
    if path is None or not path.is_file():
        return []
    ids = {c.id for c in rubric.components}
    return [Mistake.model_validate(e) for e in read_yaml(path, list, MistakesError) if isinstance(e, dict) and e.get("component") in ids]


def _failure_groups(graded: list[dict], results: dict) -> list[dict]:
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for r in graded:
        failed = tuple(sorted(t["number"] for t in results[r["submission_id"]].get("tests", []) if t.get("status") != "passed"))
        if failed:
            groups[failed].append(r["submission_id"])
    return sorted(({"failed_cases": list(k), "count": len(v), "submissions": v} for k, v in groups.items()),
                  key=lambda g: (-g["count"], g["failed_cases"]))


def _timing(rubric: Rubric, graded: list[dict], results: dict) -> dict:
    ratios: dict[str, list[float]] = defaultdict(list)
    flagged = []
    for r in graded:
        for test in results[r["submission_id"]].get("tests", []):
            extra = test.get("extra_data", {})
            if "timing" in test.get("tags", []) and isinstance(extra.get("ratio"), (int, float)):
                ratios[test["name"]].append(float(extra["ratio"]))
                if extra.get("flagged"):
                    flagged.append({"submission": r["submission_id"], "case": test["name"], "ratio": extra["ratio"]})
    policy = rubric.timing
    return {"ratios": ratios, "flagged": flagged,
            "thresholds": {"full_until": policy.full_until, "zero_at": policy.zero_at, "flag_below": policy.flag_below}}


def _operations(rows: list[dict], results: dict) -> dict:
    return {"statuses": dict(Counter(r["status"] for r in rows)),
            "not_ok": [{"submission": r["submission_id"], "status": r["status"],
                        "reason": results[r["submission_id"]].get("output", "")[:300]} for r in rows if r["status"] != "ok"],
            "seconds": [results[r["submission_id"]].get("execution_time", 0.0) for r in rows if r["status"] == "ok"]}


# ---- the page -----------------------------------------------------------------------------------------------------


def _pyplot():
    """matplotlib (the `batch` extra), imported when a report is drawn: grading never needs it."""
    import matplotlib

    matplotlib.use("Agg")  # no display: the figures only ever become PNG bytes
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def _histogram(values: list[float], maximum: float, title: str, xlabel: str) -> str:
    fig, ax = _pyplot().subplots(figsize=(6, 3))
    ax.hist(values, bins=20, range=(0, maximum), color="0.6", edgecolor="black")  # 5% of the maximum per bar
    if values:
        ax.axvline(statistics.fmean(values), color="black", linestyle="--", label="mean")
        ax.axvline(statistics.median(values), color="black", linestyle=":", label="median")
        ax.legend()
    ax.set(title=title, xlabel=xlabel, ylabel="submissions")
    return _png(fig)


def _ratios_plot(name: str, ratios: list[float], thresholds: dict) -> str:
    fig, ax = _pyplot().subplots(figsize=(6, 3))
    ax.hist(ratios, bins=20, color="0.6", edgecolor="black")
    for key, style in (("flag_below", ":"), ("full_until", "--"), ("zero_at", "-.")):
        ax.axvline(thresholds[key], color="black", linestyle=style, label=f"{key.replace('_', ' ')} {thresholds[key]:g}x")
    ax.set_xscale("log")
    ax.set(title=f"Speed: {name}", xlabel="student time / reference time (log scale)", ylabel="submissions")
    ax.legend(fontsize="small")
    return _png(fig)


def _cases_plot(cases: list[dict]) -> str:
    fig, ax = _pyplot().subplots(figsize=(6, 4))
    ax.scatter([c["pass_rate"] for c in cases], [c["discrimination"] for c in cases], color="black", s=12)
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.set(title="Cases: pass rate and discrimination", xlabel="share of submissions passing",
           ylabel="top quarter's pass rate - bottom quarter's")
    return _png(fig)


def _table(header: list[str], rows: list[list]) -> str:
    if not rows:
        return "<p>None.</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pct(x) -> str:
    return "" if x is None else f"{x:.0%}"


def _by_pair(pairs: list[dict]) -> dict[tuple[str, str], list[dict]]:
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for p in pairs:
        grouped[(p["a"], p["b"])].append(p)
    return grouped


def _page(rubric: Rubric, data: dict, summary: dict) -> str:
    scores, ops, sim = data["scores"], data["operations"], data["similarity"]
    total = scores["total"]
    parts = [f"<h1>{html.escape(rubric.course)}: class report</h1>",
             f"<p>{data['submissions']} submissions; rubric sha256 {html.escape(summary.get('rubric', {}).get('sha256', '')[:12])}; "
             f"grader {html.escape(summary.get('grader_version', ''))}.</p>",
             "<h2>Scores</h2>",
             _table(["", "mean", "median", "at full marks", "maximum"],
                    [["total", f"{total['mean']:.1f}" if total["mean"] is not None else "", total["median"] or "",
                      _pct(total["full_marks"]), total["max"]]]
                    + [[cid, f"{d['mean']:.1f}" if d["mean"] is not None else "", d["median"] if d["median"] is not None else "",
                        _pct(d["full_marks"]), d["max"]] for cid, d in scores["components"].items()]),
             _histogram(total["values"], total["max"], "Total scores", "points")]
    parts += [_histogram(d["values"], d["max"], f"Scores: {cid}", "points") for cid, d in scores["components"].items()]
    parts += ["<h2>Cases</h2><p>Sorted by discrimination: cases near 0 do not separate strong submissions from weak "
              "ones; a pass rate near 0 or 1 is too hard or too easy for this class.</p>",
              _cases_plot(data["cases"]),
              _table(["case", "pass rate", "discrimination"],
                     [[c["case"], _pct(c["pass_rate"]), f"{c['discrimination']:+.2f}"] for c in data["cases"] if c["pass_rate"] < 1])]
    easy = [c["case"] for c in data["cases"] if c["pass_rate"] == 1]
    if easy:
        parts.append(f"<details><summary>{len(easy)} cases every graded submission passed</summary><ul>"
                     + "".join(f"<li>{html.escape(name)}</li>" for name in easy) + "</ul></details>")
    parts += ["<h2>Mistakes</h2><p>Named likely mistakes (the grader's hints, and the catalogue's) and the submissions "
              "showing them, the most common first.</p>",
              _table(["mistake", "from", "submissions", "ids"],
                     [[m["mistake"], m["source"], m["count"], ", ".join(m["submissions"])] for m in data["mistakes"]]),
              "<h3>Submissions with the same failed cases</h3>",
              _table(["failed cases", "submissions", "ids"],
                     [[" ".join(g["failed_cases"]), g["count"], ", ".join(g["submissions"])] for g in data["failure_groups"][:30]])]
    timing = data["timing"]
    parts += ["<h2>Timing</h2>"] + ([_ratios_plot(name, ratios, timing["thresholds"]) for name, ratios in timing["ratios"].items()]
                                    or ["<p>No timing case graded a submission in this batch.</p>"])
    parts += ["<p>Flagged as suspiciously fast (more than "
              f"{1 / timing['thresholds']['flag_below']:g}x faster than the reference):</p>",
              _table(["submission", "case", "ratio"], [[f["submission"], f["case"], f["ratio"]] for f in timing["flagged"]])]
    parts += ["<h2>Operations</h2>", _table(["status", "submissions"], sorted(ops["statuses"].items())),
              "<p>Submissions that were not graded, and why:</p>",
              _table(["submission", "status", "reason"], [[n["submission"], n["status"], n["reason"]] for n in ops["not_ok"]]),
              _histogram(ops["seconds"], max(ops["seconds"], default=1.0), "Grading time per submission", "seconds")]
    parts += [f"<h2>Similarity</h2><p>Pairs whose files share at least {sim['threshold']:.0%} of their tokens beyond the "
              "starter code (winnowed fingerprints, copydetect). Similarity is a reason to look, not a verdict: "
              "shared sources, small files and common solutions all raise it.</p>",
              "<p>Groups of submissions linked by such pairs, the largest first:</p>",
              _table(["submissions", "size"], [[", ".join(g), len(g)] for g in sim["groups"]]),
              _table(["submissions", "files (similarity of each side)"],
                     [[f"{a} and {b}", "; ".join(f"{p['file']} ({p['similarity'][0]:.0%} / {p['similarity'][1]:.0%})" for p in ps)]
                      for (a, b), ps in list(_by_pair(sim["pairs"]).items())[:LISTED]])]
    if len(_by_pair(sim["pairs"])) > LISTED:
        parts.append(f"<p>The {LISTED} most similar pairs of submissions are listed; report.json lists all "
                     f"{len(_by_pair(sim['pairs']))}.</p>")
    for p in sim["pairs"][:SIDE_BY_SIDE]:
        parts.append(f"<details><summary>{html.escape(p['file'])}: {html.escape(p['a'])} and {html.escape(p['b'])}</summary>"
                     f"<div class=pair><pre>{html.escape(p['code'][0])}</pre><pre>{html.escape(p['code'][1])}</pre></div></details>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#111}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #999;padding:2px 6px;text-align:left;font-size:90%}img{display:block;margin:1em 0}"
             ".pair{display:flex;gap:1em}.pair pre{flex:1;overflow:auto;border:1px solid #999;padding:4px;font-size:75%}")
    return f"<!doctype html><html><head><meta charset=utf-8><title>Class report</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"
