"""Finding a submission's files: a folder, a .zip of one, or a single .py or .ipynb file.

The files are copied (never imported) into a private folder. Component files are looked for in the shallowest
folders holding any: the top level, else the folders one down (how students zip a folder, and how Gradescope stores
uploads), else further down (a zip of the course folder, CS4xx/hw1/ngram.py, or of a folder unzipped into its
namesake, hw1/hw1/ngram.py: the graded file's entry says how far down). A Jupyter notebook named after a component
file (ngram.ipynb), in any folder, stands for that file: its code cells become the module (ngram.py).

Of the files that could be one component file, each component's is chosen on its own, by this precedence: one that
can be read; work over an untouched starter (every function only raises NotImplementedError); a .py over a notebook;
the most recently modified (zip timestamps or file times; closer than SAME_TIME is a tie); of tied ones the one whose
folder's name says final, latest or submit over one saying old, backup or copy; the one nearer the top; the first in
the submission. So of two copies in sibling folders (hw1_old/, hw1_final/) the newer is graded, and every case of its
component says which file was graded, which worked-on or unreadable ones were not, and why (Submission.caveats).
Every file found gets an entry in the submission's account: graded, copied, ignored, skipped or misnamed, and why. A
file named close to a component file (NGram.py, attention (1).py, lstm_solution.py, backprop.py.txt, Colab's and
Drive's Copy of ngram.ipynb, Explorer's ngram - Copy.py, Finder's ngram copy.py, a name with a Cyrillic а for the
Latin a) is reported with the rename to make, naming any character that only looks Latin, and graded only when the
rubric accepts misnamed files. An assignment of some parts grades their component files only: another part's file is
ignored, and says so.

Every other .py file in a folder that a component file is graded from is copied, for them to import. The grader's
folder is flat: where two such folders hold a file of one name, the one in the folder more component files are graded
from is copied (the first such folder on a tie), and a folder whose copies all lost gives nothing (where every
component is graded from a notebook elsewhere, the folders looked in give them). But a file named like a module that
`import` finds first (one of Python's standard library, an installed package, or the grader's own worker modules):
such a file could never be imported under its name, so it is ignored and the account says to rename it (the worker's
folder is not on sys.path, so no file stands in for such a module: sandbox/worker/audit.py). A copied file that the
tamper scan refuses says so too: nothing can import it (forbidden.importable).

Names are matched, and written into the grader's folder, in Unicode's NFC, as `import` spells a module (macOS may save
utilsé.py decomposed, NFD, which `import utilsé` does not find on Linux); the account shows each name as the
submission spells it.

A submission is read only inside itself. A link in it (a symbolic link in a
folder, a zip entry with link mode bits) is followed one step, to a file of the
submission, taken within it; any other link (absolute, climbing out, to a
folder, to another link, to nothing) is skipped and accounted for, and nothing
it names is opened. A submission that is itself a link is refused. Below the
submission's top every name is opened with O_NOFOLLOW, so that a file or folder
swapped for a link after it was listed is not followed either.
"""
from __future__ import annotations

import ast
import codecs
import errno
import json
import os
import re
import stat
import sys
import tokenize
import unicodedata
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import BinaryIO, NamedTuple

from .cases import FILES
from .forbidden import scan_tampering
from .sandbox.host.process import WORKER_FILES
from .sandbox.worker.audit import installed_paths, library_module

API_FILES = frozenset(FILES.values())
FILE_ORDER = tuple(sorted(API_FILES))  # for messages


def notebook_name(file: str) -> str:
    """The notebook that may stand for component file `file`: ngram.py -> ngram.ipynb."""
    return file.removesuffix(".py") + ".ipynb"


NOTEBOOKS = frozenset(notebook_name(f) for f in API_FILES)
MAX_FILE_BYTES = 1 << 20
MAX_NOTEBOOK_BYTES = 64 << 20  # read limit: outputs and images make notebooks far larger than their code, which MAX_FILE_BYTES limits
MAX_ZIP_BYTES = 64 << 20
PATH_MAX = 4096  # Linux's: no link's target is longer
CHECK_TAG = "autograder-check"  # the cells a release adds to a notebook (Colab's set-up, the check): never part of the module
# A line IPython runs as a magic or a shell command: `%time f()`, `!pip install x`, `files = !ls`.
# None of these is valid Python at the start of a statement, so blanking them never changes valid code.
# PEP 263's encoding declaration, on the first or second line.
_CODING = re.compile(rb"[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")
_NOT_TEXT = re.compile("[\0\ud800-\udfff]")  # what Python cannot compile, or a string cannot hold as UTF-8
_MAGIC = re.compile(r"\s*([%!]|[\w.]+(\s*,\s*[\w.]+)*\s*=\s*[%!])")
# A name that may be code: a .py or .ipynb extension in any case, perhaps with another one after it (backprop.py.txt).
_CODE = re.compile(r"(?P<stem>.+?)\.(?P<ext>py|ipynb)(?P<extra>\.[^.]+)*", re.IGNORECASE)
# What downloads and students add to a name: copy numbers (`attention (1)`, `attention-1`) and words (`lstm_solution`).
_ADDED = (r"(?:\s*\(\d+\)|[\s_-]+(?:\d+|v\d+|copy|final|solution|solutions|solved|done|complete|completed|finished"
          r"|submission|submit|mine|new|old|working|answer|answers|filled))")
_COPY_OF = r"(?:copy of\s+)*"  # what Colab's "Save a copy in Drive" and Drive's "Make a copy" put before a name
# Letters that look Latin but are not (from Unicode's confusables.txt: Cyrillic, Greek, Latin and Armenian look-alikes of
# the letters file names are spelled with), read as the Latin letter when a name is matched; NFKC reads fullwidth and
# other compatibility forms, and format characters (a zero-width space) are left out.
_LOOKALIKES = dict(zip("аеорсухіјѕԁһԛԝӏ" "АВЕКМНОРСТХУЅІЈԚԜӀ" "αονριυγ" "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ" "ıɑɡȷ" "օսհոզ",
                       "aeopcyxijsdhqwl" "ABEKMHOPCTXYSIJQWl" "aovpiuy" "ABEZHIKMNOPTYX" "iagj" "ouhnq", strict=True))
SAME_TIME = timedelta(seconds=2)  # a zip's clock ticks every two seconds: copies modified closer than this tie
# Words in a folder's name that say which copy of the work is meant: hw1_final/ over hw1_old/, hw1/ over "hw1 - Copy/".
_FINAL_WORDS = frozenset({"final", "latest", "newest", "submit", "submitted", "submission", "done", "complete", "completed",
                          "finished"})
_OLD_WORDS = frozenset({"old", "older", "oldest", "backup", "backups", "bak", "copy", "orig", "original", "previous", "prev",
                        "draft", "drafts", "archive", "archived", "scratch", "tmp", "temp", "unused", "outdated"})


def _joined(names: list[str], word: str) -> str:
    """`names` in a sentence: a; a and b; a, b and c (`word`: "and" or "or")."""
    return f"{', '.join(names[:-1])} {word} {names[-1]}" if len(names) > 1 else names[0]


def expected_names(graded: Collection[str]) -> str:
    """The names that are graded, for messages: "backprop.py or ngram.py, or a notebook named like one (ngram.ipynb)"."""
    order = sorted(graded)
    example = "ngram.py" if "ngram.py" in order else order[0]  # the course's first file, where it is graded
    return f"{_joined(order, 'or')}, or a notebook named like {'one' if len(order) > 1 else 'it'} ({notebook_name(example)})"


def printable(text: str, keep: str = "") -> str:
    """`text` with each character a terminal would act on or hide (control characters, escape sequences, bidi
    overrides, zero-width spaces), but those in `keep`, written as its escape: file names are the students'."""
    return "".join(c if c.isprintable() or c in keep else c.encode("unicode_escape").decode() for c in text)


class SubmissionError(Exception):
    """The submission cannot be read at all, or holds nothing to grade; the message says why."""


class NotebookError(Exception):
    """A notebook cannot stand for its component file; the message names it and says why."""


@dataclass(frozen=True)
class FileEntry:
    """What the grader did with one file of the submission (or with every file of one folder)."""

    path: str  # as in the submission; a folder ends in "/"
    action: str  # graded, copied, ignored, skipped or misnamed
    why: str = ""
    files: int = 1  # how many files a folder's entry stands for

    def __str__(self) -> str:
        counted = f" ({self.files} file{'s' * (self.files != 1)})" if self.path.endswith("/") else ""
        return f"{printable(self.path)}{counted}: {self.action}" + (f": {printable(self.why)}" if self.why else "")


@dataclass(frozen=True)
class Submission:
    dir: Path  # flat folder of the submission's .py files
    files: frozenset[str]  # the student-API files present
    account: tuple[FileEntry, ...] = ()  # every file found, and what was done with it
    problems: dict[str, str] = field(default_factory=dict)  # API file -> why it is not graded, for each of its cases
    # API file -> which file was graded as it, and the student's work left out of it (a copy that lost, a notebook beside a .py,
    # a file that could not be read) and why: said under each of its cases (runner._judged)
    caveats: dict[str, str] = field(default_factory=dict)


def expected_name(name: str) -> str | None:
    """The component file or notebook that file `name` is named as, exactly or closely (NGram.py, rnn.PY,
    backprop.py.txt, attention (1).py, lstm_solution.py -> lstm.py, Copy of ngram.ipynb -> ngram.ipynb, ngrаm.py with a
    Cyrillic а -> ngram.py); None when it is named like none."""
    match = _CODE.fullmatch(_as_latin(name))
    if not match:
        return None
    base = re.fullmatch(rf"{_COPY_OF}(.+?){_ADDED}*", match["stem"], re.IGNORECASE)[1]
    want = f"{base.lower()}.{match['ext'].lower()}"
    return want if want in API_FILES | NOTEBOOKS else None


def _as_latin(text: str) -> str:
    """`text` as the Latin letters it looks like: compatibility forms as NFKC reads them (a fullwidth ｎ), look-alikes from
    other scripts (a Cyrillic а), and format characters (a zero-width space) left out."""
    return "".join(_LOOKALIKES.get(c, c) for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")


def _unlike(name: str) -> str:
    """What in file name `name` only looks like the Latin it is read as ("its 4th character, а, is Cyrillic Small Letter A
    (U+0430), not the Latin a"): two names that look identical are told apart; "" when nothing in it does."""
    said = []
    for i, c in enumerate(unicodedata.normalize("NFC", name), 1):
        latin = _as_latin(c)
        if c.isascii() or latin == c:
            continue
        what = f"{unicodedata.name(c, 'a character with no name').title()} (U+{ord(c):04X})"
        said.append(f"its {_ordinal(i)} character, {c}, is {what}, not {'the Latin ' * latin.isalpha()}{latin}" if latin
                    else f"its {_ordinal(i)} character is an invisible {what}")
    return "; ".join(said)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def untouched_starter(code: bytes | str) -> bool:
    """Whether `code` is starter code nobody worked on: it defines functions, and each only raises
    NotImplementedError (after its docstring, and in __init__ a super().__init__() call)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # broken code was worked on
        return False
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return bool(functions) and all(_stub(f) for f in functions)


def _stub(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = function.body[1:] if ast.get_docstring(function, clean=False) is not None else function.body
    if not body or not isinstance(body[-1], ast.Raise) or body[-1].exc is None:
        return False
    raised = body[-1].exc.func if isinstance(body[-1].exc, ast.Call) else body[-1].exc
    return (isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
            and all(isinstance(s, ast.Expr) and ast.unparse(s.value).startswith("super().__init__(") for s in body[:-1]))


def open_submission(path: Path, workdir: Path, *, accept_misnamed: bool = False, graded: Collection[str] = API_FILES) -> Submission:
    """Copy the submission's Python files from `path` into `workdir`, and the code of its notebooks. `graded`: the
    component files this assignment grades (an assignment of some parts grades theirs only); a file of another
    component is accounted as ignored. SubmissionError when `path` cannot be read or holds no file that can be graded."""
    if path.is_symlink():  # in a batch the TA named the class, not this entry: a submission is read where it is
        raise SubmissionError(f"{path.name} is a link, which the grader does not follow to a submission: "
                              "give the path of the folder or file itself")
    if not path.exists():
        raise SubmissionError(f"{path} does not exist")
    workdir.mkdir(parents=True, exist_ok=True)
    single = not path.is_dir() and path.suffix.lower() != ".zip"
    if path.is_dir():
        sources = _linked(walk(path), lambda rel: read_within(path, rel), lambda rel: _modified_within(path, rel))
    elif not single:
        sources = _zip_sources(path)
    elif _CODE.fullmatch(path.name):
        sources = {path.name: _Source(path.read_bytes, lambda: None)}  # one file: no copy to tell it from
    else:
        raise SubmissionError(f"{path.name}: expected a folder, a .zip or a .py file or .ipynb notebook")
    submission = _Sorting(sources, workdir, accept_misnamed, frozenset(graded)).submission()
    if not submission.files:
        if single and not expected_name(path.name):
            raise SubmissionError(f"a single file must be one of {expected_names(graded)}; got {path.name}")
        found = [str(e) for e in submission.account]
        shown = found[:20] + [f"... and {len(found) - 20} more"] * (len(found) > 20)
        # a folder's name is the grader's or an export's (submission_123), not the student's: not said
        head = f"{path.name} cannot be graded" if single else f"nothing in {'the submission' if path.is_dir() else path.name} can be graded"
        where = "" if single else ", at the top level or in one folder"
        raise SubmissionError(f"{head}: expected {expected_names(graded)}{where}. "
                              + ("It is empty." if not found else "Found:" + "".join(f"\n  {line}" for line in shown)))
    return submission


class _Unusable(Exception):
    """A file that would stand for a component file cannot; the message says why, naming it."""


class _Source(NamedTuple):
    """A file of the submission: its bytes, and when it was last modified (None when that cannot be told)."""

    read: Callable[[], bytes]
    modified: Callable[[], datetime | None]


@dataclass
class _Loaded:
    rel: str
    code: bytes
    starter: bool
    notebook: bool
    modified: datetime | None
    converted: str = ""  # how the file was made UTF-8, if it was not


class _Sorting:
    """Decides what happens to each file of `sources` (path in the submission -> the file, or why a link there is not
    followed) and writes the files graded into `workdir`. Paths are matched in NFC (`nfc`), and said as the submission
    spells them."""

    def __init__(self, sources: dict[str, _Source | str], workdir: Path, accept_misnamed: bool, graded: frozenset[str]):
        self.sources, self.workdir, self.accept_misnamed, self.graded = sources, workdir, accept_misnamed, graded
        self.entries = {rel: FileEntry(rel, "skipped", why) for rel, why in sources.items() if isinstance(why, str)}
        self.problems: dict[str, str] = {}
        self.caveats: dict[str, str] = {}
        self.nfc = {rel: unicodedata.normalize("NFC", rel) for rel in sources}
        self.seen = [rel for rel in sources if not _aside(rel)]
        self.looked = _component_folders([self.nfc[rel] for rel in self.seen])
        self.spelled: dict[str, str] = {}  # folder in NFC -> as the submission spells it
        for rel in self.seen:
            self.spelled.setdefault(self._folder(rel), PurePosixPath(rel).parent.as_posix())
        self.kept: list[str] = []  # the folders whose other .py files are copied, once the component files are chosen
        self.written: dict[str, str] = {}  # name in `workdir` -> the file copied under it

    def submission(self) -> Submission:
        exact: dict[str, list[str]] = {f: [] for f in API_FILES}  # component file -> the files that may stand for it
        close: dict[str, list[str]] = {f: [] for f in API_FILES}
        for rel in self.seen:
            name = PurePosixPath(self.nfc[rel]).name
            want = expected_name(name)
            if want and (self._folder(rel) in self.looked or want in NOTEBOOKS):
                (exact if name == want else close)[PurePosixPath(want).stem + ".py"].append(rel)
        only = _joined(sorted(self.graded), "and")
        chosen = []
        for module in FILE_ORDER:
            if module in self.graded:
                chosen += filter(None, [self._choose(module, exact[module], close[module])])
            else:  # another assignment's file: not graded, not copied, and no reason to rename it
                for rel in exact[module] + close[module]:
                    self.entries[rel] = FileEntry(rel, "ignored", f"{module} is not graded in this assignment, only {only}")
        graded_from = Counter(self._folder(rel) for rel in chosen if self._folder(rel) in self.looked)
        self.kept = sorted(graded_from, key=lambda f: (-graded_from[f], self.looked.index(f))) or list(self.looked)
        for folder in self.kept:
            for rel in self.seen:
                if rel not in self.entries and self._folder(rel) == folder and rel.endswith(".py"):
                    self._copy(rel)
        files = frozenset(p.name for p in self.workdir.iterdir() if p.name in API_FILES)
        return Submission(self.workdir, files, self._account(), self.problems, self.caveats)

    def _folder(self, rel: str) -> str:
        """The folder of `rel`, in NFC ("." for the top level)."""
        return PurePosixPath(self.nfc[rel]).parent.as_posix()

    def _choose(self, module: str, exact: list[str], close: list[str]) -> str | None:
        """Grade the file that stands for `module` of those that may (the precedence: module docstring); its path."""
        if not (exact or close):
            return None
        if not exact and not self.accept_misnamed:
            for rel in close:
                self.entries[rel] = FileEntry(rel, "misnamed", f"probably meant as {module}; {_rename(rel)} to have it graded")
            names = " and ".join(PurePosixPath(rel).name for rel in close)
            self.problems[module] = (f"Not graded: {module} is not in the submission, but {names} {'looks' if len(close) == 1 else 'look'} "
                                     f"like it: {'; '.join(map(_rename, close))}, and submit again (files are graded only under "
                                     "their expected names).")
            return None
        loaded, skipped = [], []
        for rel in exact or close:
            try:
                loaded.append(self._load(rel))
            except _Unusable as exc:
                self.entries[rel] = FileEntry(rel, "skipped", str(exc))
                skipped.append(str(exc))
        chosen, tied = self._first(loaded)
        # beside an exact name, what is named closely is left as it is: a .py is copied (it may be imported), the rest ignored
        for rel in close if exact else ():
            if not (self._folder(rel) in self.looked and rel.endswith(".py")):
                graded = chosen.rel if chosen else exact[0]
                self.entries[rel] = FileEntry(rel, "ignored", f"named like {module}, which is graded from {graded}")
        if not chosen:
            self.problems[module] = "Not graded: " + " ".join(f"{why}." for why in skipped)
            return None
        (self.workdir / module).write_bytes(chosen.code)
        how = []
        depth = self.nfc[chosen.rel].count("/")
        if depth >= 2 and self._folder(chosen.rel) in self.looked:
            how.append(f"found {depth} folders down, in {PurePosixPath(chosen.rel).parent.as_posix()}/")
        if PurePosixPath(chosen.rel).name != module:
            how.append(f"its code cells, as {module}" if chosen.notebook else f"as {module}")
        how += [f"though misnamed: {_rename(chosen.rel)}"] * (not exact) + [chosen.converted] * bool(chosen.converted)
        self.entries[chosen.rel] = FileEntry(chosen.rel, "graded", ", ".join(how))
        left_out = []
        for other in loaded:
            if other is chosen:
                continue
            if other.starter and not chosen.starter:
                why = f"the untouched starter (its functions only raise NotImplementedError); {chosen.rel} is graded instead"
            elif other.starter:
                why = f"{chosen.rel} is graded instead (both are the untouched starter)"
            else:
                reason = self._why_not(other, chosen, any(other is f for f in tied))
                why = f"{chosen.rel} is graded instead: {reason}"
                left_out.append(f"not {other.rel}: {reason}")
            self.entries[other.rel] = FileEntry(other.rel, "ignored", why)
        if left_out or skipped:
            self.caveats[module] = f"Graded {chosen.rel}" + "".join(f", {why}" for why in left_out) + "".join(f"; {why}" for why in skipped) + "."
        return chosen.rel

    def _first(self, loaded: list[_Loaded]) -> tuple[_Loaded | None, list[_Loaded]]:
        """The file to grade of `loaded` (in the submission's order), and those it tied with on time."""
        if not loaded:
            return None, []
        best = max((not f.starter, not f.notebook) for f in loaded)  # work over a starter, then a .py over a notebook
        pool = [f for f in loaded if (not f.starter, not f.notebook) == best]
        newest = max((f.modified for f in pool if f.modified), default=None)
        tied = [f for f in pool if newest is None or (f.modified is not None and f.modified >= newest - SAME_TIME)]
        # max: the first of the equals, in the submission's order
        return max(tied, key=lambda f: (_folder_says(self.nfc[f.rel]), -self.nfc[f.rel].count("/"))), tied

    def _why_not(self, other: _Loaded, chosen: _Loaded, tied: bool) -> str:
        """Why worked-on `other` is not graded, `chosen` is (the first rule of the precedence that tells them apart)."""
        if other.notebook and not chosen.notebook:
            return "both are worked on, and a .py wins over a notebook"
        if not tied:
            return (f"both are worked on, and the newer one is graded ({chosen.rel} was modified {_at(chosen.modified)}, "
                    f"{other.rel} {_at(other.modified)})")
        same = "both are worked on and were modified at the same time" + (f" ({_at(chosen.modified)})" if chosen.modified else "")
        mine, theirs = _folder_words(self.nfc[chosen.rel]), _folder_words(self.nfc[other.rel])
        if _folder_says(self.nfc[chosen.rel]) > _folder_says(self.nfc[other.rel]):
            final = next((w for w in mine if w in _FINAL_WORDS and w not in theirs), None)
            old = next((w for w in theirs if w in _OLD_WORDS and w not in mine), None)
            here, there = (f"{PurePosixPath(f.rel).parent.as_posix()}/" for f in (chosen, other))
            said = [f"{here} says {final}"] * bool(final) + [f"{there} says {old}"] * bool(old)
            return f"{same}, and {said[0]} in its name" + "".join(f", {s}" for s in said[1:])
        if self.nfc[chosen.rel].count("/") < self.nfc[other.rel].count("/"):
            return f"{same}, and {chosen.rel} is nearer the top"
        return (f"{same}, and neither folder's name says which is final (final, latest or submit; old, backup or copy), so the "
                "first in the submission is graded: submit one copy only")

    def _read(self, rel: str) -> bytes:
        if isinstance(self.sources[rel], str):
            raise _Unusable(self.sources[rel])
        try:
            return self.sources[rel].read()
        except OSError as exc:
            raise _Unusable(f"{rel} could not be read ({exc.strerror or exc})") from None
        except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError) as exc:  # encrypted, corrupt
            raise _Unusable(f"{rel} could not be read from the zip ({exc}); zip your files again, without a password, "
                            "and submit the new zip") from None

    def _load(self, rel: str) -> _Loaded:
        data, converted, notebook = self._read(rel), "", _notebook(rel)
        if notebook:
            try:
                code = notebook_code(data, rel).encode()
            except NotebookError as exc:
                raise _Unusable(str(exc)) from None
        elif len(data) > MAX_FILE_BYTES:
            raise _Unusable(f"{rel} is {_size(len(data))}, more than the {MAX_FILE_BYTES >> 10} KiB the grader reads")
        else:
            code, converted = _utf8(data)
        if not code.strip():  # else an empty file, being no untouched starter, would win over a notebook with work
            raise _Unusable(f"{rel} is empty; save your work in it and submit it again")
        if b"\0" in code:
            line = code[:code.index(b"\0")].count(b"\n") + 1
            raise _Unusable(f"{rel} holds a NUL byte (on line {line}), and Python cannot read a file that does; delete it, "
                            "save the file as plain text and submit it again")
        return _Loaded(rel, code, untouched_starter(code), notebook, self.sources[rel].modified(), converted)

    def _copy(self, rel: str) -> None:
        name = PurePosixPath(self.nfc[rel]).name  # as `import` spells it
        first = self.written.get(name)
        if first is not None:
            self.entries[rel] = FileEntry(rel, "ignored", f"{first} is copied instead: " + (
                "the two names differ only in how their accents are encoded (Unicode's NFC and NFD), and the grader's folder "
                "holds one of them" if self._folder(first) == self._folder(rel) else
                "your graded files are imported from one folder, so one file of each name is copied, from the folder more "
                "of them are graded from"))
            return
        try:
            data = self._read(rel)
        except _Unusable as exc:
            self.entries[rel] = FileEntry(rel, "skipped", str(exc))
            return
        if len(data) > MAX_FILE_BYTES:
            self.entries[rel] = FileEntry(rel, "skipped", f"{rel} is {_size(len(data))}, more than the {MAX_FILE_BYTES >> 10} KiB the grader reads")
            return
        found_first = shadowed(name.removesuffix(".py"))
        if found_first:
            stem = name.removesuffix(".py")
            self.entries[rel] = FileEntry(rel, "ignored", f"named like {found_first}, which `import {stem}` imports instead: no code "
                                                          f"can import this file under its name; rename it (to {stem}_helpers.py, "
                                                          "say) and import it by its new name")
            return
        data, converted = _utf8(data)
        (self.workdir / name).write_bytes(data)
        self.written[name] = rel
        refused = scan_tampering(self.workdir / name)
        how = (f"refused by the grader's scan, so no code can import it: {'; '.join(refused[:3])}" if refused
               else "your graded files may import it")
        self.entries[rel] = FileEntry(rel, "copied", "; ".join([f"not a component file; {how}"] + [converted] * bool(converted)))

    def _account(self) -> tuple[FileEntry, ...]:
        """An entry per file, in the submission's order; files ignored for their place are counted per folder."""
        where = _joined([f"{self.spelled[f]}/" if f != "." else "the top level" for f in self.looked], "or")
        out: dict[str, FileEntry] = {}
        for rel in self.sources:
            if rel in self.entries:
                out[rel] = self.entries[rel]
                continue
            group = self._group(rel)
            if _aside(rel):
                group, why = _aside_folder(rel), "hidden files or macOS metadata"
            elif group and unicodedata.normalize("NFC", group.removesuffix("/")) in self.looked:  # its copies all lost
                why = "no component file is graded from this folder, so its other files are not copied"
            elif group or self._folder(rel) not in self.kept:
                why = f"not in {where}, where the grader looks for component files (notebooks named like them are looked for in every folder)"
            else:
                why = "not a component file or a notebook named like one" + (
                    "; a zip inside the submission is not unpacked: submit the files it holds instead" * rel.lower().endswith(".zip"))
            if group is None:
                out[rel] = FileEntry(rel, "ignored", why)
            else:
                counted = out.get(group)
                out[group] = FileEntry(group, "ignored", why, counted.files + 1 if counted else 1)
        return tuple(out.values())

    def _group(self, rel: str) -> str | None:
        """The folder whose files `rel` is counted with, as the submission spells it: the first one on its path that neither
        is nor holds a folder whose files are copied; None for a file directly in such a folder or above one."""
        parts = PurePosixPath(self.nfc[rel]).parts[:-1]
        for i in range(len(parts)):
            folder = "/".join(parts[: i + 1])
            if not any(kept == folder or kept.startswith(f"{folder}/") for kept in self.kept):
                return "/".join(PurePosixPath(rel).parts[: i + 1]) + "/"
        return None


def shadowed(stem: str) -> str | None:
    """What `import STEM` finds before a submission's file STEM.py, if anything: a module of Python's standard library,
    an installed package (on the Python installation's part of sys.path, as the worker has it) or a module of the
    grader's worker, which the worker has loaded under that name."""
    if not stem.isidentifier():
        return None
    if stem in sys.stdlib_module_names:
        return f"`{stem}`, a module of Python's standard library"
    if stem in {PurePosixPath(name).stem for name in WORKER_FILES}:
        return f"`{stem}`, a module of the grader's worker"
    if library_module(stem, installed_paths()):
        return f"`{stem}`, an installed package"
    return None


def _aside(rel: str) -> bool:
    """Hidden files and folders, and the metadata macOS adds to zips."""
    return any(part.startswith(".") or part == "__MACOSX" for part in PurePosixPath(rel).parts)


def _aside_folder(rel: str) -> str | None:
    """The first hidden or macOS metadata folder on the path of `rel`; None for a hidden file in a folder of work."""
    parts = PurePosixPath(rel).parts[:-1]
    return next(("/".join(parts[: i + 1]) + "/" for i, part in enumerate(parts) if part.startswith(".") or part == "__MACOSX"), None)


def _rename(rel: str) -> str:
    name = PurePosixPath(rel).name
    unlike = _unlike(name)
    return f"rename `{name}` to `{expected_name(name)}`" + (f" ({unlike})" if unlike else "")


def _notebook(rel: str) -> bool:
    """Whether `rel`, named like a component file or its notebook, is named like the notebook."""
    return expected_name(PurePosixPath(rel).name).endswith(".ipynb")


def _utf8(data: bytes) -> tuple[bytes, str]:
    """A .py file's code as UTF-8, which Python reads, and how it was converted: Windows Notepad saves UTF-16, and
    older editors their code page. A file declaring its encoding (PEP 263) is left as it is, as Python reads it."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16").encode(), "converted from UTF-16 to UTF-8 (save it as UTF-8)"
        except UnicodeDecodeError:
            return data, ""  # not UTF-16 after all: grading reports what Python makes of it
    try:
        data.decode("utf-8")
        return data, ""
    except UnicodeDecodeError:
        pass
    if any(_CODING.match(line) for line in data.split(b"\n", 2)[:2]):
        return data, ""
    try:
        text, codec = data.decode("cp1252"), "Windows-1252"
    except UnicodeDecodeError:  # bytes cp1252 leaves undefined
        text, codec = data.decode("latin-1"), "Latin-1"
    return text.encode(), f"converted from {codec} to UTF-8, as it is not UTF-8 (save it as UTF-8)"


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def notebook_code(data: bytes, name: str) -> str:
    """The module that notebook `name` stands for: its code cells in order, each under a `# cell N` line,
    less the cells tagged CHECK_TAG, cell magics, and lines IPython runs as magics or shell commands (blanked,
    so that line numbers within a cell hold). NotebookError when the notebook or its code is unusable."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{name} is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB; clear its outputs, save it and submit it again")
    cells = _code_cells(data, name)
    if sum(len(source.encode()) for _, source in cells) > MAX_FILE_BYTES:
        raise NotebookError(f"the code cells of {name} add up to more than {MAX_FILE_BYTES >> 10} KiB")
    lines, origin = [], []  # origin[i]: (cell, line in the cell) of the module's line i + 1
    for number, source in cells:
        kept = cell_lines(source)
        if kept is None:
            continue
        lines += [f"# cell {number}", *kept, ""]
        origin += [(number, i) for i in range(len(kept) + 2)]
    code = "\n".join(lines)
    try:
        compile(code, name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = ""
        if exc.lineno:
            cell, line = origin[min(exc.lineno, len(origin)) - 1]
            where = f", in cell {cell} (counting every cell from the top), line {line}: {(exc.text or '').strip()}"
        raise NotebookError(f"{name} holds code that is not valid Python: {exc.msg}{where}") from None
    except (ValueError, MemoryError, RecursionError) as exc:  # null bytes; nesting too deep for the parser
        raise NotebookError(f"{name} holds code that Python cannot compile ({type(exc).__name__}: {str(exc) or 'nested too deeply'})") from None
    return code


def graded_cell(cell: dict) -> bool:
    """Whether a notebook's cell (its JSON) is part of the module: a code cell not tagged CHECK_TAG."""
    return cell["cell_type"] == "code" and CHECK_TAG not in cell.get("metadata", {}).get("tags", [])


def cell_source(cell: dict) -> str:
    """A notebook cell's text (nbformat allows a string or a list of lines)."""
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def cell_lines(source: str) -> list[str] | None:
    """The lines of a code cell as the module holds them, those IPython runs as magics or shell commands blanked;
    None for a cell magic (`%%bash`), which hands the whole cell to IPython."""
    return None if source.lstrip().startswith("%%") else _without_magics(source.split("\n"))


def _code_cells(data: bytes, name: str) -> list[tuple[int, str]]:
    """(number, source) of the notebook's graded cells; only what that needs is checked."""
    def unreadable(why: str) -> NotebookError:
        return NotebookError(f"{name} could not be read as a Jupyter notebook: {why}")

    try:
        notebook = json.loads(data)  # UTF-16 and UTF-32 too, as JSON allows
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise unreadable(f"it is not valid JSON ({exc}); open it in Jupyter, save it and submit it again") from None
    try:
        if notebook["nbformat"] != 4:
            raise unreadable(f"it has nbformat {notebook['nbformat']!r}; only version 4 notebooks (Jupyter's format since 2015) are "
                             "read: open it in Jupyter, which converts it, save it and submit it again")
        cells = [(number, cell_source(cell)) for number, cell in enumerate(notebook["cells"], 1) if graded_cell(cell)]
    except (KeyError, TypeError, AttributeError) as exc:  # a missing key, or a value of the wrong kind
        raise unreadable(f"it does not have a notebook's structure ({type(exc).__name__}: {exc})") from None
    for number, source in cells:  # JSON's escapes can write what no text file holds
        bad = _NOT_TEXT.search(source)
        if bad:
            raise unreadable(f"cell {number}, line {source.count(chr(10), 0, bad.start()) + 1}, holds {ascii(bad[0])}, which is not "
                             "text (a NUL or half of a UTF-16 pair); delete it, save the notebook and submit it again")
    return cells


def _without_magics(lines: list[str]) -> list[str]:
    """`lines` of one cell, those IPython runs as magics or shell commands blanked. Only a line that starts
    a statement can be one, and tokenize says where statements end: a `%` line that continues a string
    or an expression is kept. Tokenize reads one line at a time, after the tokens of the one before."""
    out, ends, depth = [], {0}, 0  # ends: lines on which a statement ended (0: before the first)

    def readline() -> str:
        if len(out) == len(lines):
            return ""
        line = lines[len(out)]
        out.append("" if len(out) in ends and _MAGIC.match(line) else line)
        return out[-1] + "\n"

    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.OP:
                depth += (token.string in "([{") - (token.string in ")]}")
            elif token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
                ends.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        pass  # not Python: the rest stays as written, and compiling it names the line
    return out + lines[len(out):]


def _component_folders(rels: list[str]) -> tuple[str, ...]:
    """The folders component files are looked for in: the shallowest holding a file named like one or like its notebook
    (the top level, else folders one down, else further), counting those named closely when none is named exactly; in
    the order of `rels` (paths in NFC)."""
    for named in (lambda name: name in API_FILES | NOTEBOOKS, lambda name: expected_name(name) is not None):
        found = [p for p in map(PurePosixPath, rels) if named(p.name)]
        if found:
            depth = min(len(p.parts) for p in found)
            return tuple(dict.fromkeys(p.parent.as_posix() for p in found if len(p.parts) == depth))
    return (".",)


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


def _zip_sources(path: Path) -> dict:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(f"{path.name} is not a readable zip file ({exc})") from None
    members, earlier = {}, {}
    for m in archive.infolist():
        name = zip_name(m)
        if name is None:
            raise SubmissionError(f"{path.name} holds an unsafe path: {printable(m.filename)}; zip the folder again, from inside it")
        if name in members:  # appending to a zip adds an entry beside the old one; unzip keeps the last, and so does this
            earlier[f"{name} (an earlier entry)"] = f"the zip holds {name} again after this entry: the last one is read"
        if not m.is_dir():
            members[name] = m
    if sum(m.file_size for name, m in members.items() if _CODE.fullmatch(PurePosixPath(name).name)) > MAX_ZIP_BYTES:
        raise SubmissionError(f"{path.name} unpacks to more than {MAX_ZIP_BYTES >> 20} MiB of Python files and notebooks")
    return earlier | _linked({name: zip_link(archive, m) for name, m in members.items()},
                             lambda name: archive.read(members[name].filename), lambda name: _zip_time(members[name]))


def _zip_time(member: zipfile.ZipInfo) -> datetime | None:
    """When a zip entry's file was last modified, as the zip keeps it (local time, to two seconds); None for a date that
    is none (a damaged or hand-made zip)."""
    try:
        return datetime(*member.date_time)
    except ValueError:
        return None


def zip_name(member: zipfile.ZipInfo) -> str | None:
    """A zip entry's path inside the archive, with Windows' backslashes as slashes (PowerShell 5.1 writes
    `hw1\\ngram.py`, which zipfile converts only on Windows); None when it would leave the folder it is unpacked to."""
    name = member.filename.replace("\\", "/")
    p = PurePosixPath(name)
    return None if p.is_absolute() or ".." in p.parts or not p.parts else p.as_posix()


def zip_link(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> str | None:
    """The target of a link entry (Unix mode bits S_IFLNK, its bytes the target, as `unzip` restores it); None for a
    file, and for a link whose target the zip cannot give: reading it then says why."""
    if not stat.S_ISLNK(member.external_attr >> 16):
        return None
    try:
        with archive.open(member) as f:
            return f.read(PATH_MAX).decode(errors="replace")
    except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError):
        return None


def walk(root: Path) -> dict[str, str | None]:
    """The files and links in folder `root` and below, by path inside it, in sorted order: None for a file, the target
    for a link. No link is followed, a folder's neither (each is listed through open_within); pipes, sockets and
    devices are left out."""
    found: dict[str, str | None] = {}
    folders: list[tuple[str, ...]] = [()]
    while folders:
        parts = folders.pop()
        fd = open_within(root, parts, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    rel = "/".join((*parts, entry.name))
                    if entry.is_symlink():
                        found[rel] = os.readlink(entry.name, dir_fd=fd)
                    elif entry.is_dir(follow_symlinks=False):
                        folders.append((*parts, entry.name))
                    elif entry.is_file(follow_symlinks=False):
                        found[rel] = None
        finally:
            os.close(fd)
    return dict(sorted(found.items(), key=lambda item: PurePosixPath(item[0])))


def open_within(root: Path, parts: Sequence[str], flags: int) -> int:
    """A descriptor of root/parts[0]/.../parts[-1] (of `root` for no parts), opened one name at a time, each with
    O_NOFOLLOW: a link below `root` is never followed, even one put in place of a file or folder after it was listed.
    `root` itself was named by whoever runs the grader, and is opened as named."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for i, name in enumerate(parts):
        last = i == len(parts) - 1
        try:
            inner = os.open(name, (flags if last else os.O_RDONLY | os.O_DIRECTORY) | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd


def open_file_within(root: Path, rel: str) -> BinaryIO:
    """The regular file `rel` (a path inside folder `root`), open for reading, no link below `root` followed;
    OSError else (EINVAL for a pipe, device or folder in its place, which O_NONBLOCK keeps from blocking the open)."""
    f = open(open_within(root, rel.split("/"), os.O_RDONLY | os.O_NONBLOCK), "rb")
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        f.close()
        raise OSError(errno.EINVAL, "not a regular file")
    return f


def read_within(root: Path, rel: str, limit: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """The bytes of the regular file `rel` inside `root` (open_file_within), none past `limit` (the largest file the
    grader reads: a huge file costs nothing); OSError else."""
    with open_file_within(root, rel) as f:
        data = f.read(limit + 1)
        if len(data) > limit:
            size = max(os.fstat(f.fileno()).st_size, len(data))
            raise OSError(errno.EFBIG, f"it is {_size(size)}, more than the {_size(limit)} the grader reads")
        return data


def _modified_within(root: Path, rel: str) -> datetime | None:
    """When the file `rel` inside folder `root` was last modified (local time): its own time, read in its folder opened
    as open_within opens it, no link below `root` followed; None when it cannot be read."""
    *folders, name = rel.split("/")
    try:
        fd = open_within(root, folders, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return datetime.fromtimestamp(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime)
        finally:
            os.close(fd)
    except OSError:
        return None


def _linked(found: dict[str, str | None], read: Callable[[str], bytes],
            modified: Callable[[str], datetime | None]) -> dict[str, _Source | str]:
    """A source for each of `found` (path -> None for a file, the target for a link), given `read` and `modified` to read a
    file and its time by its path; a link is the file it names within the submission, or gives why it is not followed."""
    folders = {parent.as_posix() for rel in found for parent in PurePosixPath(rel).parents}

    def source(rel: str, target: str | None) -> _Source | str:
        inside = rel if target is None else _within(rel, target)
        if inside is None:
            return (f"{rel} is a link to something outside the submission: not followed "
                    "(submit the files themselves, not links to them)")
        if inside in found and found[inside] is None:
            return _Source(lambda: read(inside), lambda: modified(inside))
        named = "a link" if inside in found else "a folder" if inside in folders else "nothing in the submission"
        return f"{rel} is a link to {named}: not followed (a link is followed only to a file of the submission)"

    return {rel: source(rel, target) for rel, target in found.items()}


def _within(rel: str, target: str) -> str | None:
    """The path inside the submission that link `rel` names by `target`, taken there without following anything ("."
    for its top); None when it leaves the submission: an absolute target, or one climbing above the top."""
    if target.startswith("/"):
        return None
    parts = list(PurePosixPath(rel).parent.parts)
    for part in target.split("/"):
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts) or "."
