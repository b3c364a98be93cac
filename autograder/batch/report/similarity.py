"""Similarity: pairs of submissions whose files share unusually much beyond the starter code (copydetect's winnowed
fingerprints, the starter file as boilerplate). A reason to look, never a verdict."""
from __future__ import annotations

import itertools
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from ...rubric import Rubric
from ...submission import SubmissionError, open_submission
from ..inputs import read_batch

SIMILARITY_K, SIMILARITY_WINDOW = 25, 1  # copydetect's noise threshold (tokens) and winnowing window
DEFAULT_THRESHOLD = 0.8  # the share of a file's tokens found in the other's, above which a pair is flagged
SIDE_BY_SIDE = 50  # flagged pairs whose code the page shows side by side


def similarity(rubric: Rubric, summary: dict, out: Path, threshold: float) -> dict:
    """Pairs whose component files share more than `threshold` of their tokens beyond the starter's (copydetect's
    winnowed fingerprints, the starter file as boilerplate)."""
    from copydetect import CodeFingerprint, compare_files  # only here: it is slow to import

    source = summary.get("source")
    if not source or not Path(source).exists():
        return {"threshold": threshold, "pairs": [], "groups": [], "note": "the submissions are not where the batch read them"}
    starter = (rubric.solutions_dir or rubric.path.parent).parent / "starter"  # beside solutions/, as the course has it
    entries, _ = read_batch(Path(source), out / "unpacked")
    pairs = []
    with tempfile.TemporaryDirectory(prefix="autograder-report-") as scratch:
        code = {}
        for e in entries:
            try:
                code[e.id] = open_submission(e.path, Path(scratch) / e.id).dir
            except SubmissionError:
                continue
        for c in rubric.components:
            given = CodeFingerprint(str(starter / c.file), SIMILARITY_K, SIMILARITY_WINDOW).hashes if (starter / c.file).is_file() else ()
            boilerplate = np.array(sorted(given), dtype=np.int64)
            prints = {sid: CodeFingerprint(str(d / c.file), SIMILARITY_K, SIMILARITY_WINDOW, boilerplate)
                      for sid, d in code.items() if (d / c.file).is_file()}
            for (a, fa), (b, fb) in itertools.combinations(sorted(prints.items()), 2):
                overlap, (sa, sb), _ = compare_files(fa, fb)
                if min(sa, sb) >= threshold:
                    pairs.append({"file": c.file, "a": a, "b": b, "similarity": [round(float(sa), 3), round(float(sb), 3)],
                                  "tokens": int(overlap), "code": [fa.raw_code, fb.raw_code]})
    pairs.sort(key=lambda p: (-min(p["similarity"]), p["a"], p["b"], p["file"]))
    for p in pairs[SIDE_BY_SIDE:]:
        del p["code"]  # the page shows the most similar pairs side by side; the rest are listed
    return {"threshold": threshold, "pairs": pairs, "groups": groups(pairs)}



def groups(pairs: list[dict]) -> list[list[str]]:
    """Connected groups of submissions, two being linked when any of their files is flagged as similar."""
    linked: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        linked[p["a"]].add(p["b"])
        linked[p["b"]].add(p["a"])
    seen, groups = set(), []
    for start in sorted(linked):
        if start in seen:
            continue
        group, todo = set(), [start]
        while todo:
            sid = todo.pop()
            if sid not in group:
                group.add(sid)
                todo += linked[sid] - group
        seen |= group
        groups.append(sorted(group))
    return sorted(groups, key=lambda g: (-len(g), g))
