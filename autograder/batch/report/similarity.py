"""Similarity: pairs of submissions whose files share unusually much beyond the starter code. A reason to look, never a
verdict.

The measure is copydetect's (0.5.0), computed here at the scale of a class. copydetect reads a file as pygments'
tokens, names made one letter (V, F, O), strings S, whitespace and comments dropped (the "filtered code", whose
characters it calls tokens); its fingerprints are the hashes of every SIMILARITY_K-character stretch of that (window
1: every one), less those of the starter file (the boilerplate). compare_files(a, b) reports, for each side, the
share of its tokens covered by fingerprints the other side also has, and the covered regions as slices. Calling it
for every pair costs ~1.4 ms, ~9 minutes for 300 submissions of 8 files; here each file is fingerprinted once, each
component's shares for all pairs come from array operations (a few microseconds a pair), and compare_files itself runs
only for the pairs shown side by side, for their slices. The shares are compare_files' own, to the last digit, including
a quirk of copydetect's: given a boilerplate, it keeps only the last occurrence of a fingerprint repeated within a file
(its intersect1d(assume_unique=True) runs on hashes that are not unique), which this reproduces.

compare_files' slices index the filtered code; it maps them back to the file's text with offsets that are wrong after a
class name (copydetect 0.5.0 stores the name's length there instead of the running offset) and after leading blank
lines (pygments strips them before lexing). Here the filtering is redone with each filtered character's place in the
text kept, so that the marks a view carries are character offsets into the file's text, exact.

Pygments is most of the time spent (~10 ms a file). A file is lexed in pieces, split where a statement begins its line
(there the lexer is at top level: no string or bracket is open), and a piece met before (a docstring, an untouched
function, a whole file) is not lexed again; the filtered code is the same as lexing the file whole.
"""
from __future__ import annotations

import ast
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ...rubric import Rubric
from ...sandbox.host import scratch
from ...submission import open_submission
from ...submission.reading import SubmissionError
from ..inputs import ExportError, read_batch

SIMILARITY_K, SIMILARITY_WINDOW = 25, 1  # copydetect's noise threshold (tokens) and winnowing window: 1, every k-gram,
# which the array computation of the shares assumes (_Print, _covered_tokens)
DEFAULT_THRESHOLD = 0.8  # a file is flagged when each side has at least this share of its tokens in the other's
SIDE_BY_SIDE = 20  # the closest pairs whose flagged files the page shows side by side
VIEW_BUDGET = 1_000_000  # characters of code over all side-by-side views, so the page stays small at 300 submissions


def similarity(rubric: Rubric, summary: dict, out: Path, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """The pairs of the batch's submissions with at least one flagged file: a file both submitted of which each side
    has at least `threshold` of its tokens (beyond the starter's) in the other's, as copydetect's compare_files
    measures it (see the module's docstring).

    Returns {"threshold", "compared": submissions whose files were compared, "pairs", "shown": pairs carrying views,
    "groups": connected groups of linked submissions, the largest first}, and "note" when nothing could be compared.
    A pair: {"a", "b" (a before b in the batch's order), "exact", "closeness", "files", "views" (the first pairs only)}.
    - "files": each flagged file once (a file two components share is compared once), the most similar first:
      {"file", "similarity": [share of a's tokens in b's, share of b's in a's] (compare_files' two numbers),
      "tokens": a's tokens in those regions (compare_files' token_overlap), "identical": the same text}.
    - "exact": every component file both submitted is the same text, line endings aside (flagged or not).
    - "closeness": over the flagged files, the share of both sides' tokens (beyond the starter's) that lie in regions
      matching the other side: sum(tokens of a and b covered) / sum(tokens of a and b). At least `threshold`.
    - pairs are ordered exact copies first, then by closeness, then by id.
    - "views", on the first SIDE_BY_SIDE pairs while VIEW_BUDGET characters of code last (a view that would pass it is
      left out, and every one after it): [{"file", "code": [text of a, text of b], "marks": [a's, b's]}] in the order
      of "files", each side's marks [[start, end], ...] sorted, not overlapping, character offsets (Python string
      indices) into its text: the regions whose tokens match the other side's, beyond the starter.
    """
    result = {"threshold": threshold, "compared": 0, "pairs": [], "shown": 0, "groups": []}
    source = summary.get("source")
    if not source or not Path(source).exists():
        return {**result, "note": "the submissions are not where the batch read them"}
    try:
        entries = read_batch(Path(source), out / "unpacked").entries
    except ExportError as exc:
        return {**result, "note": f"the submissions cannot be read: {exc}"}
    order = {e.id: i for i, e in enumerate(entries)}  # read_batch's order: numeric ids numerically
    files = sorted(rubric.files)  # each file once, though two components may share it
    texts: dict[str, dict[str, str]] = {}  # submission -> component file -> its text
    with scratch.folder("report") as copies:  # students' files: swept if this process is killed outright
        for i, e in enumerate(e for e in entries if not e.problem):  # a damaged submission was not graded: nor is it compared
            try:
                sub = open_submission(e.path, copies / str(i), accept_misnamed=rubric.accept_misnamed, graded=rubric.files)
            except SubmissionError:
                continue
            got = {f: _text((sub.dir / f).read_bytes()) for f in files if (sub.dir / f).is_file()}
            if got:
                texts[e.id] = got
    if not texts:
        return {**result, "note": "no submission could be read"}
    starter = (rubric.solutions_dir or rubric.path.parent).parent / "starter"  # beside solutions/, as the course has it
    lexer = _Filter()
    found: dict[tuple[str, str], list] = {}  # (a, b) -> [its flagged files' rows, tokens covered, tokens]
    boilerplate: dict[str, np.ndarray] = {}  # file -> the starter's fingerprints
    for f in files:
        given = starter / f
        boilerplate[f] = _Print.of(_text(given.read_bytes()) if given.is_file() else "", f, lexer, None).hashes
        sids = sorted((sid for sid in texts if f in texts[sid]), key=order.__getitem__)
        prints = [_Print.of(texts[sid][f], f, lexer, boilerplate[f]) for sid in sids]
        lexer.files.clear()  # the pieces stay: what a view needs is made again from them
        for a, b, row, covered, tokens in _flagged(f, prints, sids, threshold):
            pair = found.get((a, b))
            if pair is None:
                found[a, b] = [[row], covered, tokens]
            else:
                pair[0].append(row)
                pair[1] += covered
                pair[2] += tokens
    pairs = []
    for (a, b), (rows, covered, tokens) in found.items():
        both = [f for f in files if f in texts[a] and f in texts[b]]
        rows.sort(key=lambda r: (-min(r["similarity"]), -max(r["similarity"]), r["file"]))
        pairs.append({"a": a, "b": b, "exact": all(texts[a][f] == texts[b][f] for f in both),
                      "closeness": round(covered / tokens, 4), "files": rows})
    pairs.sort(key=lambda p: (not p["exact"], -p["closeness"], order[p["a"]], order[p["b"]]))
    shown = _add_views(pairs, lambda sid, f: _Print.of(texts[sid][f], f, lexer, boilerplate[f]))
    result.update(compared=len(texts), pairs=pairs, shown=shown, groups=groups(pairs, order))
    return result


def _text(data: bytes) -> str:
    """A file's text as copydetect reads it (UTF-8, universal newlines); open_submission wrote every file as UTF-8."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


# ---- copydetect's filtered code, with each character's place in the text ----------------------------------------

class _Filter:
    """copydetect.utils.filter_code, with the span of the text each filtered character stands for; pieces of text
    already lexed are not lexed again."""

    def __init__(self):
        from pygments import token

        self.token = token
        self.variables = {token.Name, token.Name.Variable, token.Name.Attribute}
        self.lexers: dict[str, object] = {}
        self.pieces: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
        self.files: dict[tuple[str, str], tuple[str, np.ndarray, np.ndarray]] = {}

    def __call__(self, text: str, name: str) -> tuple[str, np.ndarray, np.ndarray]:
        """The filtered code of `text` (a file named `name`), and for each of its characters where in `text` the
        token it is part of starts and ends (a mark that starts or ends inside a keyword takes the whole keyword)."""
        hit = self.files.get((name, text))
        if hit is None:
            lexer = self._lexer(name)
            skip = 1 if text.startswith("\ufeff") else 0  # pygments drops a byte-order mark
            body = text[skip:]
            cuts = _statement_lines(body) + [len(body)]
            parts, starts, ends, at = [], [], [], []
            for begin, end in zip(cuts, cuts[1:]):
                code, s, e = self._piece(lexer, body[begin:end])
                parts.append(code)
                starts.append(s)
                ends.append(e)
                at.append(np.full(len(code), begin + skip, dtype=np.int64))
            flat = lambda arrays: np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
            offset = flat(at)
            hit = self.files[name, text] = ("".join(parts), np.minimum(flat(starts) + offset, len(text)),
                                            np.minimum(flat(ends) + offset, len(text)))
        return hit

    def _lexer(self, name: str):
        if name not in self.lexers:
            from pygments import lexers

            self.lexers[name] = lexers.get_lexer_for_filename(name)  # as copydetect finds it
        return self.lexers[name]

    def _piece(self, lexer, piece: str) -> tuple[str, np.ndarray, np.ndarray]:
        hit = self.pieces.get(piece)
        if hit is not None:
            return hit
        token, variables = self.token, self.variables
        out, starts, ends = [], [], []
        for at, kind, value in lexer.get_tokens_unprocessed(piece if piece.endswith("\n") else piece + "\n"):
            if kind in variables:
                char = "V"
            elif kind in token.Name.Function:
                char = "F"
            elif kind in token.Name.Class:
                char = "O"
            elif kind == token.Comment.Preproc or kind == token.Comment.Hashbang:
                char = "P"
            elif kind in token.Text or kind in token.Comment:
                continue
            elif kind in token.Literal.String:
                char = '"' if value in ("'", '"') else "S"
            else:  # kept as it is, a character for each character, each standing for the whole token
                out.append(value)
                starts.extend([at] * len(value))
                ends.extend([at + len(value)] * len(value))
                continue
            out.append(char)
            starts.append(at)
            ends.append(at + len(value))
        hit = self.pieces[piece] = ("".join(out), np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
        return hit


def _statement_lines(text: str) -> list[int]:
    """Where the lines of `text` begin on which a statement (or its first decorator) is the first thing: no string or
    bracket is open there, so the lexer is at top level. [0] when `text` is not Python that parses."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to report
            tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return [0]
    lines = text.split("\n")  # as Python numbers them, the text's line endings made \n
    begins = np.concatenate([[0], np.cumsum([len(line) + 1 for line in lines])]).tolist()
    found, todo = {0}, [tree.body]
    while todo:
        for node in todo.pop():
            todo += [inner for name in ("body", "orelse", "finalbody") if isinstance(inner := getattr(node, name, None), list)]
            todo += [part.body for part in getattr(node, "handlers", ()) or getattr(node, "cases", ())]
            if isinstance(node, ast.Import):
                continue  # pygments reads `raise x from y`, a newline, `import z` as one statement: no cut before an import
            decorators = getattr(node, "decorator_list", None)
            line, col = (decorators[0].lineno, decorators[0].col_offset - 1) if decorators else (node.lineno, node.col_offset)
            before = lines[line - 1][:col]  # col counts UTF-8 bytes: whitespace in ASCII is as many characters
            if not before or (before.isascii() and before.isspace()):
                found.add(begins[line - 1])
    return sorted(found)


# ---- fingerprints and shares ---------------------------------------------------------------------------------------

@dataclass
class _Print:
    """A file's fingerprints as copydetect's CodeFingerprint has them, with the filtered code's map to the text."""

    text: str
    filtered: str
    starts: np.ndarray  # where in `text` the token of each filtered character starts (a keyword's characters: all its start)
    ends: np.ndarray  # ... and ends
    positions: np.ndarray  # the k-grams counted: their places in the filtered code
    position_hashes: np.ndarray  # ... and their hashes
    hashes: np.ndarray  # the distinct hashes counted, sorted
    coverage: int  # tokens covered by the k-grams counted (copydetect's token_coverage)

    @classmethod
    def of(cls, text: str, name: str, lexer: _Filter, boilerplate: np.ndarray | None) -> _Print:
        filtered, starts, ends = lexer(text, name)
        k = SIMILARITY_K
        every = np.fromiter((hash(filtered[i:i + k]) for i in range(len(filtered) - k + 1)), dtype=np.int64,
                            count=max(0, len(filtered) - k + 1))  # copydetect.utils.hashed_kgrams
        positions = np.arange(len(every))
        if boilerplate is not None and len(boilerplate):
            own = ~np.isin(every, boilerplate)
            positions, every = positions[own], every[own]
            # copydetect's quirk: of a hash repeated in the file, only its last occurrence stays
            _, last = np.unique(every[::-1], return_index=True)
            keep = np.sort(len(every) - 1 - last)
            positions, every = positions[keep], every[keep]
        covered = np.zeros(len(filtered), dtype=bool)
        for offset in range(k):
            covered[positions + offset] = True
        return cls(text, filtered, starts, ends, positions, every, np.unique(every), int(covered.sum()))

    def fingerprint(self) -> SimpleNamespace:
        """What compare_files reads of a CodeFingerprint; no offsets, so that its slices index the filtered code."""
        index: dict[int, list[int]] = defaultdict(list)
        for h, at in zip(self.position_hashes.tolist(), self.positions.tolist()):
            index[h].append(at)
        return SimpleNamespace(k=SIMILARITY_K, hashes=set(index), hash_idx=dict(index), filtered_code=self.filtered,
                               token_coverage=self.coverage, offsets=np.array([]))


def _covered_tokens(prints: list[_Print]) -> np.ndarray:
    """covered[i, j]: the tokens of file i covered by k-grams whose hashes file j has too (compare_files'
    token_overlap, both ways: its shares are covered[i, j] / coverage[i] and covered[j, i] / coverage[j]).

    The files' filtered code lies end to end in one array of hash ids, a k-gram at its first token (the last k - 1
    tokens of a file start none, so no window reaches into the next file); for each file j, a table of its hashes
    marks every k-gram of every file that j has too, and a running sum counts, for each token, the marked k-grams
    covering it. A hash only one file has cannot match: its id is 0, which no table marks."""
    k = SIMILARITY_K
    n = len(prints)
    everything, inverse, counts = np.unique(np.concatenate([p.hashes for p in prints]), return_inverse=True, return_counts=True)
    ids = np.where(counts[inverse] > 1, inverse + 1, 0).astype(np.int32)
    lengths = np.array([len(p.filtered) for p in prints])
    starts = np.concatenate([[0], np.cumsum(lengths)])
    tokens = np.zeros(starts[-1], dtype=np.int32)
    own, at = [], 0
    for p, start in zip(prints, starts):
        mine = ids[at:at + len(p.hashes)]
        at += len(p.hashes)
        tokens[start + p.positions] = mine[np.searchsorted(p.hashes, p.position_hashes)]
        own.append(mine[mine > 0])
    covered = np.zeros((n, n), dtype=np.int64)
    table = np.zeros(len(everything) + 1, dtype=bool)
    for j in range(n):
        if not len(own[j]):
            continue
        table[own[j]] = True
        running = np.cumsum(table[tokens], dtype=np.int32)
        running[k:] -= running[:-k].copy()
        covered[:, j] = np.add.reduceat(running > 0, starts[:-1], dtype=np.int64)
        table[own[j]] = False
    return covered


def _flagged(file: str, prints: list[_Print], sids: list[str], threshold: float):
    """For each pair of `sids` (in the batch's order) whose `file` is flagged: a, b, the row of `file` in the pair's
    "files", the tokens of both sides covered, and the tokens of both sides."""
    counted = [i for i, p in enumerate(prints) if p.coverage > 0]  # a file all starter (or shorter than k) matches nothing
    if len(counted) < 2:
        return
    covered = _covered_tokens([prints[i] for i in counted])
    coverage = np.array([prints[i].coverage for i in counted])
    share = covered / coverage[:, None]
    xs, ys = np.nonzero(np.triu((share >= threshold) & (share.T >= threshold) & (covered > 0), 1))
    texts = [prints[i].text for i in counted]
    names = [sids[i] for i in counted]
    for x, y, sa, sb, tokens, both, pooled in zip(xs.tolist(), ys.tolist(), share[xs, ys].tolist(), share[ys, xs].tolist(),
                                                  covered[xs, ys].tolist(), (covered[xs, ys] + covered[ys, xs]).tolist(),
                                                  (coverage[xs] + coverage[ys]).tolist()):
        yield (names[x], names[y], {"file": file, "similarity": [round(sa, 3), round(sb, 3)], "tokens": tokens,
                                    "identical": texts[x] == texts[y]}, both, pooled)


# ---- what the page shows side by side ------------------------------------------------------------------------------

def _add_views(pairs: list[dict], fingerprints) -> int:
    """Views on the first SIDE_BY_SIDE pairs while VIEW_BUDGET lasts; how many pairs got some. `fingerprints(sid, file)`:
    that file's _Print."""
    from copydetect import compare_files  # only here: it is slow to import

    budget, shown = VIEW_BUDGET, 0
    for p in pairs[:SIDE_BY_SIDE]:
        views = []
        for row in p["files"]:
            a, b = fingerprints(p["a"], row["file"]), fingerprints(p["b"], row["file"])
            size = len(a.text) + len(b.text)
            if size > budget:
                break
            budget -= size
            _, _, slices = compare_files(a.fingerprint(), b.fingerprint())
            views.append({"file": row["file"], "code": [a.text, b.text], "marks": [_marks(a, slices[0]), _marks(b, slices[1])]})
        if views:
            p["views"] = views
            shown += 1
        if len(views) < len(p["files"]):
            break
    return shown


def _marks(p: _Print, slices: np.ndarray) -> list[list[int]]:
    """compare_files' slices of the filtered code ([starts], [ends]) as [start, end] character offsets into the text,
    widened to whole tokens (a k-gram may start inside a keyword), sorted, those that touch or overlap merged."""
    marks: list[list[int]] = []
    if len(slices) == 0 or len(slices[0]) == 0:
        return marks
    for first, last in zip(np.asarray(slices[0], dtype=np.int64), np.asarray(slices[1], dtype=np.int64) - 1):
        start, end = int(p.starts[first]), int(p.ends[last])
        if marks and start <= marks[-1][1]:
            marks[-1][1] = max(marks[-1][1], end)
        else:
            marks.append([start, end])
    return marks


def groups(pairs: list[dict], order: dict[str, int] | None = None) -> list[list[str]]:
    """Connected groups of submissions, two being linked when any of their files is flagged as similar; each in the
    batch's order (`order`: id -> place), the largest first."""
    place = order.__getitem__ if order else (lambda sid: sid)
    linked: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        linked[p["a"]].add(p["b"])
        linked[p["b"]].add(p["a"])
    seen, found = set(), []
    for start in sorted(linked, key=place):
        if start in seen:
            continue
        group, todo = set(), [start]
        while todo:
            sid = todo.pop()
            if sid not in group:
                group.add(sid)
                todo += linked[sid] - group
        seen |= group
        found.append(sorted(group, key=place))
    return sorted(found, key=lambda g: (-len(g), place(g[0])))
