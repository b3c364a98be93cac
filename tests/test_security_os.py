"""Security, operating-system side: one attack submission per threat, graded the way Gradescope grades it.

Each attack is solutions/ with code put at the top of NGramLM.sample, which only the sampling cases
call (one, which needs a particular request to follow it, sits in backprop). Every test checks that
(a) the attacked cases earn nothing, (b) every other case, backprop's included, keeps its marks,
(c) grading ends in bounded time and (d) nothing the attack started outlives the run.
Each attack is written to win (pass its cases, forge the score, or take the grader down) if the
defence it aims at were missing; the comment above each says how it would win. None of them uses
anything the static scans refuse, so each meets the walls at run time; where it can, it reports
what each wall answered (`reported`), and the test asserts that answer for the tier it ran in:
the error the OS gave (EPERM from seccomp or a foreign uid, ENOENT where bubblewrap mounts nothing,
EAGAIN from RLIMIT_NPROC...), or what the isolation record says held.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from attacks import ROOT, SOLUTIONS, grade_cli, own_student_processes, reported, require_tier, tier
from conftest import grade_folder, solutions_with

pytestmark = pytest.mark.slow  # every test here grades or starts a process

SAMPLE = "        words = []\n        while len(words) < max_len:"
ATTACKED = "ngram.sampling"  # the only check that calls NGramLM.sample
COMPONENTS = ["ngram", "backprop"]
SANDBOX = Path(__file__).resolve().parents[1] / "autograder" / "sandbox"
# What the kernel answers, as Python words it (OSError.strerror)
EPERM, EACCES, ENOENT, EAGAIN, ENETUNREACH = (os.strerror(e) for e in (errno.EPERM, errno.EACCES, errno.ENOENT, errno.EAGAIN, errno.ENETUNREACH))


def attack(tmp_path: Path, code: str, **values) -> Path:
    """solutions/ with `code` run first in NGramLM.sample; each NAME in `values` is replaced by repr(value)."""
    code = textwrap.dedent(code)
    for name, value in values.items():
        code = code.replace(name, repr(value))
    return solutions_with(tmp_path, "ngram.py", SAMPLE, textwrap.indent(code, " " * 8) + SAMPLE)


def case_rows(graded, names: bool = False) -> list[tuple[str, str, float, float, str]]:
    """(component, check, score, max_score, output, or the case's name) per case, from the CLI's
    results.json or from an in-process run."""
    if isinstance(graded.results, dict):
        return [(t["tags"][0], t["extra_data"]["check"], t["score"], t["max_score"],
                 t["name"].split("] ", 1)[1] if names else t["output"]) for t in graded.results["tests"]]
    return [(r.case.component, r.case.check, r.score, r.max_score, r.case.name if names else r.output) for r in graded.results]


def assert_only_attacked_cases_lost(graded, feedback: str = "") -> None:
    rows = case_rows(graded)
    assert {component for component, *_ in rows} == set(COMPONENTS), rows
    lost = {check for _, check, score, most, _ in rows if score < most}
    assert lost == {ATTACKED}, [(check, output) for _, check, score, most, output in rows if score < most]
    assert all(score == 0 for _, check, score, _, _ in rows if check == ATTACKED)
    outputs = [output for _, check, *_, output in rows if check == ATTACKED]
    assert all(feedback in output for output in outputs), outputs


def attacked_output(graded) -> str:
    """The feedback of the first attacked case."""
    return next(output for _, check, *_, output in case_rows(graded) if check == ATTACKED)


def assert_cli_finished(graded, within: float) -> None:
    """The grader exited normally, in time, and its results.json adds up."""
    assert graded.returncode == 0, graded.output[-4000:]
    assert graded.seconds < within, graded.seconds
    tests = graded.results["tests"]
    assert graded.results["score"] == sum(t["score"] for t in tests)
    assert graded.results["extra_data"]["max_score"] == sum(t["max_score"] for t in tests)


def assert_nothing_left() -> None:
    assert own_student_processes() == []


@pytest.fixture(scope="module")
def here():
    """The tier the grader picks on this machine: one probe for the module."""
    return tier()


def missing(wall: str, here) -> str | None:
    """Why this machine cannot give a worker `wall` ("seccomp" or "network namespace"); None when it can."""
    if wall == "seccomp":
        probe = f"import sys; sys.path.insert(0, {str(SANDBOX)!r}); import seccomp; seccomp.install([], [])"
    elif here.bwrap is not None:
        return None  # bwrap --unshare-net, and the tier's probe showed bwrap works
    else:
        flags = 0x40000000 if os.geteuid() == 0 else 0x50000000  # CLONE_NEWNET, and CLONE_NEWUSER unprivileged
        probe = f"import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); sys.exit(libc.unshare({flags}) and os.strerror(ctypes.get_errno()))"
    done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else f"{wall} unavailable here: {(done.stderr or done.stdout).strip()[-300:]}"


# ---- 1. results.json ------------------------------------------------------------------------------

# Wins if the grader's final write were not the last word: the forged file would stay, or a grandchild
# that escaped the sweep would rewrite it later. The path is known (on Gradescope it is always
# /autograder/results/results.json), or read from the command line of the grader above the worker.
# (Only that grader's: at the same-user tier a wider search would forge other runs' results on this machine.)
FORGE = r'''
import json, os, sys, time
forged = json.dumps({"score": 1e6, "max_score": 1.0, "output": "FORGED", "tests": []})
paths, pid = {RESULTS}, os.getppid()
while pid > 1:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat") as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        break
    if b"--results" in argv[:-1]:
        paths.add(os.path.join(f"/proc/{pid}/cwd", argv[argv.index(b"--results") + 1].decode()))
    pid = parent
written = {}
for path in paths:
    try:
        with open(path, "w") as f:
            f.write(forged)
        written[path] = "written"
    except OSError as e:
        written[path] = e.strerror
def rewrite():
    open('rewriter-up', 'w').close()
    time.sleep(1.5)
    end = time.time() + 30
    while time.time() < end:
        for path in paths:
            try:
                with open(path, 'w') as f:
                    f.write(forged)
            except OSError:
                pass
        time.sleep(0.2)
child = os.fork()
if child == 0:  # double fork: the grandchild has its own session and no parent of ours to wait for it
    try:
        os.setsid()
        if os.fork() == 0:
            rewrite()  # in a copy of the worker: no other program may run there
    finally:
        os._exit(0)
os.waitpid(child, 0)
end = time.monotonic() + 5
while not os.path.exists("rewriter-up") and time.monotonic() < end:
    time.sleep(0.05)
raise RuntimeError("results forged: " + json.dumps({"written": written, "rewriter up": os.path.exists("rewriter-up")}))
'''


def test_results_cannot_be_forged_or_rewritten_later(tmp_path, here):
    """Threat: the submission writes a forged results.json and leaves a detached process to rewrite it after grading.
    Defences: the results file out of the worker's reach (not in bwrap's mounts; hidden at the root tier), the
    grader's own results written last (all that stands at the same-user tier), and the reaper for the rewriter."""
    results = tmp_path / "results" / "results.json"  # where grade_cli has the grader write them
    graded = grade_cli(attack(tmp_path, FORGE, RESULTS=str(results)), tmp_path, COMPONENTS)
    assert_cli_finished(graded, within=120)
    assert_only_attacked_cases_lost(graded, "results forged: ")
    report = reported(attacked_output(graded), "results forged: ")
    assert report["written"][str(results)] == (ENOENT if here.bwrap else EACCES if here.name == "root" else "written"), report
    assert report["rewriter up"], report
    assert graded.results["output"] != "FORGED" and graded.results["extra_data"]["max_score"] > 1
    assert_nothing_left()  # the rewriter, which was running, was killed with the worker
    # read again once the rewriter would have woken: the grader's results still stand
    time.sleep(0.5)
    assert json.loads(results.read_text()) == graded.results


# ---- 2. exiting -----------------------------------------------------------------------------------

# Wins if a clean exit (SystemExit, status 0) counted as a pass or stopped the grading.
EXIT = r'''
import os, sys
if self.n == 2:
    sys.exit(0)
os._exit(0)
'''


def test_exit_mid_case_fails_only_that_case(tmp_path):
    """Threat: sys.exit and os._exit in the middle of a case. Defences: the worker reports SystemExit as the student's
    exception; a worker that exits fails its case and is replaced; only the parent's comparison passes a case."""
    graded = grade_cli(attack(tmp_path, EXIT), tmp_path, COMPONENTS)
    assert_cli_finished(graded, within=120)
    assert_only_attacked_cases_lost(graded)
    first, second = (output for _, check, *_, output in case_rows(graded) if check == ATTACKED)  # bigram, then trigram
    assert first.startswith("Your code raised SystemExit: 0"), first
    assert second.startswith("Your code crashed the process running it: the worker process exited with status 0"), second
    assert_nothing_left()


# ---- 3. killing the grader ------------------------------------------------------------------------

# Wins if any signal reached the grader: it dies, and results.json keeps its fail-closed zero. It reports
# which processes running `autograder grade` it could see, and what each attempt got back.
KILL = r'''
import fcntl, json, os, signal
tried = {}


def attempt(fn, *args):
    try:
        fn(*args)
        return "sent"
    except OSError as e:
        return e.strerror


def tally(what, answer):
    tried.setdefault(what, {})
    tried[what][answer] = tried[what].get(answer, 0) + 1


graders = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"autograder\0grade\0" in f.read():
                graders.append(int(pid))
    except OSError:
        pass
parent = os.getppid()
above, pid = [parent], parent  # the parent, and every process above it but init
while pid > 1:
    try:
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        break
    if pid > 1:
        above.append(pid)
# a file's owner gets SIGIO (or the signal F_SETSIG picks) when it is ready: the kernel signals on our behalf
r, w = os.pipe()
tried["F_SETOWN"] = attempt(fcntl.fcntl, r, fcntl.F_SETOWN, parent)
tried["F_SETSIG"] = attempt(fcntl.fcntl, r, fcntl.F_SETSIG, signal.SIGKILL)
tried["O_ASYNC"] = attempt(fcntl.fcntl, r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
os.write(w, b"x")
tried["kill(parent)"] = attempt(os.kill, parent, signal.SIGKILL)
tried["kill(-1)"] = attempt(os.kill, -1, signal.SIGKILL)
for pid in above:
    try:
        group = os.getpgid(pid)
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError as e:
        tally("processes above, unreadable", e.strerror)
        continue
    if group > 1 and group != os.getpgrp():  # killpg(1) is kill(-1), and 0 or our own group would kill only us
        tally("killpg(groups above)", attempt(os.killpg, group, signal.SIGKILL))
    for tid in threads:
        tally("kill(threads above)", attempt(os.kill, tid, signal.SIGKILL))
if EVERYONE:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) != os.getpid():
            tally("kill(every other pid)", attempt(os.kill, int(pid), signal.SIGKILL))
raise RuntimeError("the grader survived: " + json.dumps({"parent": parent, "graders in sight": graders, "tried": tried}))
'''


def test_the_grader_cannot_be_killed(tmp_path, here):
    """Threat: signals to the grader, its threads, its ancestors and their groups, kill(-1), and an I/O owner set to the grader.
    Defences: bwrap's PID namespace, where the grader is out of sight; elsewhere EPERM for every signal aimed at it,
    from the kernel (a foreign uid, at the root tier) or from seccomp (the same-user tier); and seccomp's EPERM
    for F_SETOWN, whatever the tier."""
    if here.name == "same-user" and (why := missing("seccomp", here)):
        pytest.skip(f"at the same-user tier only the seccomp filter keeps a kill from the grader (and from pytest): {why}")
    # At the same-user tier every process of the user is in sight and only the grader's line is protected:
    # killing all of them would take down the developer's session, not test the grader.
    everyone = here.name != "same-user"
    graded = grade_cli(attack(tmp_path, KILL, EVERYONE=everyone), tmp_path, COMPONENTS)
    assert_cli_finished(graded, within=120)
    assert_only_attacked_cases_lost(graded, "the grader survived: ")
    report = reported(attacked_output(graded), "the grader survived: ")
    if here.bwrap:
        assert report["graders in sight"] == [], report
    else:  # the grader is the worker's parent: every signal at it and at its ancestors, groups and threads got EPERM
        tried = report["tried"]
        assert report["parent"] in report["graders in sight"] and tried["kill(parent)"] == EPERM, report
        assert set(tried["kill(threads above)"]) == set(tried["killpg(groups above)"]) == {EPERM}, report
    if graded.results["extra_data"]["isolation"]["held"]["seccomp"] == "loaded":
        assert report["tried"]["F_SETOWN"] == EPERM, report
    assert_nothing_left()


# ---- 4. fork storm --------------------------------------------------------------------------------

# Wins if process limits or the sweep failed: the storm outlives the case (sleeping 120 s), starves the
# other component, or survives the sweep, which then fails the run. The storm's first process reports
# the first fork the kernel refused it.
STORM = r'''
import os, time
r, w = os.pipe()
if os.fork() == 0:
    try:
        os.setsid()  # out of the worker's process group
        first, refused = os.getpid(), None
        end = time.monotonic() + 3
        while time.monotonic() < end:
            try:
                os.fork()  # parent and child both go on forking
            except OSError as e:
                if os.getpid() == first and refused is None:
                    refused = e.strerror
                    os.write(w, refused.encode())
                time.sleep(0.01)
        if os.getpid() == first and refused is None:
            os.write(w, b"none")
        time.sleep(120)
    finally:
        os._exit(0)
os.close(w)
raise RuntimeError(f"fork storm started; the first fork refused: {os.read(r, 200).decode()}")
'''


def test_a_fork_storm_is_bounded_and_reaped(tmp_path, here):
    """Threat: a fork storm whose processes detach and outlive the case. Defences: RLIMIT_NPROC, whose EAGAIN
    bounds the storm, and the reaper (or bwrap's PID namespace), which kills what is left when the component ends."""
    if here.student_id is None and os.geteuid() == 0:
        pytest.skip("the worker would run as root, which RLIMIT_NPROC does not bind: a storm would be unbounded")
    graded = grade_cli(attack(tmp_path, STORM), tmp_path, COMPONENTS)
    assert_cli_finished(graded, within=60)
    assert_only_attacked_cases_lost(graded, EAGAIN)  # the next case's storm is refused its very first fork
    assert f"fork storm started; the first fork refused: {EAGAIN}" in attacked_output(graded)
    assert_nothing_left()


# ---- 5. network -----------------------------------------------------------------------------------

TOKEN = "answer-from-the-network"


class Listener:
    """A TCP server in this process that counts connections and answers each with TOKEN."""

    def __init__(self, family: int, host: str):
        self.sock = socket.create_server((host, 0), family=family)
        self.sock.settimeout(0.1)
        self.address = (int(family), host, self.sock.getsockname()[1])
        self.connections = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            with conn:
                conn.sendall(TOKEN.encode())

    def close(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listeners():
    started = [Listener(socket.AF_INET, "127.0.0.1")]
    try:
        started.append(Listener(socket.AF_INET6, "::1"))
    except OSError:
        pass  # no IPv6 loopback here: the IPv4 one is still tried
    yield started
    for listener in started:
        listener.close()


# Wins if the network is open: the token from the server passes the cases (a real attack would fetch answers).
NETWORK = r'''
if getattr(NGramLM, "reached", None) is None:
    import os, socket
    tried = {}
    for family, host, port in ADDRESSES:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(3)
                s.connect((host, port))
                tried[host] = s.recv(64).decode()
        except OSError as e:
            tried[host] = str(e)
    # a child process (no other program may run: a forked copy of the worker)
    family, host, port = ADDRESSES[0]
    read, write = os.pipe()
    if os.fork() == 0:
        try:
            answer = socket.create_connection((host, port), 3).recv(64).decode()
        except OSError as e:
            answer = str(e)
        os.write(write, answer.encode()[:300])
        os._exit(0)
    os.close(write)
    tried["child"] = os.read(read, 300).decode()
    NGramLM.reached = any(TOKEN in answer for answer in tried.values())
    NGramLM.tried = tried
if not NGramLM.reached:
    import json
    raise RuntimeError("no network: " + json.dumps(NGramLM.tried))
'''


def test_no_network(rubric, tmp_path, here, listeners):
    """Threat: connecting to a server (IPv4 and IPv6 loopback, also from a forked child) to fetch answers.
    Defences: seccomp, which refuses an AF_INET or AF_INET6 socket (EACCES), whatever the tier; behind it, or where it
    does not load, a network namespace with no interface up (ENETUNREACH). The isolation record says which held."""
    folder = attack(tmp_path, NETWORK, ADDRESSES=[listener.address for listener in listeners], TOKEN=TOKEN)
    run = grade_folder(rubric, folder, tmp_path, component_ids=COMPONENTS, tier=here)
    assert [listener.connections for listener in listeners] == [0] * len(listeners)
    assert_only_attacked_cases_lost(run, "no network: ")
    refused = EACCES if run.isolation["held"]["seccomp"] == "loaded" else ENETUNREACH
    report = reported(attacked_output(run), "no network: ")
    assert len(report) == len(listeners) + 1 and all(refused in answer for answer in report.values()), (run.isolation["held"], report)
    assert_nothing_left()


# ---- 6. junk on descriptors -----------------------------------------------------------------------

# Wins if the parent trusted what comes down the reply pipe: a malformed frame would crash or hang it.
JUNK = r'''
import os, random, struct
# a frame header that promises 1 KiB of JSON, then random bytes, on every descriptor (the reply pipe too)
junk = struct.pack("<I", 1024) + random.Random(0).randbytes(8192)
for fd in os.listdir("/proc/self/fd"):
    try:
        os.write(int(fd), junk)
    except OSError:
        pass
'''


def test_junk_on_every_descriptor_fails_only_that_case(tmp_path):
    """Threat: random bytes written to every inherited descriptor, the reply pipe included, then a normal return.
    Defence: the parent's checks on every frame of a reply; the worker that sent it is replaced."""
    graded = grade_cli(attack(tmp_path, JUNK), tmp_path, COMPONENTS)
    assert_cli_finished(graded, within=120)
    assert_only_attacked_cases_lost(graded, "Your code sent back something the grader cannot accept: the worker sent a malformed reply")
    assert_nothing_left()


# Wins if the grader wrote requests with no deadline: it blocks for ever on a pipe that the worker keeps
# open but no longer reads (shrunk to one page, so that the next request, of about 6 KB, cannot fit), and
# no results but the fail-closed zero are ever written. Needs no privilege, in any tier.
STALL = r'''
if contexts.shape == (9, 4):  # "FFNN-LM backward, other sizes": its next request is larger than a page
    import fcntl, os
    fds = [int(fd) for fd in os.listdir("/proc/self/fd")]  # started from nothing or forked: its request pipe is the pipe it reads
    request_fd, = [fd for fd in fds if os.path.exists(f"/proc/self/fd/{fd}") and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
                   and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY]
    held = os.dup(request_fd)  # the request pipe stays open here, and nothing will read it
    fcntl.fcntl(held, fcntl.F_SETPIPE_SZ, 4096)
    r, w = os.pipe()
    os.dup2(r, request_fd)  # the worker waits for its next request on a pipe nobody writes
'''
FORWARD = '    E, W, b, U, c = (params[k] for k in ("E", "W", "b", "U", "c"))'


def test_a_worker_that_stops_reading_cannot_hang_the_grader(tmp_path, monkeypatch):
    """Threat: the worker keeps its request pipe open but stops reading it, so that the grader cannot write the next request.
    Defence: requests are written under the case's deadline, so the case times out and the run goes on."""
    folder = solutions_with(tmp_path, "backprop.py", FORWARD, textwrap.indent(textwrap.dedent(STALL), " " * 4) + FORWARD)
    monkeypatch.setattr("attacks.CLI_TIMEOUT", 60)
    try:
        graded = grade_cli(folder, tmp_path, COMPONENTS)
    except subprocess.TimeoutExpired:
        for pid in own_student_processes():  # without bwrap the worker outlives the killed grader
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        pytest.fail("the grader hung: it blocks for ever writing a request to a worker that no longer reads its pipe")
    assert_cli_finished(graded, within=60)
    lost = [(check, name) for _, check, score, most, name in case_rows(graded, names=True) if score < most]
    assert lost == [("backprop.ffnn_backward", "FFNN-LM backward, other sizes")], lost
    output = next(output for _, _, score, most, output in case_rows(graded) if score < most)
    assert output.startswith("Timed out: the case did not finish within"), output
    assert_nothing_left()


# ---- 7. reading the grader's files ----------------------------------------------------------------

# Each of the next attacks passes its cases when it got hold of the reference (the body below it is
# the reference, since the submission is a copy of solutions/), and fails them otherwise.

# Wins where the project can be read: its location is known (the student has read the repository; on
# Gradescope it is /autograder/source), and found from the Python running the worker, the editable
# install's map, and the working folder of every process above the worker.
READ_PROJECT = r'''
if getattr(NGramLM, "stolen", None) is None:
    import glob, os, re, sys
    own = os.path.realpath("ngram.py")
    roots = {PROJECT, os.path.dirname(sys.prefix), os.path.dirname(os.path.dirname(os.path.dirname(sys.executable)))}
    for finder in glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "__editable__*finder.py")):
        with open(finder) as f:
            roots.update(re.findall(r"'(/[^']*)/autograder'", f.read()))
    pid = os.getppid()
    while pid > 1:
        roots.add(f"/proc/{pid}/cwd")
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    tried = {}
    for root in sorted(roots):
        for name, sign in (("solutions/ngram.py", "# BEGIN SOLUTION"), ("grading.yaml", "ngram.sampling"),
                           ("autograder/cases/ngram.py", "@check")):
            path = os.path.join(root, name)
            try:
                with open(path) as f:
                    tried[path] = sign in f.read() and os.path.realpath(path) != own
            except OSError as e:
                tried[path] = e.strerror
    NGramLM.stolen = [path for path, got in tried.items() if got is True]
    NGramLM.tried = tried
if not NGramLM.stolen:
    import json
    raise RuntimeError("nothing read: " + json.dumps(NGramLM.tried))
'''


def test_solutions_and_rubric_cannot_be_read(rubric, tmp_path, here):
    """Threat: reading solutions/, grading.yaml and the cases from the project's folder, found from the worker's Python or a process's cwd.
    Defences: bubblewrap mounts none of the project but its Python (ENOENT); without bwrap, the root tier takes the
    permissions of others off the grader's files (EACCES)."""
    require_tier("root", "bubblewrap")
    run = grade_folder(rubric, attack(tmp_path, READ_PROJECT, PROJECT=str(ROOT)), tmp_path, component_ids=COMPONENTS, tier=here)
    assert_only_attacked_cases_lost(run, "nothing read: ")
    report = reported(attacked_output(run), "nothing read: ")
    wanted = [f"{ROOT}/{name}" for name in ("solutions/ngram.py", "grading.yaml", "autograder/cases/ngram.py")]
    assert [report.get(path) for path in wanted] == [ENOENT if here.bwrap else EACCES] * len(wanted), report
    assert_nothing_left()


# Wins if the grader, or the template that forked the worker, were dumpable: the working folder, root and open
# files of either lead to solutions/ without knowing where the project is. The attack looks at its parent (the
# template) and at the parent's parent (the grader; at the bubblewrap tiers bwrap's own init, the grader being
# out of sight).
READ_PARENT = r"""
if getattr(NGramLM, "stolen", None) is None:
    import os
    tried, NGramLM.parents = {}, []
    pid = os.getppid()
    for _ in range(2):
        proc = f"/proc/{pid}"
        try:
            with open(proc + "/cmdline", "rb") as f:
                program = os.path.basename(f.read().split(b"\0")[0].decode())
            with open(proc + "/stat", "rb") as f:
                above = int(f.read().rsplit(b")", 1)[1].split()[1])
        except OSError as e:
            program, above = e.strerror, 0
        NGramLM.parents.append([pid, program])
        paths = [f"{proc}/cwd/solutions/ngram.py", f"{proc}/cwd/grading.yaml"]
        try:
            paths.append(f"{proc}/root{os.readlink(proc + '/cwd')}/solutions/ngram.py")
        except OSError as e:
            tried[f"readlink {proc}/cwd"] = e.strerror
        try:
            for fd in os.listdir(proc + "/fd"):
                target = os.readlink(f"{proc}/fd/{fd}")
                if target.startswith("/"):  # files only: opening one of its pipes would block
                    paths.append(f"{proc}/fd/{fd}")
        except OSError as e:
            tried[f"{proc}/fd"] = e.strerror
        for path in paths:
            try:
                with open(path, errors="replace") as f:
                    text = f.read(1 << 20)
                tried[path] = "# BEGIN SOLUTION" in text or "ngram.sampling" in text
            except OSError as e:
                tried[path] = e.strerror
        if above <= 1:
            break
        pid = above
    NGramLM.stolen = [path for path, got in tried.items() if got is True]
    NGramLM.tried = tried
if not NGramLM.stolen:
    import json
    raise RuntimeError("nothing read: " + json.dumps({"parents": NGramLM.parents, "tried": NGramLM.tried}))
"""


def test_the_grader_process_cannot_be_read_through_proc(rubric, tmp_path, here):
    """Threat: reaching solutions/ through /proc/<pid>/cwd, /root and /fd of the worker's parent (the template it was
    forked from) and of the grader.
    Defences: both are undumpable, so the kernel refuses every look at them (EACCES); with bwrap the grader is
    also out of sight, in the PID namespace's parent."""
    run = grade_folder(rubric, attack(tmp_path, READ_PARENT), tmp_path, component_ids=COMPONENTS, tier=here)
    assert_only_attacked_cases_lost(run, "nothing read: ")
    report = reported(attacked_output(run), "nothing read: ")
    (template, program), *above = report["parents"]
    assert program == "python" and set(report["tried"].values()) == {EACCES}, report
    if here.bwrap:
        assert above == [], report  # the template's parent is the namespace's init (pid 1): the grader is not in sight
    else:
        assert [pid for pid, _ in above] == [os.getpid()], report
    assert_nothing_left()


# ---- 8. importing the grader ----------------------------------------------------------------------

# Wins where the grader's package can be imported: it names the project root, hence the reference.
# The imports sit where the scan before grading cannot see them: in a module written at run time,
# and in fresh interpreters (with the venv's site, and with the project put on sys.path by hand).
IMPORT_GRADER = r'''
if getattr(NGramLM, "stolen", None) is None:
    import glob, os, re, subprocess, sys
    use = ("from autograder.commands import PROJECT_ROOT\n"
           "from autograder.reference import Reference\n"
           "ANSWER = str(Reference(PROJECT_ROOT / 'solutions').ngram.pad_sentence(['a'], 2))\n")
    want = str(["<s>", "a", "</s>"])
    tried = {}
    shim = os.path.abspath("shim")
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, "grader_shim.py"), "w") as f:
        f.write(use)
    sys.path.insert(0, shim)
    try:
        import grader_shim
        tried["in the worker"] = grader_shim.ANSWER
    except Exception as e:
        tried["in the worker"] = repr(e)
    roots = {os.path.dirname(sys.prefix)}
    for finder in glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "__editable__*finder.py")):
        with open(finder) as f:
            roots.update(re.findall(r"'(/[^']*)/autograder'", f.read()))
    runs = {"child": [sys.executable, "-c", use + "print(ANSWER)"]}
    for root in sorted(roots):
        runs[f"child with {root}"] = [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {root!r})\n" + use + "print(ANSWER)"]
    for what, argv in runs.items():
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        tried[what] = (done.stdout + done.stderr).strip()[-300:]
    NGramLM.stolen = [what for what, answer in tried.items() if want in answer]
    NGramLM.tried = {what: (answer.strip().splitlines() or [""])[-1][-200:] for what, answer in tried.items()}
if not NGramLM.stolen:
    import json
    raise RuntimeError("grader not imported: " + json.dumps(NGramLM.tried))
'''


def test_the_grader_package_cannot_be_imported(rubric, tmp_path, here):
    """Threat: importing autograder (by the installed name and by its path) to reach the reference.
    Defences: in the worker, the audit hook refuses any import once sys.path holds a folder of the student's, and
    refuses starting a fresh interpreter (behind it, seccomp refuses exec: tests/test_seccomp.py); behind both, the
    package is not mounted (bwrap) or not readable (root tier)."""
    require_tier("root", "bubblewrap")
    run = grade_folder(rubric, attack(tmp_path, IMPORT_GRADER), tmp_path, component_ids=COMPONENTS, tier=here)
    assert_only_attacked_cases_lost(run, "Refused at run time: ")
    said = attacked_output(run)
    assert "refused an import after sys.path was changed (ngram.py, line " in said, said
    assert "refused starting another program (subprocess.Popen)" in said, said
    assert_nothing_left()


# ---- 9. CPU, memory, output -----------------------------------------------------------------------

# Each wins if the case had no time limit, memory limit or output sink, or if the detached child that
# does the same outlived the worker. (worker code, child code, feedback)
EXHAUSTION = {
    "loops": ("while True:\n    pass\n", "while True:\n    pass\n", "Timed out: the case did not finish within 3 s"),
    "exhausts memory": (
        "hog = []\nwhile True:\n    hog.append(np.empty(1 << 27))\n",
        "import mmap, time\nhog = []\ntry:\n    while True:\n        hog.append(mmap.mmap(-1, 1 << 27, flags=mmap.MAP_PRIVATE))\nexcept OSError:\n    time.sleep(120)\n",
        "Your code raised MemoryError",  # RLIMIT_DATA
    ),
    "floods output": (
        "import os\nwhile True:\n    print('x' * 65536)\n    os.write(2, b'y' * 65536)\n",
        "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n    os.write(2, b'y' * 65536)\n",
        "Timed out: the case did not finish within 3 s",  # its output goes to /dev/null
    ),
}
# A detached child (its own session) doing the same: a forked copy of the worker, as no other program may run there.
EXHAUST = """
import os, time
if os.fork() == 0:
    os.setsid()
    open("child-up", "w").close()
{child}
    os._exit(0)
while not os.path.exists("child-up"):  # the child is running before the worker starts
    time.sleep(0.05)
"""


@pytest.mark.parametrize("behaviour", list(EXHAUSTION))
def test_exhaustion_is_contained_and_reaped(quick_rubric, tmp_path, here, behaviour):
    """Threat: an endless loop, memory exhaustion or an output flood, in the worker and in a detached child.
    Defences: the parent's deadline for each case, RLIMIT_DATA, output sent to /dev/null, and the reaper."""
    worker, child, feedback = EXHAUSTION[behaviour]
    folder = attack(tmp_path, EXHAUST.format(child=textwrap.indent(child, "    ")) + worker)
    started = time.monotonic()
    run = grade_folder(quick_rubric, folder, tmp_path, component_ids=COMPONENTS, visible_only=True, tier=here)
    assert time.monotonic() - started < 60
    assert_only_attacked_cases_lost(run, feedback)
    assert_nothing_left()


# ---- 10. the tier is said and recorded ------------------------------------------------------------

@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    return grade_cli(SOLUTIONS, tmp_path_factory.mktemp("plain"), ["ngram"], "--visible-only")


def test_the_isolation_tier_is_printed_and_recorded(plain_run, here):
    """Threat: grading silently under weaker walls than expected; the tier must be said and recorded."""
    assert plain_run.returncode == 0, plain_run.output[-4000:]
    printed = " ".join(plain_run.output.split())  # the console wraps long lines
    assert f"isolation: {here.name} ({here.guarantees})" in printed
    isolation = plain_run.results["extra_data"]["isolation"]
    assert (isolation["tier"], isolation["guarantees"]) == (here.name, here.guarantees)
    assert isolation["notes"][: len(here.notes)] == list(here.notes)


@pytest.mark.parametrize("wall, key, value", [("seccomp", "seccomp", "loaded"), ("network namespace", "network_namespace", True)])
def test_the_walls_that_held_are_recorded(plain_run, here, wall, key, value):
    """Threat: a wall that silently failed to go up; what held is recorded for each run."""
    held = plain_run.results["extra_data"]["isolation"]["held"]
    if held.get(key) != value and (why := missing(wall, here)):
        pytest.skip(why)
    assert held[key] == value, held
