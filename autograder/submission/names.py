"""What a file of a submission is named as: a component file (ngram.py), its notebook (ngram.ipynb), or close to one.

A file named close to a component file (NGram.py, attention (1).py, lstm_solution.py, backprop.py.txt, Colab's and
Drive's Copy of ngram.ipynb, Explorer's ngram - Copy.py, Finder's ngram copy.py, a name with a Cyrillic а for the
Latin a) is reported with the rename to make, naming any character that only looks Latin. File names are the
students': `printable` writes them so that a terminal shows them as they are.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from pathlib import PurePosixPath

from ..cases import FILES

API_FILES = frozenset(FILES.values())
FILE_ORDER = tuple(sorted(API_FILES))  # for messages


def notebook_name(file: str) -> str:
    """The notebook that may stand for component file `file`: ngram.py -> ngram.ipynb."""
    return file.removesuffix(".py") + ".ipynb"


NOTEBOOKS = frozenset(notebook_name(f) for f in API_FILES)
# A name that may be code: a .py or .ipynb extension in any case, perhaps with another one after it (backprop.py.txt).
CODE = re.compile(r"(?P<stem>.+?)\.(?P<ext>py|ipynb)(?P<extra>\.[^.]+)*", re.IGNORECASE)
# What downloads and students add to a name: copy numbers (`attention (1)`, `attention-1`) and words (`lstm_solution`).
_ADDED = (r"(?:\s*\(\d+\)|[\s_-]+(?:\d+|v\d+|copy|final|solution|solutions|solved|done|complete|completed|finished"
          r"|submission|submit|mine|new|old|working|answer|answers|filled))")
_COPY_OF = r"(?:copy of\s+)*"  # what Colab's "Save a copy in Drive" and Drive's "Make a copy" put before a name
# Letters that look Latin but are not (from Unicode's confusables.txt: Cyrillic, Greek, Latin and Armenian look-alikes of
# the letters file names are spelled with), read as the Latin letter when a name is matched; NFKC reads fullwidth and
# other compatibility forms, and format characters (a zero-width space) are left out.
_LOOKALIKES = dict(zip("аеорсухіјѕԁһԛԝӏ" "АВЕКМНОРСТХУЅІЈԚԜӀ" "αονριυγ" "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ" "ıɑɡȷ" "օսհոզ",
                       "aeopcyxijsdhqwl" "ABEKMHOPCTXYSIJQWl" "aovpiuy" "ABEZHIKMNOPTYX" "iagj" "ouhnq", strict=True))


def joined(names: list[str], word: str) -> str:
    """`names` in a sentence: a; a and b; a, b and c (`word`: "and" or "or")."""
    return f"{', '.join(names[:-1])} {word} {names[-1]}" if len(names) > 1 else names[0]


def expected_names(graded: Collection[str]) -> str:
    """The names that are graded, for messages: "backprop.py or ngram.py, or a notebook named like one (ngram.ipynb)"."""
    order = sorted(graded)
    example = "ngram.py" if "ngram.py" in order else order[0]  # the course's first file, where it is graded
    return f"{joined(order, 'or')}, or a notebook named like {'one' if len(order) > 1 else 'it'} ({notebook_name(example)})"


def expected_name(name: str) -> str | None:
    """The component file or notebook that file `name` is named as, exactly or closely (NGram.py, rnn.PY,
    backprop.py.txt, attention (1).py, lstm_solution.py -> lstm.py, Copy of ngram.ipynb -> ngram.ipynb, ngrаm.py with a
    Cyrillic а -> ngram.py); None when it is named like none."""
    match = CODE.fullmatch(_as_latin(name))
    if not match:
        return None
    base = re.fullmatch(rf"{_COPY_OF}(.+?){_ADDED}*", match["stem"], re.IGNORECASE)[1]
    want = f"{base.lower()}.{match['ext'].lower()}"
    return want if want in API_FILES | NOTEBOOKS else None


def _as_latin(text: str) -> str:
    """`text` as the Latin letters it looks like: compatibility forms as NFKC reads them (a fullwidth ｎ), look-alikes from
    other scripts (a Cyrillic а), and format characters (a zero-width space) left out."""
    return "".join(_LOOKALIKES.get(c, c) for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")


def rename(rel: str) -> str:
    """The rename that makes file `rel`, named close to a component file or its notebook, named as it."""
    name = PurePosixPath(rel).name
    unlike = _unlike(name)
    return f"rename `{name}` to `{expected_name(name)}`" + (f" ({unlike})" if unlike else "")


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
