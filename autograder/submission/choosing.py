"""Which of the files that may stand for one component file is graded, and why each other one is not.

The precedence: one that can be read; work over an untouched starter (every function only raises
NotImplementedError); a .py over a notebook; the most recently modified (zip timestamps or file times; closer than
SAME_TIME is a tie); of tied ones the one whose folder's name says final, latest or submit over one saying old, backup
or copy; the one nearer the top; the first in the submission. So of two copies in sibling folders (hw1_old/,
hw1_final/) the newer is graded, and every case of its component says which file was graded, which worked-on or
unreadable ones were not, and why (Submission.caveats).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import PurePosixPath

SAME_TIME = timedelta(seconds=2)  # a zip's clock ticks every two seconds: copies modified closer than this tie
# Words in a folder's name that say which copy of the work is meant: hw1_final/ over hw1_old/, hw1/ over "hw1 - Copy/".
_FINAL_WORDS = frozenset({"final", "latest", "newest", "submit", "submitted", "submission", "done", "complete", "completed",
                          "finished"})
_OLD_WORDS = frozenset({"old", "older", "oldest", "backup", "backups", "bak", "copy", "orig", "original", "previous", "prev",
                        "draft", "drafts", "archive", "archived", "scratch", "tmp", "temp", "unused", "outdated"})


@dataclass
class Copy:
    """A file that may stand for a component file, read as the code that would be graded."""

    rel: str  # as the submission spells it
    nfc: str  # `rel` in NFC, as names are matched
    code: bytes
    starter: bool  # the untouched starter
    notebook: bool
    modified: datetime | None
    converted: str = ""  # how the file was made UTF-8, if it was not


class Choice:
    """Of `found` (path -> a file that may stand for one component file, or why it cannot; in the submission's order),
    the one graded (`chosen`: None when none can be), what the account says of each other one (`said`: path -> action,
    why), and what the component's cases say: why nothing is graded (`problem`), or which worked-on or unreadable files
    were left out, and why (`caveat`; "" for none)."""

    def __init__(self, found: dict[str, Copy | str]):
        copies = [f for f in found.values() if isinstance(f, Copy)]
        unusable = [why for why in found.values() if isinstance(why, str)]
        self.chosen, self._tied = _first(copies)
        self.said = {rel: ("skipped", why) for rel, why in found.items() if isinstance(why, str)}
        left_out = []
        for other in copies:
            if other is not self.chosen:
                why, reason = self._passed_over(other)
                self.said[other.rel] = ("ignored", why)
                left_out += [f", not {other.rel}: {reason}"] * bool(reason)
        self.problem = "" if self.chosen else "Not graded: " + " ".join(f"{why}." for why in unusable)
        told = left_out + [f"; {why}" for why in unusable]
        self.caveat = f"Graded {self.chosen.rel}{''.join(told)}." if self.chosen and told else ""

    def _passed_over(self, other: Copy) -> tuple[str, str]:
        """Why `other` is not graded, `chosen` is: in the account, and in the cases ("" for an untouched starter)."""
        chosen = self.chosen
        if other.starter and not chosen.starter:
            return f"the untouched starter (its functions only raise NotImplementedError); {chosen.rel} is graded instead", ""
        if other.starter:
            return f"{chosen.rel} is graded instead (both are the untouched starter)", ""
        reason = self._why_not(other)
        return f"{chosen.rel} is graded instead: {reason}", reason

    def _why_not(self, other: Copy) -> str:
        """Why worked-on `other` is not graded, `chosen` is (the first rule of the precedence that tells them apart)."""
        chosen = self.chosen
        if other.notebook and not chosen.notebook:
            return "both are worked on, and a .py wins over a notebook"
        if not any(other is f for f in self._tied):
            return (f"both are worked on, and the newer one is graded ({chosen.rel} was modified {_at(chosen.modified)}, "
                    f"{other.rel} {_at(other.modified)})")
        same = "both are worked on and were modified at the same time" + (f" ({_at(chosen.modified)})" if chosen.modified else "")
        mine, theirs = _folder_words(chosen.nfc), _folder_words(other.nfc)
        if _folder_says(chosen.nfc) > _folder_says(other.nfc):
            final = next((w for w in mine if w in _FINAL_WORDS and w not in theirs), None)
            old = next((w for w in theirs if w in _OLD_WORDS and w not in mine), None)
            here, there = (f"{PurePosixPath(f.rel).parent.as_posix()}/" for f in (chosen, other))
            said = [f"{here} says {final}"] * bool(final) + [f"{there} says {old}"] * bool(old)
            return f"{same}, and {said[0]} in its name" + "".join(f", {s}" for s in said[1:])
        if chosen.nfc.count("/") < other.nfc.count("/"):
            return f"{same}, and {chosen.rel} is nearer the top"
        return (f"{same}, and neither folder's name says which is final (final, latest or submit; old, backup or copy), so the "
                "first in the submission is graded: submit one copy only")


def _first(copies: list[Copy]) -> tuple[Copy | None, list[Copy]]:
    """The copy to grade of `copies` (in the submission's order), and those it tied with on time."""
    if not copies:
        return None, []
    best = max((not f.starter, not f.notebook) for f in copies)  # work over a starter, then a .py over a notebook
    pool = [f for f in copies if (not f.starter, not f.notebook) == best]
    newest = max((f.modified for f in pool if f.modified), default=None)
    tied = [f for f in pool if newest is None or (f.modified is not None and f.modified >= newest - SAME_TIME)]
    # max: the first of the equals, in the submission's order
    return max(tied, key=lambda f: (_folder_says(f.nfc), -f.nfc.count("/"))), tied


def _folder_words(rel: str) -> list[str]:
    """The words of the folder names on the path of `rel`, in lower case: hw1_final/Copy of HW1/ -> hw, final, copy, of, hw."""
    return [w.lower() for part in PurePosixPath(rel).parts[:-1] for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", part)]


def _folder_says(rel: str) -> int:
    """1 where the folders of `rel` are named as the final copy of the work (final, latest, submit...), -1 as an old one
    (old, backup, copy...), 0 for neither or both."""
    words = set(_folder_words(rel))
    return bool(words & _FINAL_WORDS) - bool(words & _OLD_WORDS)


def _at(when: datetime | None) -> str:
    return f"{when:%Y-%m-%d %H:%M:%S}" if when else "at a time the grader cannot read"
