"""Submissions as real tools make them: each zip is built here member by member, with the times, modes and names
that macOS Finder, Windows Explorer, `zip -r`, 7-Zip and Colab write, and each test says what was graded and the
sentence a student or TA reads about it (issue 41: two copies, a parent folder zipped, NFD names, Colab's
"Copy of", letters that only look Latin)."""
import importlib.machinery
import os
import stat
import unicodedata
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
from attacks import grade_cli
from conftest import SOLUTIONS

from autograder.submission import open_submission

NGRAM = (SOLUTIONS / "ngram.py").read_text()
PAD = "return [BOS] * (n - 1) + list(tokens) + [EOS]"
BROKEN = NGRAM.replace(PAD, "return list(tokens)")  # worked on, and wrong
# The correct ngram.py, padding with a helper of its own whose name macOS saved decomposed (NFD: u + COMBINING ACUTE).
HELPER = unicodedata.normalize("NFD", "utilsé.py")
WITH_HELPER = NGRAM.replace("import numpy as np\n", "import numpy as np\nfrom utilsé import padded\n").replace(
    PAD, "return padded(tokens, n, BOS, EOS)")
PADDED = "def padded(tokens, n, bos, eos):\n    return [bos] * (n - 1) + list(tokens) + [eos]\n"
RNN = (SOLUTIONS / "rnn.py").read_bytes()
APPLE_DOUBLE = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        "  # what Finder puts in __MACOSX/._NAME
MARCH_1, MARCH_3, MARCH_4 = (2024, 3, 1, 9, 15, 0), (2024, 3, 3, 18, 2, 10), (2024, 3, 4, 23, 58, 0)
NOT_IMPORTANT = "hidden files or macOS metadata"

# ---- how each tool writes a zip --------------------------------------------------------------------------------------


def _info(name: str, when: tuple, unix: bool, folder: bool = False) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, when)
    info.create_system = 3 if unix else 0
    if unix:  # Info-ZIP and Finder keep the Unix mode in the high half, and the MS-DOS folder bit
        info.external_attr = ((stat.S_IFDIR | 0o755) << 16 | 0x10) if folder else (stat.S_IFREG | 0o644) << 16
    else:  # Explorer and 7-Zip: MS-DOS attributes only (archive, or directory)
        info.external_attr = 0x10 if folder else 0x20
    info.compress_type = zipfile.ZIP_STORED if folder else zipfile.ZIP_DEFLATED
    return info


def _write(path: Path, members: list[tuple[zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for info, data in members:
            z.writestr(info, data)
    return path


def finder(path: Path, files: dict[str, tuple[bytes, tuple]]) -> Path:
    """Finder's Compress (Archive Utility): names in NFD, a folder entry for each folder, and an AppleDouble file
    under __MACOSX/ for each file; Archive.zip when several items were selected."""
    members, folders = [], set()
    for name, (data, when) in files.items():
        name = unicodedata.normalize("NFD", name)
        for parent in reversed(Path(name).parents[:-1]):
            if parent.as_posix() not in folders:
                folders.add(parent.as_posix())
                members.append((_info(f"{parent.as_posix()}/", when, unix=True, folder=True), b""))
        members.append((_info(name, when, unix=True), data))
    for name, (_, when) in files.items():
        parent, leaf = os.path.split(unicodedata.normalize("NFD", name))
        members.append((_info(f"__MACOSX/{parent + '/' if parent else ''}._{leaf}", when, unix=True), APPLE_DOUBLE))
    return _write(path, members)


def zip_r(path: Path, files: dict[str, tuple[bytes, tuple]]) -> Path:
    """`zip -r hw.zip DIR`: a folder entry before its files, Unix modes, names as the file system holds them."""
    return _write(path, _with_folders(files, unix=True))


def _with_folders(files: dict[str, tuple[bytes, tuple]], unix: bool) -> list:
    """The members of `files`, each folder's entry before its first file, as zip -r and 7-Zip write them."""
    members, folders = [], set()
    for name, (data, when) in files.items():
        for parent in reversed(Path(name).parents[:-1]):
            if parent.as_posix() not in folders:
                folders.add(parent.as_posix())
                members.append((_info(f"{parent.as_posix()}/", when, unix=unix, folder=True), b""))
        members.append((_info(name, when, unix=unix), data))
    return members


def explorer(path: Path, files: dict[str, tuple[bytes, tuple]]) -> Path:
    """Windows Explorer's Send to > Compressed folder: forward slashes, no folder entries, no Unix mode bits."""
    return _write(path, [(_info(name, when, unix=False), data) for name, (data, when) in files.items()])


def seven_zip(path: Path, files: dict[str, tuple[bytes, tuple]]) -> Path:
    """7-Zip on Windows: folder entries with the MS-DOS directory bit, no Unix mode bits."""
    return _write(path, _with_folders(files, unix=False))


def lines(submission) -> list[str]:
    return [str(entry) for entry in submission.account]


def importable(folder: Path, module: str) -> bool:
    """Whether `import module` finds a file of `folder`, as the worker's import does (the name as Python spells an
    identifier: NFKC)."""
    files = importlib.machinery.FileFinder(str(folder), (importlib.machinery.SourceFileLoader, [".py"]))
    return files.find_spec(unicodedata.normalize("NFKC", module)) is not None


# ---- a helper module saved by macOS ----------------------------------------------------------------------------------

def test_finder_archive_of_the_files_copies_the_decomposed_helper_under_the_name_import_finds(tmp_path):
    archive = finder(tmp_path / "Archive.zip", {"ngram.py": (WITH_HELPER.encode(), MARCH_3),
                                                "utils\u00e9.py": (PADDED.encode(), MARCH_3)})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"ngram.py"} and not sub.problems and not sub.caveats
    assert sorted(p.name for p in sub.dir.iterdir()) == ["ngram.py", "utils\u00e9.py"]  # NFC, as `import utilsé` spells it
    assert importable(sub.dir, "utils\u00e9") and (sub.dir / "utils\u00e9.py").read_text() == PADDED
    # the account shows each name as the zip spells it
    assert lines(sub) == ["ngram.py: graded", f"{HELPER}: copied: not a component file; your graded files may import it",
                          f"__MACOSX/ (2 files): ignored: {NOT_IMPORTANT}"]


# ---- two copies of the work ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("newer", ["hw1_final", "hw1_old"])
def test_of_two_copies_in_sibling_folders_the_newer_is_graded_and_its_cases_say_which_and_why(tmp_path, newer):
    """Explorer's zip of both folders, hw1_old/ first. The newer copy wins whatever its folder is called: the time
    says what was worked on last, and every case of ngram says which copy was graded."""
    older = "hw1_old" if newer == "hw1_final" else "hw1_final"
    when = {newer: MARCH_3, older: MARCH_1}
    code = {"hw1_old": BROKEN, "hw1_final": NGRAM}
    archive = explorer(tmp_path / "hw1.zip", {
        "hw1_old/ngram.py": (code["hw1_old"].encode(), when["hw1_old"]), "hw1_old/utils.py": (b"OLD = 1\n", when["hw1_old"]),
        "hw1_final/ngram.py": (code["hw1_final"].encode(), when["hw1_final"]),
        "hw1_final/utils.py": (b"FINAL = 1\n", when["hw1_final"])})
    sub = open_submission(archive, tmp_path / "out")
    assert (sub.dir / "ngram.py").read_text() == code[newer]
    # the helper beside the graded copy
    assert (sub.dir / "utils.py").read_bytes() == (b"FINAL = 1\n" if newer == "hw1_final" else b"OLD = 1\n")
    why = (f"both are worked on, and the newer one is graded ({newer}/ngram.py was modified 2024-03-03 18:02:10, "
           f"{older}/ngram.py 2024-03-01 09:15:00)")
    assert sub.caveats == {"ngram.py": f"Graded {newer}/ngram.py, not {older}/ngram.py: {why}."}
    assert f"{older}/ngram.py: ignored: {newer}/ngram.py is graded instead: {why}" in lines(sub)
    assert f"{newer}/ngram.py: graded" in lines(sub)
    assert f"{older}/ (1 file): ignored: no component file is graded from this folder, so its other files are not copied" \
        in lines(sub)


@pytest.mark.parametrize("loser, winner, said", [
    ("hw1_old", "hw1_final", "hw1_final/ says final in its name, hw1_old/ says old"),
    ("backup", "submit", "submit/ says submit in its name, backup/ says backup"),
    ("hw1 - Copy", "hw1", "hw1 - Copy/ says copy in its name"),  # Windows Explorer's copy of a folder
    ("hw1", "hw1 latest", "hw1 latest/ says latest in its name"),
])
def test_of_two_copies_modified_at_the_same_time_the_one_whose_folder_says_final_is_graded(tmp_path, loser, winner, said):
    """`zip -r` of both folders, the loser first; both copies carry one time (a zip's clock ticks every two seconds,
    and a checkout or a copy gives files one time)."""
    archive = zip_r(tmp_path / "hw.zip", {f"{loser}/ngram.py": (BROKEN.encode(), MARCH_4),
                                          f"{winner}/ngram.py": (NGRAM.encode(), MARCH_4)})
    sub = open_submission(archive, tmp_path / "out")
    assert (sub.dir / "ngram.py").read_text() == NGRAM
    why = f"both are worked on and were modified at the same time (2024-03-04 23:58:00), and {said}"
    assert sub.caveats == {"ngram.py": f"Graded {winner}/ngram.py, not {loser}/ngram.py: {why}."}
    assert f"{loser}/ngram.py: ignored: {winner}/ngram.py is graded instead: {why}" in lines(sub)


def test_of_two_copies_that_nothing_tells_apart_the_first_is_graded_and_the_cases_say_to_submit_one(tmp_path):
    archive = seven_zip(tmp_path / "hw.zip", {"lab/ngram.py": (BROKEN.encode(), MARCH_4),
                                              "mine/ngram.py": (NGRAM.encode(), MARCH_4)})
    sub = open_submission(archive, tmp_path / "out")
    assert (sub.dir / "ngram.py").read_text() == BROKEN
    assert sub.caveats == {"ngram.py": (
        "Graded lab/ngram.py, not mine/ngram.py: both are worked on and were modified at the same time (2024-03-04 23:58:00), "
        "and neither folder's name says which is final (final, latest or submit; old, backup or copy), so the first in "
        "the submission is graded: submit one copy only.")}


def test_in_a_folder_the_copies_are_told_apart_by_their_file_times(tmp_path):
    """A folder (a Gradescope upload unpacked, a TA's checkout): the times are the files' own, read without following
    a link, and the newer copy wins even where its folder sorts last."""
    folder = tmp_path / "submitted"
    for name, code, when in [("a_final", BROKEN, MARCH_1), ("b_old", NGRAM, MARCH_3)]:
        (folder / name).mkdir(parents=True)
        (folder / name / "ngram.py").write_text(code)
        os.utime(folder / name / "ngram.py", (datetime(*when).timestamp(),) * 2)
    sub = open_submission(folder, tmp_path / "out")
    assert (sub.dir / "ngram.py").read_text() == NGRAM
    assert sub.caveats["ngram.py"] == (
        "Graded b_old/ngram.py, not a_final/ngram.py: both are worked on, and the newer one is graded (b_old/ngram.py was "
        "modified 2024-03-03 18:02:10, a_final/ngram.py 2024-03-01 09:15:00).")


def test_parts_in_sibling_folders_are_each_graded_and_a_shared_helper_comes_from_the_folder_graded_most(tmp_path):
    """`zip -r` of a course folder worked in part by part: each component is graded from where it is, and the grader's
    one folder takes utils.py from part1/, which two of the three graded files come from."""
    archive = zip_r(tmp_path / "course.zip", {
        "part1/ngram.py": (NGRAM.encode(), MARCH_1), "part1/backprop.py": ((SOLUTIONS / "backprop.py").read_bytes(), MARCH_1),
        "part1/utils.py": (b"PART = 1\n", MARCH_1), "part2/rnn.py": (RNN, MARCH_3), "part2/utils.py": (b"PART = 2\n", MARCH_3)})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"ngram.py", "backprop.py", "rnn.py"} and not sub.caveats
    assert (sub.dir / "utils.py").read_bytes() == b"PART = 1\n"
    assert ("part2/utils.py: ignored: part1/utils.py is copied instead: your graded files are imported from one folder, so one "
            "file of each name is copied, from the folder more of them are graded from") in lines(sub)


def test_one_name_written_in_nfc_and_in_nfd_is_copied_once_and_the_other_says_why(tmp_path):
    """Linux keeps both spellings as two files; the grader's folder, where names are NFC, has room for one."""
    folder = tmp_path / "submitted"
    folder.mkdir()
    (folder / "ngram.py").write_text(NGRAM)
    (folder / "utils\u00e9.py").write_text("X = 'nfc'\n")
    (folder / HELPER).write_text("X = 'nfd'\n")
    sub = open_submission(folder, tmp_path / "out")
    first, second = sorted(["utils\u00e9.py", HELPER])  # a folder is read in sorted order
    assert sorted(p.name for p in sub.dir.iterdir()) == ["ngram.py", "utils\u00e9.py"]
    assert f"{first}: copied: not a component file; your graded files may import it" in lines(sub)
    assert (f"{second}: ignored: {first} is copied instead: the two names differ only in how their accents are encoded "
            "(Unicode's NFC and NFD), and the grader's folder holds one of them") in lines(sub)


# ---- the work further down -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool, top", [(zip_r, "CS4xx/hw1"), (finder, "hw1/hw1")])
def test_a_zip_of_the_parent_or_a_doubled_folder_is_graded_where_the_files_are(tmp_path, tool, top):
    """`zip -r` of the course folder, and Finder's zip of a folder unzipped into one of the same name. The grader's own
    files in a student's bundle (autograder/cases/ngram.py) are deeper than the work, and stay out of it."""
    archive = tool(tmp_path / "hw.zip", {
        f"{top}/ngram.py": (NGRAM.encode(), MARCH_3), f"{top}/utils.py": (b"X = 1\n", MARCH_3),
        f"{top}/autograder/__init__.py": (b"", MARCH_1), f"{top}/autograder/cases/ngram.py": (b"CASES = []\n", MARCH_4),
        f"{top.split('/')[0]}/syllabus.md": (b"# CS4xx\n", MARCH_1)})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"ngram.py"} and (sub.dir / "ngram.py").read_text() == NGRAM and not sub.caveats
    assert (sub.dir / "utils.py").read_bytes() == b"X = 1\n"
    account = lines(sub)
    assert f"{top}/ngram.py: graded: found 2 folders down, in {top}/" in account
    assert f"{top}/utils.py: copied: not a component file; your graded files may import it" in account
    assert (f"{top}/autograder/ (2 files): ignored: not in {top}/, where the grader looks for component files (notebooks "
            "named like them are looked for in every folder)") in account


# ---- names that are almost right -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["Copy of ngram.ipynb", "Copy of Copy of ngram.ipynb", "Copy of ngram (1).ipynb"])
def test_colab_and_drive_copies_are_told_the_rename(tmp_path, name):
    """Colab's File > Save a copy in Drive, and Drive's Make a copy, name the notebook "Copy of ..."; downloaded, it
    keeps that name. (Explorer's "ngram - Copy.py" and Finder's "ngram copy.py": tests/test_submission.py.)"""
    archive = explorer(tmp_path / "hw.zip", {name: (b"{}", MARCH_3), "rnn.py": (RNN, MARCH_3)})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"rnn.py"}
    assert f"{name}: misnamed: probably meant as ngram.py; rename `{name}` to `ngram.ipynb` to have it graded" in lines(sub)
    assert sub.problems["ngram.py"] == (
        f"Not graded: ngram.py is not in the submission, but {name} looks like it: rename `{name}` to `ngram.ipynb`, and submit "
        "again (files are graded only under their expected names).")


def test_two_colab_downloads_of_the_notebook_are_both_told_the_rename(tmp_path):
    """A Colab user who downloaded twice (the browser's "ngram (1).ipynb") and saved a copy in Drive first."""
    archive = explorer(tmp_path / "hw.zip", {"Copy of ngram.ipynb": (b"{}", MARCH_1), "ngram (1).ipynb": (b"{}", MARCH_3),
                                             "rnn.py": (RNN, MARCH_3)})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.problems["ngram.py"] == (
        "Not graded: ngram.py is not in the submission, but Copy of ngram.ipynb and ngram (1).ipynb look like it: rename "
        "`Copy of ngram.ipynb` to `ngram.ipynb`; rename `ngram (1).ipynb` to `ngram.ipynb`, and submit again (files are graded "
        "only under their expected names).")


@pytest.mark.parametrize("name, want, said", [
    ("ngr\u0430m.py", "ngram.py", "its 4th character, \u0430, is Cyrillic Small Letter A (U+0430), not the Latin a"),
    ("\u0455eq2seq.py", "seq2seq.py", "its 1st character, \u0455, is Cyrillic Small Letter Dze (U+0455), not the Latin s"),
    ("l\u0455tm.py", "lstm.py", "its 2nd character, \u0455, is Cyrillic Small Letter Dze (U+0455), not the Latin s"),
    ("w\u03bfrd2vec.py", "word2vec.py", "its 2nd character, \u03bf, is Greek Small Letter Omicron (U+03BF), not the Latin o"),
    ("\uff4egram.py", "ngram.py", "its 1st character, \uff4e, is Fullwidth Latin Small Letter N (U+FF4E), not the Latin n"),
    ("ngram\u200b.py", "ngram.py", "its 6th character is an invisible Zero Width Space (U+200B)"),
])
def test_a_name_with_a_letter_that_only_looks_latin_says_which(tmp_path, name, want, said):
    archive = zip_r(tmp_path / "hw.zip", {name: (b"X = 1\n", MARCH_3), "rnn.py": (RNN, MARCH_3)})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"rnn.py"}
    shown = name.replace("\u200b", "\\u200b")  # an invisible character is shown by its escape
    assert f"{shown}: misnamed: probably meant as {want}; rename `{shown}` to `{want}` ({said}) to have it graded" in lines(sub)
    assert f"rename `{name}` to `{want}` ({said}), and submit again" in sub.problems[want]


# ---- end to end ------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_grading_the_newer_copy_imports_its_decomposed_helper_and_every_case_says_which_copy(tmp_path):
    """`autograder grade` of Finder's zip of both folders: the worker imports the helper macOS named in NFD, and every
    ngram case, passed ones too, says which copy was graded; the account under the table says why the other was not."""
    archive = finder(tmp_path / "Archive.zip", {
        "hw1_old/ngram.py": (BROKEN.encode(), MARCH_1),
        "hw1_final/ngram.py": (WITH_HELPER.encode(), MARCH_3), "hw1_final/utils\u00e9.py": (PADDED.encode(), MARCH_3)})
    graded = grade_cli(archive, tmp_path, ["ngram"])
    assert graded.returncode == 0, graded.output
    tests = graded.results["tests"]
    why = ("both are worked on, and the newer one is graded (hw1_final/ngram.py was modified 2024-03-03 18:02:10, "
           "hw1_old/ngram.py 2024-03-01 09:15:00)")
    assert tests and all(t["status"] == "passed" for t in tests), [t["output"] for t in tests if t["status"] != "passed"]
    assert all(t["output"].endswith(f"Graded hw1_final/ngram.py, not hw1_old/ngram.py: {why}.") for t in tests)
    assert f"hw1_old/ngram.py: ignored: hw1_final/ngram.py is graded instead: {why}" in graded.results["output"]
