"""What a command says and what it returns to the shell: results on stdout, notes and errors on stderr; exit 2 means
the input could not be used, 3 that the grader failed on some case, 128 + N that signal N stopped the command.
Light on purpose: the command line imports it before it knows which command runs."""
from __future__ import annotations

import signal
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape


USAGE_ERROR = 2
GRADER_FAILED = 3  # the grader failed on some case (its own failure): the results are written, but not final
SIGNALLED = 128  # the shell's status for a command a signal ended: 128 + the signal's number
INTERRUPTED = SIGNALLED + signal.SIGINT  # Ctrl-C: 130
# What `kill`, `timeout`, a scheduler and a closed terminal send: a stop, as Ctrl-C is (cli.stops_as_interrupts; a batch
# stops its jobs on them). Windows has no SIGHUP, and the command line (a student's `check` too) installs these on any OS.
STOPS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def printable(text: str, keep: str = "") -> str:
    """`text` with each character a terminal would act on or hide (control characters, escape sequences, bidi
    overrides, zero-width spaces), but those in `keep`, written as its escape: file names are the students'."""
    return "".join(c if c.isprintable() or c in keep else c.encode("unicode_escape").decode() for c in text)


@dataclass(frozen=True)
class Terminal:
    """Results on stdout, diagnostics on stderr; `verbosity` -1 (-q), 0, or 1 (-v)."""

    out: Console
    err: Console
    verbosity: int

    # Notes and errors quote file names and ids from submissions: escape sequences in them are shown, not run.
    def note(self, text: str) -> None:
        if self.verbosity >= 0:
            self.err.print(printable(text, keep="\n"), markup=False, highlight=False)

    def error(self, text: str) -> None:
        self.err.print("[red]error:[/] " + escape(printable(text, keep="\n")), highlight=False)

    def warn(self, text: str | None) -> None:
        """Said even under -q: what weakens the grading (a tier weaker than before)."""
        if text:
            self.err.print("[yellow]warning:[/] " + escape(printable(text, keep="\n")), highlight=False)
