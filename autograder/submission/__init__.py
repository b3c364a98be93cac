"""Finding a submission's files: a folder, a .zip of one, or a single .py or .ipynb file.

The files are read only inside the submission (reading.py) and copied, never imported, into a private folder.
Component files are looked for in the shallowest folders holding any: the top level, else the folders one down (how
students zip a folder, and how Gradescope stores uploads), else further down (a zip of the course folder,
CS4xx/hw1/ngram.py, or of a folder unzipped into its namesake, hw1/hw1/ngram.py: the graded file's entry says how far
down). A Jupyter notebook named after a component file (ngram.ipynb), in any folder, stands for that file: its code
cells become the module (notebooks.py). Of the files that could be one component file, each component's is chosen on
its own (choosing.py: work over an untouched starter, the newest of two copies).

Every file found gets an entry in the submission's account: graded, copied, ignored, skipped or misnamed, and why. A
file named close to a component file (names.py) is reported with the rename to make, and graded only when the rubric
accepts misnamed files. An assignment of some parts grades their component files only: another part's file is
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
"""
from __future__ import annotations

import ast
import functools
import sys
import unicodedata
import zipfile
import zlib
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..forbidden import scan_tampering
from ..sandbox.host.process import WORKER_FILES
from ..sandbox.worker.audit import installed_paths, library_module
from .choosing import Choice, Copy
from ..terminal import printable
from .names import API_FILES, CODE, FILE_ORDER, NOTEBOOKS, expected_name, expected_names, joined, rename
from .notebooks import NotebookError, notebook_code
from .reading import (MAX_FILE_BYTES, Source, SubmissionError, linked, modified_within, read_within, size, utf8, walk,
                      zip_sources)


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


@functools.lru_cache(maxsize=16)  # `check --watch` opens the same files at every save: the unchanged ones parsed once
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
        sources = linked(walk(path), lambda rel: read_within(path, rel), lambda rel: modified_within(path, rel))
    elif not single:
        sources = zip_sources(path)
    elif CODE.fullmatch(path.name):
        sources = {path.name: Source(path.read_bytes, lambda: None)}  # one file: no copy to tell it from
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


class _Sorting:
    """Decides what happens to each file of `sources` (path in the submission -> the file, or why a link there is not
    followed) and writes the files graded into `workdir`. Paths are matched in NFC (`nfc`), and said as the submission
    spells them."""

    def __init__(self, sources: dict[str, Source | str], workdir: Path, accept_misnamed: bool, graded: frozenset[str]):
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
        only = joined(sorted(self.graded), "and")
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
        """Grade the file that stands for `module` of those that may (the precedence: choosing.py); its path."""
        if not (exact or close):
            return None
        if not exact and not self.accept_misnamed:
            for rel in close:
                self.entries[rel] = FileEntry(rel, "misnamed", f"probably meant as {module}; {rename(rel)} to have it graded")
            names = " and ".join(PurePosixPath(rel).name for rel in close)
            self.problems[module] = (f"Not graded: {module} is not in the submission, but {names} {'looks' if len(close) == 1 else 'look'} "
                                     f"like it: {'; '.join(map(rename, close))}, and submit again (files are graded only under "
                                     "their expected names).")
            return None
        choice = Choice({rel: _load(rel, self.nfc[rel], self.sources[rel]) for rel in exact or close})
        chosen = choice.chosen
        self.entries |= {rel: FileEntry(rel, action, why) for rel, (action, why) in choice.said.items()}
        # beside an exact name, what is named closely is left as it is: a .py is copied (it may be imported), the rest ignored
        for rel in close if exact else ():
            if not (self._folder(rel) in self.looked and rel.endswith(".py")):
                graded = chosen.rel if chosen else exact[0]
                self.entries[rel] = FileEntry(rel, "ignored", f"named like {module}, which is graded from {graded}")
        if not chosen:
            self.problems[module] = choice.problem
            return None
        (self.workdir / module).write_bytes(chosen.code)
        how = []
        depth = chosen.nfc.count("/")
        if depth >= 2 and self._folder(chosen.rel) in self.looked:
            how.append(f"found {depth} folders down, in {PurePosixPath(chosen.rel).parent.as_posix()}/")
        if PurePosixPath(chosen.rel).name != module:
            how.append(f"its code cells, as {module}" if chosen.notebook else f"as {module}")
        how += [f"though misnamed: {rename(chosen.rel)}"] * (not exact) + [chosen.converted] * bool(chosen.converted)
        self.entries[chosen.rel] = FileEntry(chosen.rel, "graded", ", ".join(how))
        if choice.caveat:
            self.caveats[module] = choice.caveat
        return chosen.rel

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
        data = _read(rel, self.sources[rel])
        if isinstance(data, str):
            self.entries[rel] = FileEntry(rel, "skipped", data)
            return
        if len(data) > MAX_FILE_BYTES:
            self.entries[rel] = FileEntry(rel, "skipped", f"{rel} is {size(len(data))}, more than the {MAX_FILE_BYTES >> 10} KiB the grader reads")
            return
        found_first = shadowed(name.removesuffix(".py"))
        if found_first:
            stem = name.removesuffix(".py")
            self.entries[rel] = FileEntry(rel, "ignored", f"named like {found_first}, which `import {stem}` imports instead: no code "
                                                          f"can import this file under its name; rename it (to {stem}_helpers.py, "
                                                          "say) and import it by its new name")
            return
        data, converted = utf8(data)
        (self.workdir / name).write_bytes(data)
        self.written[name] = rel
        refused = scan_tampering(self.workdir / name)
        how = (f"refused by the grader's scan, so no code can import it: {'; '.join(refused[:3])}" if refused
               else "your graded files may import it")
        self.entries[rel] = FileEntry(rel, "copied", "; ".join([f"not a component file; {how}"] + [converted] * bool(converted)))

    def _account(self) -> tuple[FileEntry, ...]:
        """An entry per file, in the submission's order; files ignored for their place are counted per folder."""
        where = joined([f"{self.spelled[f]}/" if f != "." else "the top level" for f in self.looked], "or")
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


def _read(rel: str, source: Source | str) -> bytes | str:
    """The bytes of file `rel`, or why they cannot be read (`source` a string: why a link there is not followed)."""
    if isinstance(source, str):
        return source
    try:
        return source.read()
    except OSError as exc:
        return f"{rel} could not be read ({exc.strerror or exc})"
    except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError) as exc:  # encrypted, corrupt
        return f"{rel} could not be read from the zip ({exc}); zip your files again, without a password, and submit the new zip"


def _load(rel: str, nfc: str, source: Source | str) -> Copy | str:
    """File `rel` (`nfc`: in NFC), named like a component file or its notebook, as the code that would be graded; or why
    it cannot stand for the component file."""
    data, converted, notebook = _read(rel, source), "", expected_name(PurePosixPath(rel).name).endswith(".ipynb")
    if isinstance(data, str):
        return data
    if notebook:
        try:
            code = notebook_code(data, rel).encode()
        except NotebookError as exc:
            return str(exc)
    elif len(data) > MAX_FILE_BYTES:
        return f"{rel} is {size(len(data))}, more than the {MAX_FILE_BYTES >> 10} KiB the grader reads"
    else:
        code, converted = utf8(data)
    if not code.strip():  # else an empty file, being no untouched starter, would win over a notebook with work
        return f"{rel} is empty; save your work in it and submit it again"
    if b"\0" in code:
        line = code[:code.index(b"\0")].count(b"\n") + 1
        return (f"{rel} holds a NUL byte (on line {line}), and Python cannot read a file that does; delete it, save the file "
                "as plain text and submit it again")
    return Copy(rel, nfc, code, untouched_starter(code), notebook, source.modified(), converted)


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
