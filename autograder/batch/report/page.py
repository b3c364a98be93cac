"""report.html: one self-contained page (plots inlined, a few KB of script, nothing fetched). On top the class view:
a heat map of every submission by component, whom to look at, what to re-teach, similarity and operations; below it a
page per submission, shown alone when its link is followed (#student-<id>). Every text a student chose (names,
messages, code) is escaped."""
from __future__ import annotations

import html
import math
import re
from importlib.resources import files
from urllib.parse import quote

from ...report import numbered
from ..gradebook import STATUSES
from . import plots
from .figures import case_key

HEATMAP_BLOCKS = 5  # columns of submissions the heat map is laid out in, side by side: 300 fit on a 1400 x 900 screen
SHORT = {"not_gradable": "unread", "infra_error": "rerun"}  # a status in the heat map's total column (its legend says it whole)
# What happened to a failed case (results.json's outcome), in words a TA reads without the grader's vocabulary.
OUTCOMES = {
    "wrong": "wrong answer",
    "raised": "raised an error",
    "not_implemented": "not implemented yet (raised NotImplementedError)",
    "forbidden": "used what the component forbids",
    "timeout": "timed out",
    "crashed": "crashed the process running it",
    "bad_reply": "returned something the grader cannot accept",
    "refused": "refused before any of it ran (the file uses a back door)",
    "infra_error": "the grader failed (not the student's doing; a rerun grades it again)",
    "skipped": "skipped",
    "not_submitted": "not submitted",
}
LISTED = 12  # submissions named in one line of the overview before "and N more"
ROOMY = 60  # up to this many submissions, the heat map's rows are tall enough to read at a glance
LOWEST = (5, 30)  # "lowest scores" lists a tenth of the graded, at least and at most these many
PAIRS_LISTED = 100  # pairs of submissions listed (report.json lists all)
PARTNERS_LISTED = 10  # the closest submissions listed on a submission's page
NAMES_LISTED = 12  # submissions named in a Mistakes row before "and N more"
PAIR_COLUMNS = ["closeness", "submission", "and submission", "exact copy", "files (share of each side found in the other)",
                "code"]


class Html(str):
    """Markup made here (already escaped where it holds student text); `sort` is its cell's sort key."""

    def __new__(cls, markup: str, sort=None):
        made = super().__new__(cls, markup)
        made.sort = sort
        return made


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def anchor(sid: str) -> str:
    """The id of a submission's page: its own id where that is a plain word, else a code of it."""
    return f"student-{sid}" if re.fullmatch(r"[\w.-]+", sid, re.ASCII) else f"student-x{sid.encode().hex()}"


def table(header: list[str], rows: list[list], groups: list[tuple[str, list[list]]] | None = None, numeric=()) -> str:
    """A sortable table; `groups`: (heading, rows) each under a heading row of its own, sorted within it."""
    if not rows and not groups:
        return "<p>None.</p>"
    head = "".join(f"<th>{esc(h)}</th>" for h in header)

    def line(row: list) -> str:
        cells = []
        for i, c in enumerate(row):
            sort = f' data-sort="{esc(c.sort)}"' if isinstance(c, Html) and c.sort is not None else ""
            cls = ' class="num"' if i in numeric else ""
            cells.append(f"<td{cls}{sort}>{c if isinstance(c, Html) else esc(c)}</td>")
        return "<tr>" + "".join(cells) + "</tr>"

    bodies = ([f'<tbody><tr class="group"><th colspan="{len(header)}">{heading}</th></tr>' + "".join(map(line, body)) + "</tbody>"
               for heading, body in groups] if groups else ["<tbody>" + "".join(map(line, rows)) + "</tbody>"])
    return f'<table class="sortable"><thead><tr>{head}</tr></thead>{"".join(bodies)}</table>'


def pct(x) -> str:
    return "" if x is None else f"{x:.0%}"


def number(x) -> str:
    return "" if x is None else f"{x:g}"


def ratio(r: float) -> Html:
    """A timing ratio (student time / reference time) that says which way is faster: "0.52x the reference's time (1.9x
    faster)"."""
    how = "as fast" if round(r, 2) == 1 else "slower" if r > 1 else f"{1 / r:.2g}x faster" if r > 0 else "faster"
    return Html(esc(f"{r:.2g}x the reference's time ({how})"), r)


def meaning(status: str) -> str:
    """What a submission's status means (gradebook.STATUSES)."""
    return STATUSES.get(status, "a status this report does not know")


def status_words(status: str) -> str:
    """A submission's status as a person reads it, with what it means: "not gradable: nothing readable was ..."."""
    return "graded" if status == "ok" else f"{status.replace('_', ' ')}: {meaning(status)}"


def outcome_words(outcome: str) -> str:
    return OUTCOMES.get(outcome, outcome.replace("_", " "))


class Page:
    """The page of one report's data; `people` by submission id."""

    def __init__(self, data: dict):
        self.data = data
        self.people = {p["submission"]: p for p in data["students"]}
        self.components = list(data["scores"]["components"])
        self.partners = _partners(data["similarity"]["pairs"])

    def who(self, sid: str) -> str:
        p = self.people.get(sid)
        return ", ".join(p["names"]) if p and p["names"] else sid

    def link(self, sid: str) -> Html:
        return Html(f'<a href="#{anchor(sid)}">{esc(self.who(sid))}</a>', self.who(sid))

    def links(self, ids: list[str], limit: int | None = None) -> Html:
        shown = ids if limit is None else ids[:limit]
        more = f" and {len(ids) - len(shown)} more" if len(ids) > len(shown) else ""
        return Html(", ".join(self.link(s) for s in shown) + more, len(ids))

    def render(self) -> str:
        style = (files(__package__) / "page.css").read_text()
        script = (files(__package__) / "page.js").read_text()
        changed = self.data.get("changes")
        sections = [self.overview(), self.look(), *([self.changes()] if changed else []), self.reteach(), self.similarity(),
                    self.operations()]
        nav = ('<nav><a href="#overview">Overview</a><a href="#look">Whom to look at</a>'
               + ('<a href="#changes">What changed</a>' if changed else "")
               + '<a href="#reteach">What to re-teach</a><a href="#similarity">Similarity</a>'
               '<a href="#operations">Operations</a></nav>')
        students = "".join(self.student(p) for p in self.data["students"])
        return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(self.data['header']['course'])}: class report</title>"
                f"<style>{style}</style></head><body>{self.header()}{nav}<div id=classview>{''.join(sections)}</div>"
                f"{students}<script>{script}</script></body></html>")

    # ---- the top of the page ----------------------------------------------------------------------------------

    def header(self) -> str:
        h = self.data["header"]
        statuses = "; ".join(f"{n} {status_words(s)}" for s, n in sorted(h["statuses"].items(), key=lambda kv: -kv[1]))
        rubric = h["rubric"]
        return (f"<h1>{esc(h['course'])}: class report</h1>"
                f"<p class=header>{h['submissions']} submissions of {esc(h['source'] or 'an unknown source')}, "
                f"graded {esc(h['graded_at'] or 'at an unknown time')} against {esc(rubric.get('path', ''))} "
                f"(sha256 {esc(rubric.get('sha256', '')[:12])}) by grader {esc(h['grader_version'])}; this report written "
                f"{esc(h['generated'])}: {esc(statuses)}. Scores and cases count the {h['graded']} graded submissions; a "
                "component's, those of them that submitted it (the number is given with each).</p>")

    def overview(self) -> str:
        people = sorted(self.data["students"], key=_weakest_first)
        k = len(self.components)
        blocks = min(HEATMAP_BLOCKS, max(1, math.ceil(len(people) / 25)))
        per = math.ceil(len(people) / blocks) if people else 0
        head = ('<div class="hrow hhead"><span class=n></span>' + "".join(f"<span>{esc(c)}</span>" for c in self.components)
                + "<span class=t>total</span></div>")
        columns = "".join(f'<div class="hblock">{head}{"".join(self.heat_row(p) for p in people[i * per:(i + 1) * per])}</div>'
                          for i in range(blocks))
        legend = ("<div class=legend><span><i class=q10></i>full marks</span><span><i class=q7></i>70%</span>"
                  "<span><i class=q4></i>40%</span><span><i class=q0></i>none</span><span><i class=ns></i>not submitted</span>"
                  "<span><i class=ni></i>does not import (a syntax or import error)</span>"
                  "<span><i class=ng></i>not graded</span>")
        controls = ('<span>Order: <button data-order="rank" aria-pressed=true>weakest first</button> '
                    '<button data-order="name">by name</button> <label>Find: <input id=filter type=search '
                    'placeholder="name, id or email"></label></span><span>Each row opens that submission\'s page.</span>')
        shown = {p["status"] for p in people if p["score"] is None}
        totals = "; ".join(f"{esc(SHORT.get(s, s))}: not graded, as {esc(meaning(s))}" for s in sorted(shown))
        totals = (f"<p class=legend>Total: the share of the points{', or why there is none: ' + totals if totals else ''}. "
                  "Hover over a cell for its points or reason.</p>")
        roomy = " roomy" if len(people) <= ROOMY else ""
        return (f'<section id=overview><h2>Overview</h2>{legend}{controls}</div>{totals}'
                f'<div class="heatmap{roomy}" id=heatmap style="--k:{k}">{columns}</div>{self.broken_line()}</section>')

    def broken_line(self) -> str:
        """Under the heat map: who has a file that does not import, and its error ("ngram.py: SyntaxError")."""
        rows = self.data["does_not_import"]
        if not rows:
            return ""
        said = [f"{self.link(r['submission'])} ({esc(_errors(r))})" for r in rows[:LISTED]]
        more = f" and {len(rows) - LISTED} more" if len(rows) > LISTED else ""
        return (f"<p>{len(rows)} submission{'s' * (len(rows) != 1)} with a file that does not import (a syntax or import "
                f"error: none of its cases ran): {', '.join(said)}{more}; see Whom to look at.</p>")

    def heat_row(self, p: dict) -> str:
        cells = []
        for cid in self.components:
            c = p["components"][cid]
            if "does_not_import" in c:
                cells.append(f'<i class="ni" title="{esc(cid)}: {number(c["score"])} / {number(c["max"])}; its file does not '
                             f'import: {esc(c["does_not_import"]["message"])}"></i>')
            elif c["state"] == "graded":
                share = c["score"] / c["max"] if c["max"] else 1.0
                cells.append(f'<i class="q{math.floor(share * 10 + 1e-9)}" title="{esc(cid)}: {number(c["score"])} / {number(c["max"])}"></i>')
            elif c["state"] == "not_submitted":
                cells.append(f'<i class="ns" title="{esc(cid)}: not submitted"></i>')
            else:
                cells.append(f'<i class="ng" title="{esc(cid)}: not graded ({esc(p["status"].replace("_", " "))})"></i>')
        graded = p["score"] is not None
        total = pct(p["score"] / p["max_score"]) if graded and p["max_score"] else SHORT.get(p["status"], p["status"])
        why = f"{number(p['score'])} / {number(p['max_score'])}" if graded else f"not graded: {p['reason']}"
        key = " ".join([p["submission"], *p["names"], *p["sids"], *p["emails"]]).lower()
        return (f'<a class=hrow href="#{anchor(p["submission"])}" data-rank="{_weakest_first(p)[0]:.4f}" '
                f'data-name="{esc(self.who(p["submission"]).lower())}" data-key="{esc(key)}">'
                f'<span class=n>{esc(self.who(p["submission"]))}</span>{"".join(cells)}'
                f'<span class=t title="{esc(why)}">{esc(total)}</span></a>')

    # ---- whom to look at --------------------------------------------------------------------------------------

    def look(self) -> str:
        d = self.data
        graded = sorted((p for p in d["students"] if p["status"] == "ok"), key=lambda p: p["score"])
        n = min(LOWEST[1], max(LOWEST[0], math.ceil(len(graded) / 10)), len(graded))
        lowest = table(["submission", "score", "%", "components submitted", "failed cases"],
                       [[self.link(p["submission"]), number(p["score"]), Html(pct(p["score"] / p["max_score"]), p["score"] / p["max_score"]),
                         _submitted(p), len(p["failed"])]
                        for p in graded[:n]], numeric=(1, 2, 4))
        not_ok = table(["submission", "status", "why"], [[self.link(x["submission"]), status_words(x["status"]), x["reason"]]
                                                         for x in d["operations"]["not_ok"]])
        broken = table(["submission", "cases failed", "files that do not import, and the error"],
                       [[self.link(x["submission"]), sum(v["cases"] for v in x["components"].values()),
                         "; ".join(f"{c}: {v['message'].removeprefix('Your code raised ')}" for c, v in x["components"].items())]
                        for x in d["does_not_import"]], numeric=(1,))
        bad = table(["submission", "cases", "what happened"],
                    [[self.link(x["submission"]), x["cases"], "; ".join(map(_ran_badly, x["groups"]))] for x in d["ran_badly"]],
                    numeric=(1,))
        flag = d["timing"]["thresholds"]["flag_below"]
        flagged: dict[str, list[dict]] = {}
        for f in d["timing"]["flagged"]:
            flagged.setdefault(f["submission"], []).append(f)
        fast = table(["submission", "cases flagged", "time against the reference's"],
                     [[self.link(sid), len(fs),
                       Html("; ".join(f"{esc(f['case'])}: {ratio(f['ratio'])}" for f in fs), min(f["ratio"] for f in fs))]
                      for sid, fs in flagged.items()], numeric=(1,))
        groups = table(["size", "submissions"], [[len(g), self.links(g)] for g in d["similarity"]["groups"]], numeric=(0,))
        return ("<section id=look><h2>Whom to look at</h2><div class=cols>"
                f"<div><h3>Lowest scores ({n} lowest of {len(graded)} graded)</h3>{lowest}</div>"
                f"<div><h3>Not graded, and why</h3>{not_ok}</div>"
                f"<div><h3>Files that do not import (a syntax or import error)</h3>{broken}</div>"
                f"<div><h3>Cases that timed out or crashed</h3><div class=scroll>{bad}</div></div>"
                f"<div><h3>Timing flagged as suspiciously fast (under {flag:g}x the reference's time)</h3>{fast}</div>"
                f"<div><h3>Similarity groups</h3>{groups}</div></div></section>")

    # ---- what to re-teach -------------------------------------------------------------------------------------

    def reteach(self) -> str:
        d = self.data
        submitted = {c["component"]: c["submitted"] for c in d["cases"]}
        mistakes = table(["mistake", "component", "known in the catalogue as", "cases", "submissions", "share", "who"],
                         [[m["mistake"] if m["source"] != "catalogue" else "; ".join(m["known_as"]), m["component"],
                           _known_as(m),
                           Html(esc(" ".join(m["cases"])), _case_sort(m["cases"][0]) if m["cases"] else ""), m["count"],
                           Html(pct(m["count"] / submitted[m["component"]]), m["count"] / submitted[m["component"]])
                           if submitted.get(m["component"]) else "", self.links(m["submissions"], NAMES_LISTED)]
                          for m in d["mistakes"]], numeric=(4, 5))
        groups, nobody = [], []
        for c in d["cases"]:
            if not c["submitted"]:
                nobody.append(c["component"])
                continue
            everyone = sum(r["pass_rate"] == 1 for r in c["cases"])
            heading = (f"{esc(c['component'])} ({esc(c['part'])}): submitted by {c['submitted']} of {c['graded']} graded"
                       + (f"; {everyone} cases all of them passed are not listed" if everyone else ""))
            groups.append((heading, [[Html(esc(r["number"]), _case_sort(r["number"])),
                                      _bare(r["case"]), Html(pct(r["pass_rate"]), r["pass_rate"]),
                                      Html(f"{r['discrimination']:+.2f}", r["discrimination"]), r["submissions"]] for r in c["cases"] if r["pass_rate"] < 1]))
        cases = table(["case", "name", "pass rate", "discrimination", "of"], [], groups=groups, numeric=(2, 3, 4)) if groups else "<p>None.</p>"
        nobody_line = (f"<p>Not submitted by anyone graded: {esc(', '.join(nobody))} (its cases are left out, not counted as failed).</p>"
                       if nobody else "")
        same = table(["failed cases", "submissions", "who"],
                     [[_ranges(g["failed_cases"]), g["count"], self.links(g["submissions"], NAMES_LISTED)] for g in d["failure_groups"][:30]],
                     numeric=(1,))
        timing = ("<p>Each timing case's ratios: the student's time over the reference's on the same inputs; under 1x is "
                  f"faster than the reference, over it slower.</p>{plots.timing(d['timing'])}" if d["timing"]["ratios"]
                  else "<p>No timing case graded a submission in this batch.</p>")
        return ("<section id=reteach><h2>What to re-teach</h2>"
                "<h3>Mistakes</h3><p>The likely mistakes the grader named (its hints, and the catalogue's known mistakes "
                "where no hint names one), each once, with the submissions showing it; the share is of those who "
                f"submitted the component.</p><div class=scroll>{mistakes}</div>"
                f"<h3>Scores</h3>{self.score_table()}{plots.scores(d['scores'])}"
                "<h3>Cases</h3><p>By component, hardest first; pass rates are over those who submitted the component. "
                "Discrimination is the top quarter's pass rate minus the bottom quarter's: near 0, a case does not separate "
                f"strong submissions from weak ones.</p>{nobody_line}{plots.cases(d['cases'])}<div class=scroll>{cases}</div>"
                f"<h3>Submissions that fail exactly the same cases</h3>{same}<h3>Timing</h3>{timing}</section>")

    def score_table(self) -> str:
        s = self.data["scores"]
        rows = [[name, Html(f"{d['n']} of {d['of']}", d["n"]), "" if d["mean"] is None else f"{d['mean']:.1f}",
                 "" if d["median"] is None else f"{d['median']:.1f}".removesuffix(".0"), pct(d["full_marks"]), number(d["max"])]
                for name, d in [("total", s["total"]), *s["components"].items()]]
        return table(["score of", "submitted", "mean", "median", "at full marks", "maximum"], rows, numeric=(2, 3, 4, 5))

    # ---- what changed -----------------------------------------------------------------------------------------

    def changes(self) -> str:
        """What the batch's last regrade changed (summary.json's "changes"): one row per submission, the largest drop
        first, with the cases that changed."""
        ch = self.data["changes"]
        ordered = sorted(ch["submissions"], key=lambda s: (s["delta"] is None, s["delta"] or 0, s["submission"]))
        rows = [[self.link(s["submission"]) if s["submission"] in self.people else ", ".join(s["names"]) or s["submission"],
                 number(s["old"]), number(s["new"]), Html("" if s["delta"] is None else f"{s['delta']:+g}", s["delta"]),
                 Html("<br>".join(esc(c) for c in s["cases"]), len(s["cases"]))] for s in ordered]
        n = len(rows)
        run = esc(ch["run"] or "an unknown time")
        said = (f"The regrade of {run} changed {n} grade{'s' * (n != 1)}, the largest drop first; each case that changed "
                "is listed with its points before and after." if n else f"The regrade of {run} changed no grade.")
        listed = table(["submission", "old score", "new score", "change", "cases that changed (points: old -> new)"], rows,
                       numeric=(1, 2, 3)) if n else ""
        return f"<section id=changes><h2>What changed</h2><p>{said}</p><div class=scroll>{listed}</div></section>"

    # ---- similarity -------------------------------------------------------------------------------------------

    def similarity(self) -> str:
        sim = self.data["similarity"]
        pairs = sim["pairs"]
        intro = (f"<p>Pairs of submissions whose files share at least {sim['threshold']:.0%} of their code beyond the starter "
                 "(copydetect's fingerprints), the closest first, one row per pair. Similarity is a reason to look, not a "
                 "verdict: shared sources, small files and common solutions all raise it.</p>")
        if sim.get("note"):
            return f"<section id=similarity><h2>Similarity</h2>{intro}<p>Not computed: {esc(sim['note'])}.</p></section>"
        rows = [[Html(f"{p['closeness']:.0%}", p["closeness"]), self.link(p["a"]), self.link(p["b"]),
                 Html('<span class=badge>exact copy</span>', 1) if p["exact"] else Html("no", 0),
                 _shares(p["files"]),
                 Html(f'<a href="#pair-{i}">side by side</a>', 1) if p.get("views") else ""]
                for i, p in enumerate(pairs[:PAIRS_LISTED])]
        more = (f"<p>And {len(pairs) - PAIRS_LISTED} more pairs in report.json.</p>" if len(pairs) > PAIRS_LISTED else "")
        views = "".join(self.pair_view(i, p) for i, p in enumerate(pairs) if p.get("views"))
        unshown = sum(1 for p in pairs if not p.get("views"))
        shown_line = (f"<p>The {sim.get('shown', 0)} closest pairs side by side, the matching code marked"
                      + (f"; the other {unshown} are not shown side by side.</p>" if unshown else ".</p>") if pairs else "")
        return (f"<section id=similarity><h2>Similarity</h2>{intro}"
                f"<div class=scroll>{table(PAIR_COLUMNS, rows)}</div>"
                f"{more}{shown_line}{views}</section>")

    def pair_view(self, i: int, p: dict) -> str:
        files_ = "".join(f"<h4>{esc(v['file'])}</h4><div class=pair>"
                         + "".join(f"<div><b>{esc(self.who(sid))}</b><pre>{_marked(code, marks)}</pre></div>"
                                   for sid, code, marks in zip((p["a"], p["b"]), v["code"], v["marks"]))
                         + "</div>" for v in p["views"])
        badge = " <span class=badge>exact copy</span>" if p["exact"] else ""
        return (f"<details id=pair-{i}><summary>{esc(self.who(p['a']))} and {esc(self.who(p['b']))}: "
                f"{p['closeness']:.0%}{badge}</summary>{files_}</details>")

    # ---- operations -------------------------------------------------------------------------------------------

    def operations(self) -> str:
        ops = self.data["operations"]
        statuses = table(["status", "submissions", "what it means"],
                         [[s.replace("_", " "), n, meaning(s)]
                          for s, n in sorted(ops["statuses"].items())], numeric=(1,))
        return f"<section id=operations><h2>Operations</h2>{statuses}{plots.seconds(ops['seconds']) if ops['seconds'] else ''}</section>"

    # ---- a page per submission --------------------------------------------------------------------------------

    def student(self, p: dict) -> str:
        sid = p["submission"]
        people = "; ".join(filter(None, [", ".join(p["names"]), ", ".join(p["sids"]), ", ".join(p["emails"])]))
        score = (f"{number(p['score'])} / {number(p['max_score'])} ({pct(p['score'] / p['max_score'])})" if p["score"] is not None
                 else f"not graded: {esc(p['reason'])}")
        notes = {"graded": "", "not_submitted": "not submitted", "not_graded": "not graded"}
        components = table(["component", "points", "of", "note"],
                           [[cid, number(c["score"]) if c["state"] == "graded" else "", number(c["max"]),
                             "its file does not import: see the failed cases" if "does_not_import" in c else notes[c["state"]]]
                            for cid, c in p["components"].items()], numeric=(1, 2))
        failed = table(["cases", "what happened", "points", "cause"],
                       [[Html(esc(_cases(g)), _case_sort(g[0]["number"])),
                         "its file does not import" if "does_not_import" in p["components"][g[0]["component"]]
                         else outcome_words(g[0]["outcome"]),
                         f"{sum(f['points'][0] for f in g):g} / {sum(f['points'][1] for f in g):g}", g[0]["cause"]]
                        for g in _runs(p["failed"])])
        timing = table(["case", "time against the reference's", "flag"],
                       [[t["case"], ratio(t["ratio"]), "suspiciously fast" if t["flagged"] else ""] for t in p["timing"]],
                       numeric=(1,))
        partners = table(["similar to", "closeness", "files", "code"],
                         [[self.link(other), Html(f"{pair['closeness']:.0%}", pair["closeness"]),
                           "; ".join(f["file"] for f in pair["files"]) + (" (exact copy)" if pair["exact"] else ""),
                           Html(f'<a href="#pair-{i}">side by side</a>') if pair.get("views") else ""]
                          for other, i, pair in self.partners.get(sid, [])[:PARTNERS_LISTED]])
        unlisted = len(self.partners.get(sid, [])) - PARTNERS_LISTED
        partners += f"<p>And {unlisted} more in report.json.</p>" if unlisted > 0 else ""
        return (f'<section class=student id="{esc(anchor(sid))}"><p><a href="#overview">&larr; class overview</a></p>'
                f"<h2>{esc(self.who(sid))} <small>(submission {esc(sid)})</small></h2>"
                f"<p>{esc(people) or 'No submitter listed.'}</p><p>Score: {score}</p>"
                f'<p><a class=feedback href="{esc(quote(p["feedback"]))}">feedback</a> (what the student read) · '
                f'<a class=results href="{esc(quote(p["results"]))}">results.json</a></p>'
                f"<div class=cols><div><h3>Components</h3>{components}</div><div><h3>Timing</h3>{timing}</div>"
                f"<div><h3>Similar submissions</h3>{partners}</div></div>"
                f"<h3>Failed cases</h3>{failed}</section>")


def _submitted(p: dict) -> Html:
    """Which components a submission holds: "all 9", or "2 of 9: ngram, backprop"."""
    held = [c for c, v in p["components"].items() if v["state"] == "graded"]
    said = f"all {len(held)}" if len(held) == len(p["components"]) else f"{len(held)} of {len(p['components'])}: {', '.join(held)}"
    return Html(esc(said), len(held))


def _shares(files_: list[dict]) -> str:
    """A pair's flagged files, those of the same shares together: "ngram.py, rnn.py (100%); lstm.py (91% / 95%)"."""
    by: dict[str, list[str]] = {}
    for f in files_:
        a, b = (f"{s:.0%}" for s in f["similarity"])
        by.setdefault(a if a == b else f"{a} / {b}", []).append(f["file"])
    return "; ".join(f"{', '.join(names)} ({shares})" for shares, names in by.items())


def _weakest_first(p: dict) -> tuple:
    """Not graded first, then by share of points."""
    return (-1.0 if p["score"] is None else p["score"] / p["max_score"] if p["max_score"] else 1.0, p["submission"])


def _bare(name: str) -> str:
    """A case's name without its component's tag ("[ngram] counts" -> "counts"), where the component is said."""
    return re.sub(r"^\[[^\]]*\] ", "", name)


def _case_sort(number: str) -> str:
    """A case number as text that sorts in the rubric's order (5.9 before 5.10)."""
    return ".".join(f"{x:04d}" if isinstance(x, int) else x for x in case_key(number))


def _partners(pairs: list[dict]) -> dict[str, list[tuple[str, int, dict]]]:
    found: dict[str, list] = {}
    for i, pair in enumerate(pairs):
        found.setdefault(pair["a"], []).append((pair["b"], i, pair))
        found.setdefault(pair["b"], []).append((pair["a"], i, pair))
    return found


def _ranges(numbers: list[str]) -> str:
    """Case numbers, runs of one component's consecutive cases shortened: "1.2 3.1-3.15 4.2"."""
    runs: list[list[str]] = []
    for n in numbers:
        head, _, tail = n.rpartition(".")
        last = runs[-1][-1] if runs else ""
        if runs and last.rpartition(".")[0] == head and tail.isdigit() and last.rpartition(".")[2].isdigit() \
                and int(tail) == int(last.rpartition(".")[2]) + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return " ".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _marked(code: str, marks: list[list[int]]) -> str:
    """The code escaped, each matching region in <mark>."""
    out, at = [], 0
    for start, end in marks:
        out += [esc(code[at:start]), f"<mark>{esc(code[start:end])}</mark>"]
        at = end
    return "".join(out) + esc(code[at:])


def _known_as(mistake: dict) -> str:
    """The catalogue's names for a mistake, or where it was found when the catalogue has none."""
    if mistake["source"] == "catalogue":
        return f"(feedback says: {mistake['mistake']})"
    found = "; ".join(mistake["known_as"])
    return found or ("(not in the catalogue: found by a mutant of the reference)" if mistake["source"] == "mutant" else "")


def _errors(row: dict) -> str:
    """A submission's files that do not import, and their errors: "ngram: SyntaxError, lstm: ImportError"."""
    return ", ".join(f"{c}: {v['error']}" for c, v in row["components"].items())


def _ran_badly(group: dict) -> str:
    """One component's cases that timed out, crashed or the grader failed on, in a line: "11 lstm cases timed out (an
    infinite loop, or far too slow), the first 4.1 lstm_step in PyTorch's gate order"."""
    n, them = len(group["cases"]), "them" if len(group["cases"]) != 1 else "it"
    cases = f"{n} {group['component']} case{'s' * (n != 1)}"
    first = (", the first " if n > 1 else ": ") + f"{group['first']} {_bare(group['first_case'])}"
    if group["outcome"] == "infra_error":
        return f"{cases}: the grader failed on {them} (not the student's doing; a rerun grades {them} again){first}"
    if group["outcome"] == "timeout":
        return f"{cases} timed out (an infinite loop, or far too slow){first}"
    said = "crashed" if group["outcome"] == "crashed" else outcome_words(group["outcome"])  # its cause says how
    return f"{cases} {said}{first}: {group['cause']}"


def _runs(failed: list[dict]) -> list[list[dict]]:
    """A submission's failed cases in runs of one component's neighbours with one cause, so that a file that does not
    import is one row; a hang too, though each case it stopped says so in words of its own."""
    def key(f: dict) -> tuple:
        return f["component"], f["outcome"] if f["outcome"] == "timeout" else f["cause"]

    runs: list[list[dict]] = []
    for f in failed:
        if runs and key(runs[-1][-1]) == key(f):
            runs[-1].append(f)
        else:
            runs.append([f])
    return runs


def _cases(run: list[dict]) -> str:
    """A run of cases as the feedback says them: "7.4 [transformer] FeedForward", "3.1 to 3.15 (15 cases) [rnn]"."""
    return numbered([{**f, "tags": [f["component"]]} for f in run])
