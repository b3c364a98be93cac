"""Section 12 of BENCHMARKS.md: how long each command a student or a TA types takes, before and after, in seconds and in
this machine's own `import torch`.

"Before" is commit BEFORE, unpacked by `git archive` into the scratch folder; "after" is the working tree. Both run as
`python -m autograder ...` with this venv's Python, cwd and PYTHONPATH the tree (or its bundle), so that each imports its
own `autograder` package (checked once per tree: the editable install points at the working tree). Each command is a
process, timed wall to wall, `runs` times, before and after alternately; the unit is `python -c "import torch"`, timed
as often in the same run. A command that exits non-zero on the solutions' files, or whose check or grade prints less than
full marks, is a failure of the bench: the section says so in its row, and run() lists it under "failures". benchmarks/run.py runs it (`--only-commands`).
"""
from __future__ import annotations

import fnmatch
import io
import os
import platform
import queue
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from statistics import median

from benchmarks.common import ROOT, busy_cpu, read_lines, table

SECTION = "## 12. A student's commands, in torch imports"
BEFORE = "83783cf"
RUNS = 5
COMPONENTS = ("ngram", "backprop", "attention", "transformer")
WATCHED = ("ngram", "attention")
QUIET_SECONDS = 10.0  # the window, before and after the run, in which the machine's own load is measured
QUIET_MOST = 0.05  # busier than this share of one core then: not idle
WATCH_TIMEOUT = 180  # seconds to wait for one result of the watch mode before calling it failed
TORCH = [sys.executable, "-c", "import torch"]
TOTAL = re.compile(r"^Total: ([\d.]+) / ([\d.]+)")


@dataclass(frozen=True)
class Tree:
    """A copy of the grader: `python -m autograder` run in `root` imports `root`/autograder."""

    name: str  # "before" or "after"
    root: Path

    def env(self, **extra: str) -> dict[str, str]:
        # Bytecode written and reused, as on a student's machine from the second run on (some shells here forbid it).
        return {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")},
                "PYTHONPATH": str(self.root), **extra}


@dataclass(frozen=True)
class Command:
    argv: list[str]
    tree: Tree  # where it runs (cwd), and whose package it imports


@dataclass(frozen=True)
class Row:
    key: str  # what --commands-rows picks it by
    label: str  # the table's first column
    needs: str = ""  # "bundle" or "part1": the bundle it runs in, built only when a picked row needs it


ROWS = [Row("version", "`autograder --version`"), Row("help", "`autograder --help`"),
        *(Row(f"check:{c}", f"`autograder check {c} --dir solutions`") for c in COMPONENTS),
        Row("check:all", "`autograder check --dir solutions` (every component)"),
        *(Row(f"bundle:{c}", f"`autograder check {c}`", "bundle") for c in COMPONENTS),
        Row("bundle:all", "`autograder check` (every component)", "bundle"),
        Row("pytest", "`pytest -k pad_sentence`", "part1"),
        Row("grade", "`autograder grade solutions` (every case)"),
        *(Row(f"watch:{c}", f"`autograder check --watch {c} --dir D`: a save to its result") for c in WATCHED),
        *(Row(f"watch:{c}:bundle", f"`autograder check --watch {c}`: a save to its result", "bundle") for c in WATCHED)]
VIEWS = {"": "the course repo", "bundle": "the bundle", "part1": "the part-1 bundle"}
GROUPS = {"": "The course repo (a TA's view; the tree's root, on its solutions/)",
          "bundle": "A student bundle of the whole course holding solutions/' files (`release --out`; the student's view)",
          "part1": "A part-1 bundle holding solutions/' ngram.py and backprop.py (`release --out --part 1`)"}


def picked(patterns: str | None) -> list[Row]:
    """The rows whose key matches one of the comma-separated fnmatch patterns (all without any)."""
    if not patterns:
        return ROWS
    words = [p.strip() for p in patterns.split(",") if p.strip()]
    rows = [r for r in ROWS if any(fnmatch.fnmatch(r.key, w) for w in words)]
    if not rows:
        raise SystemExit(f"--commands-rows {patterns!r} picks no row; the rows: {', '.join(r.key for r in ROWS)}")
    return rows


def timed(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> tuple[float, int, str]:
    """Wall seconds, exit status and the output (stdout, then stderr) of one process."""
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.monotonic() - started, 124, f"killed after {timeout:.0f} s"
    return time.monotonic() - started, done.returncode, done.stdout + done.stderr


def last_line(output: str) -> str:
    lines = output.strip().splitlines()
    return lines[-1] if lines else ""


def total(output: str) -> str | None:
    """The score a check or grade printed ("24 / 24"), None when it printed none."""
    return next((f"{m[1]} / {m[2]}" for line in output.splitlines() if (m := TOTAL.match(line))), None)


def full_marks(score: str | None) -> bool:
    return score is not None and score.split(" / ")[0] == score.split(" / ")[1]


def unpack(commit: str, dest: Path) -> Tree:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return Tree("before", dest)


def imported_from(tree: Tree, log) -> str:
    """Where `autograder` comes from for a command of `tree`; it must be its root's autograder/, else the rows would time
    another tree's grader."""
    done = subprocess.run([sys.executable, "-c", "import autograder; print(autograder.__file__)"], cwd=tree.root,
                          env=tree.env(), capture_output=True, text=True, timeout=120)
    where = done.stdout.strip()
    log(f"{tree.name}, in {tree.root}: autograder imported from {where or done.stderr[-500:]}")
    if done.returncode or not Path(where).resolve().is_relative_to(tree.root.resolve() / "autograder"):
        raise RuntimeError(f"{tree.name}'s commands in {tree.root} import autograder from {where or '?'}, not its own")
    return where


def build_bundle(tree: Tree, out: Path, part: str | None, log) -> tuple[Path | None, str, float]:
    """The tree's student bundle (whole course, or one part) holding its solutions' files; (None, why) when the tree
    cannot build it. The bundle's own `autograder/` is then its commands' grader, compiled once as a student's first run
    would."""
    release = ["release", "--out", str(out), *(["--part", part] if part else [])]
    log(f"{tree.name}: {' '.join(release)}")
    seconds, status, tail = timed([sys.executable, "-m", "autograder", *release], tree.root, tree.env())
    if status:
        said = "release --out" + (f" --part {part}" if part else "")
        return None, f"`{said}` of {tree.name} exited {status}: {last_line(tail)[:400]}", seconds
    names = ("ngram.py", "backprop.py") if part else [p.name for p in sorted((tree.root / "solutions").glob("*.py"))]
    for name in names:
        shutil.copy(tree.root / "solutions" / name, out / name)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(out / "autograder")], capture_output=True)
    return out, "", seconds


def commands(row: Row, tree: Tree, bundles: dict) -> Command | str:
    """What `row` runs for `tree`, or why it cannot run there."""
    py = [sys.executable, "-m", "autograder"]
    if row.needs:
        bundle, _ = bundles[row.needs, tree.name]
        if bundle is None:  # why: below the tables
            return "no bundle: its `release --out` failed"
        here = Tree(tree.name, bundle)
        if row.key == "pytest":
            return Command([sys.executable, "-m", "pytest", "-k", "pad_sentence"], here)
        component = row.key.split(":")[1]
        return Command([*py, "check", *([] if component == "all" else [component])], here)
    if row.key in ("version", "help"):
        return Command([*py, f"--{row.key}"], tree)
    if row.key == "grade":
        return Command([*py, "grade", "solutions"], tree)
    component = row.key.split(":")[1]
    return Command([*py, "check", *([] if component == "all" else [component]), "--dir", "solutions"], tree)


def watch_available(tree: Tree) -> bool:
    _, status, tail = timed([sys.executable, "-m", "autograder", "check", "--help"], tree.root, tree.env(), timeout=120)
    return status == 0 and "--watch" in tail


def watch_saves(tree: Tree, component: str, folder: Path, saves: int, log) -> dict:
    """`check --watch component --dir folder` started once: seconds to its first result, then from each of `saves`
    rewrites of the component's file (one comment line changed, as an editor saves) to the next result printed (its
    "Total:" line), and whether each result had full marks."""
    path = folder / f"{component}.py"
    original = path.read_text()
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "check", "--watch", component, "--dir", str(folder)],
                            cwd=tree.root, env=tree.env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    results, tail = queue.Queue(), deque(maxlen=40)

    def read() -> None:
        for line in proc.stdout:
            tail.append(line)
            if m := TOTAL.match(line):
                results.put((time.monotonic(), m[1] == m[2]))
        results.put(None)

    threading.Thread(target=read, daemon=True).start()
    started, seconds, full = time.monotonic(), [], []
    try:
        got = results.get(timeout=WATCH_TIMEOUT)
        if got is None:
            raise RuntimeError(f"it ended before its first result (exit {proc.wait()}): {''.join(tail)[-800:]}")
        first = got[0] - started
        full.append(got[1])
        for i in range(saves):
            time.sleep(1.0)  # the watcher back to waiting; a result printed late is not the next save's
            while not results.empty():
                if results.get() is None:
                    raise RuntimeError(f"it ended (exit {proc.wait()}): {''.join(tail)[-800:]}")
            saved = time.monotonic()
            path.write_text(f"{original}\n# save {i + 1}\n")
            got = results.get(timeout=WATCH_TIMEOUT)
            if got is None:
                raise RuntimeError(f"it ended after save {i + 1} (exit {proc.wait()}): {''.join(tail)[-800:]}")
            seconds.append(got[0] - saved)
            full.append(got[1])
            log(f"  {tree.name} watch {component}: save {i + 1}/{saves}: {seconds[-1]:.2f} s")
    except queue.Empty:
        raise RuntimeError(f"no result within {WATCH_TIMEOUT} s: {''.join(tail)[-800:]}") from None
    finally:
        path.write_text(original)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # its own session, started above: Ctrl-C, as a student stops it
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return {"first": first, "seconds": seconds, "full_marks": all(full)}


def quiet_share(seconds: float = QUIET_SECONDS) -> float:
    """The share of one core the machine was busy over `seconds` while nothing of the benchmark ran. (Its own use
    during the run cannot be told from others': the CPU of sandboxed workers killed, not waited for, counts for no one.)"""
    busy = busy_cpu()
    time.sleep(seconds)
    return (busy_cpu() - busy) / seconds


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in read_lines("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor() or "unknown")
    mem_kb = next((int(line.split()[1]) for line in read_lines("/proc/meminfo") if line.startswith("MemTotal:")), 0)
    return (f"{cpu}, {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {mem_kb / (1 << 20):.1f} GiB, "
            f"{platform.platform()}, Python {platform.python_version()}, torch {metadata.version('torch')}")


def run(scratch: Path, log, runs: int = RUNS, rows: str | None = None) -> dict:
    chosen = picked(rows)
    quiet_before, clock = quiet_share(), time.monotonic()
    after = Tree("after", ROOT)
    log(f"before: commit {BEFORE}, unpacked with git archive")
    before = unpack(BEFORE, scratch / "before")
    trees = (before, after)
    for tree in trees:
        imported_from(tree, log)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(before.root / "autograder")], capture_output=True)

    bundles, releases, failures, notes = {}, {}, [], []
    for needs, part in (("bundle", None), ("part1", "1")):
        if any(r.needs == needs for r in chosen):
            for tree in trees:
                bundle, why, seconds = build_bundle(tree, scratch / f"{needs}-{tree.name}", part, log)
                bundles[needs, tree.name] = bundle, why
                releases[needs, tree.name] = None if bundle is None else seconds
                if bundle is not None:
                    imported_from(Tree(tree.name, bundle), log)
                else:  # the old tree's is said; the working tree's fails the bench: its students would have none
                    log(why)
                    (failures if tree is after else notes).append(why)

    log(f"the unit: python -c 'import torch' x {runs}")
    unit = [timed(TORCH, ROOT, after.env())[0] for _ in range(runs)]
    log(f"  {median(unit):.2f} s")

    figures = []
    for row in chosen:
        if row.key.startswith("watch:"):
            figures.append(watch_row(row, before, after, bundles, scratch, runs, log, failures))
            continue
        found = {tree.name: commands(row, tree, bundles) for tree in trees}
        measured = {name: {"seconds": [], "status": []} if isinstance(c, Command) else {"na": c} for name, c in found.items()}
        for i in range(runs):
            for tree in trees:
                command = found[tree.name]
                if isinstance(command, str):
                    continue
                seconds, status, output = timed(command.argv, command.tree.root, command.tree.env())
                m = measured[tree.name]
                m["seconds"].append(seconds)
                m["status"].append(status)
                scored = row.key == "grade" or row.key.startswith(("check:", "bundle:"))
                if scored:  # on the solutions' files: full marks, else the bench failed even where it exited 0
                    m.setdefault("totals", []).append(total(output))
                log(f"{row.key} {tree.name} {i + 1}/{runs}: {seconds:.2f} s, exit {status}"
                    + (f", Total: {m['totals'][-1]}" if scored else ""))
                if status or (scored and not full_marks(m["totals"][-1])):
                    m["tail"] = output[-1500:]
                    log(f"  FAILED: {output[-600:]}")
        for name, m in measured.items():
            if "tail" in m:
                failures.append(f"{row.label} in {VIEWS[row.needs]}, {name}: exit {', '.join(map(str, m['status']))}"
                                + (f", Total: {', '.join(map(str, m['totals']))}" if "totals" in m else "")
                                + f": {last_line(m['tail'])[:300]}")
        figures.append({"key": row.key, "label": row.label, "needs": row.needs, **measured})

    wall, quiet_after = time.monotonic() - clock, quiet_share()
    return {"before": BEFORE, "runs": runs, "unit": unit, "rows": figures, "failures": failures, "notes": notes,
            "machine": machine(),
            "releases": {f"{k[0]} {k[1]}": v for k, v in releases.items()},
            "skipped": [r.key for r in ROWS if r not in chosen], "wall": wall, "quiet": [quiet_before, quiet_after],
            "python": os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable}


def watch_row(row: Row, before: Tree, after: Tree, bundles: dict, scratch: Path, runs: int, log, failures: list[str]) -> dict:
    """After only: the watch mode is new. Its row says "not available" where the tree has no `check --watch`. In the
    course repo on a copy of solutions/; in the bundle, in the bundle's own folder, as a student runs it."""
    component = row.key.split(":")[1]
    out = {"key": row.key, "label": row.label, "needs": row.needs, "before": {"na": "none (new)"}}
    if not watch_available(after):
        log(f"{row.key}: `check --watch` is not available in the working tree")
        out["after"] = {"na": "not available (no `check --watch` yet)"}
        return out
    if row.needs:
        bundle = bundles[row.needs, after.name][0]
        if bundle is None:  # said among the failures: its `release --out` failed
            out["after"] = {"na": "no bundle"}
            return out
        where, folder = Tree(after.name, bundle), bundle
    else:
        where, folder = after, scratch / f"watch-{component}"
        shutil.copytree(after.root / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    log(f"{row.key}: check --watch {component}, {runs} saves")
    try:
        watched = watch_saves(where, component, folder, runs, log)
    except RuntimeError as e:
        failures.append(f"{row.label}, after: {e}")
        out["after"] = {"na": f"**failed**: {str(e).splitlines()[0][:200]}"}
        return out
    if not watched["full_marks"]:
        failures.append(f"{row.label}, after: a result without full marks on the solutions' files")
    out["after"] = {"seconds": watched["seconds"], "status": [0 if watched["full_marks"] else 1] * len(watched["seconds"]),
                    "first": watched["first"]}
    return out


# ---------------------------------------------------------------- the section


def _cells(m: dict, unit: float) -> list[str]:
    if "na" in m:
        return [m["na"].replace("|", "\\|"), ""]
    s = median(m["seconds"])
    return [f"{s:.2f}", f"{s / unit:.2f}" if s < unit else f"{s / unit:.1f}"]


def _status(m: dict) -> str:
    if "na" in m:
        return "-"
    codes = sorted(set(m["status"]))
    said = ", ".join(map(str, m["status"])) if len(codes) > 1 else str(codes[0])
    short = [t for t in m.get("totals", []) if not full_marks(t)]
    if short:
        said += f", Total {', '.join(sorted(set(map(str, short))))}"
    return f"**{said}: FAILED**" if any(codes) or short else said


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def section(f: dict, measured: str) -> str:
    unit = median(f["unit"])
    parts = [SECTION, measured,
             f"Each command a student or a TA types, run as `python -m autograder ...` by this venv's Python "
             f"(`{f['python']}`), each a process timed from start to exit, {_times(f['runs'])}, before and after "
             f"alternately, in one run. **Before** is commit {f['before']}, unpacked by `git archive` into a temporary "
             "folder; **after** is the working tree. Each command runs with its tree (or that tree's bundle) as its folder "
             "and PYTHONPATH, and imports that tree's own `autograder` package (checked before measuring), its bytecode "
             "written on the first run and reused after, as on a student's machine. Seconds are "
             f"medians of {f['runs']}; **imports** divides them by this machine's own `python -c \"import torch\"`, timed "
             f"{_times(f['runs'])} in the same run: median {unit:.2f} s (from {min(f['unit']):.2f} to {max(f['unit']):.2f}). "
             "A student's bundle is built once per tree by its own `release --out` (the seconds it took: "
             + (", ".join(f"{k} {v:.0f} s" for k, v in f["releases"].items() if v is not None) or "none built") + ").",
             f"Machine: {f['machine']}. With nothing of the benchmark running, it was busy "
             f"{f['quiet'][0]:.0%} of one core over {QUIET_SECONDS:g} s before the {f['wall'] / 60:.1f} minutes measured and "
             f"{f['quiet'][1]:.0%} after them: "
             + ("the machine was NOT otherwise idle, and the figures are less sure." if max(f["quiet"]) > QUIET_MOST
                else "the machine was otherwise idle.")]
    header = ["command", "before: s", "before: imports", "after: s", "after: imports", "after / before",
              "exit status (before; after)"]
    for needs, title in GROUPS.items():
        rows = [r for r in f["rows"] if r["needs"] == needs]
        if not rows:
            continue
        lines = []
        for r in rows:
            ratio = (f"{median(r['after']['seconds']) / median(r['before']['seconds']):.2f}"
                     if "na" not in r["before"] and "na" not in r["after"] else "")
            lines.append([r["label"], *_cells(r["before"], unit), *_cells(r["after"], unit), ratio,
                          f"{_status(r['before'])}; {_status(r['after'])}"])
        parts += [f"{title}:", table(header, lines)]
    watched = [r for r in f["rows"] if r["key"].startswith("watch:") and "first" in r["after"]]
    if any(r["key"].startswith("watch:") for r in f["rows"]):
        parts.append(f"The watch rows (after only): `check --watch` started once on a copy of solutions/ (the course repo) or "
                     "in the bundle holding their files; then its component's "
                     f"file rewritten {_times(f['runs'])} (one comment line changed, as an editor saves), a second apart, each "
                     "timed from the write to the end of the next result printed (its `Total:` line); exit status 0 when "
                     "every result had full marks."
                     + " From its start to the first result: "
                     + "; ".join(f"{r['after']['first']:.2f} s ({r['key'].split(':')[1]}, {VIEWS[r['needs']]})" for r in watched)
                     + ".")
    if f["notes"]:
        parts.append("Not measured before: " + "; ".join(n.replace("|", "\\|") for n in f["notes"]) + ".")
    if f["skipped"]:
        parts.append(f"Not measured in this run (`--commands-rows`): {', '.join(f['skipped'])}.")
    parts.append("Failures (a non-zero exit on the solutions' files): "
                 + ("; ".join(f["failures"]) if f["failures"] else "none."))
    return "\n\n".join(parts)
