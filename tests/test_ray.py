"""`grade-all --backend ray` on real Ray: an embedded Ray grades a batch into the local backend's CSV (a submission's
timing cases graded apart from its other cases and merged back), a two-node cluster on this machine loses the node
grading and still grades every submission once, and a part asking for a GPU that no node has ends as infra_error
within its deadline. Every Ray here binds to loopback and authenticates with a token of its own."""
from __future__ import annotations

import csv
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SOLUTIONS, solutions_with, with_staff_tests
from test_batch import _until_dead, _until_lines, descendants, small_rubric

from autograder.batch.cluster import Shipped
from autograder.batch.inputs import Entry
from autograder.cli import main
from autograder.terminal import USAGE_ERROR

# A Ray this test module starts or joins: one machine's, on loopback (Ray's own switch for that), with a fresh token.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0"}


def grade_all(*args, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "grade-all", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def test_a_submission_reaches_its_node_as_the_driver_read_it(tmp_path):
    """What a node grades has the content digest the journal keys the grading by: a folder's files (nested, binary), a
    single file."""
    folder = tmp_path / "class" / "1001"
    (folder / "hw" / "data").mkdir(parents=True)
    (folder / "hw" / "ngram.py").write_text("x = 1\n")
    (folder / "hw" / "data" / "blob.bin").write_bytes(bytes(range(256)))
    (tmp_path / "class" / "1002.ipynb").write_text("{}")
    for path in (folder, tmp_path / "class" / "1002.ipynb"):
        node = tmp_path / "node" / path.name
        node.parent.mkdir(exist_ok=True)
        written = Shipped.read(path).write(node.parent)
        assert written == node and Entry(path.stem, written).digest() == Entry(path.stem, path).digest()


def test_the_ray_backend_is_asked_for_plainly(tmp_path, capsys, monkeypatch):
    (tmp_path / "class").mkdir()
    assert main(["grade-all", str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--address", "127.0.0.1:6379"]) == USAGE_ERROR
    assert "--address names a Ray cluster to join: give --backend ray too" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # as where the extra is not installed
    (tmp_path / "class" / "1001").mkdir()
    assert main(["grade-all", str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--backend", "ray",
                 "--address", "127.0.0.1:6379"]) == USAGE_ERROR
    assert "--backend ray needs Ray, which is not installed: pip install -e '.[ray]'" in capsys.readouterr().err


def timed_rubric(tmp_path: Path, timing_only: bool = False) -> Path:
    """ngram's first cases, and lstm cut to lstm_step's case and the timing case on small shapes, measured for a second
    at most; any ratio under 1000 earns the timing points, so that a correct submission's score does not depend on the
    machine. `timing_only`: the timing case alone."""
    spec = yaml.safe_load((ROOT / "grading.yaml").read_text())
    spec["solutions"] = str(SOLUTIONS)
    spec["defaults"]["timeout"] = 10
    spec["timing"].update(without_gpu="grade", full_until=1000, zero_at=1001, flag_below=1e-6, seconds=1)
    lstm = spec["components"]["lstm"]
    lstm["cases"] = [next(k for k in lstm["cases"] if k["check"] == "lstm.step"),
                     {**next(k for k in lstm["cases"] if k["check"] == "lstm.speed"), "params": {"cpu": [4, 8, 16, 16]}}]
    spec["components"]["ngram"]["cases"] = spec["components"]["ngram"]["cases"][:4]  # a part to merge with, at little cost
    lstm["unittests"] = []  # ngram keeps its staff tests: the nodes must get their files (cluster._stage)
    parts = {"counting": ["ngram"], "recurrent": ["lstm"]}
    if timing_only:
        lstm["cases"] = lstm["cases"][1:]
        del parts["counting"]
    spec["parts"] = [{"name": name, "components": ids} for name, ids in parts.items()]
    spec["components"] = {cid: spec["components"][cid] for ids in parts.values() for cid in ids}
    path = tmp_path / "rubric" / "grading.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with_staff_tests(path.parent)
    return path


def folder_of_submissions(tmp_path: Path, folders: dict[str, dict[str, str]]) -> Path:
    root = tmp_path / "class"
    for sid, files in folders.items():
        (root / sid).mkdir(parents=True)
        for name, text in files.items():
            (root / sid / name).write_text(text)
    return root


def rows(out: Path) -> dict[str, dict]:
    return {r["submission_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}


def journal(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_an_embedded_ray_grades_a_batch_into_the_local_backends_csv_and_resumes_after_the_cluster_is_lost(tmp_path):
    """Four submissions, each with a timing case: correct; a catalogue mistake in lstm_step; a forbidden built-in reached
    only by the timing case (lstm_forward), which must fail lstm_step's case too once the parts merge; nothing to grade.
    The first Ray batch is killed outright, its embedded cluster with it; the second resumes from the journal."""
    ngram, lstm = (SOLUTIONS / "ngram.py").read_text(), (SOLUTIONS / "lstm.py").read_text()
    mistake = solutions_with(tmp_path, "lstm.py", "h_t = o * torch.tanh(c_t)", "h_t = o * c_t") / "lstm.py"
    forbidden = lstm.replace("    hs = []\n", "    hs = []\n    torch.nn.LSTMCell(1, 1)\n")
    assert forbidden != lstm
    source = folder_of_submissions(tmp_path, {
        "empty": {},
        "forbidden": {"ngram.py": ngram, "lstm.py": forbidden},
        "good": {"ngram.py": ngram, "lstm.py": lstm},
        "mistake": {"ngram.py": ngram, "lstm.py": mistake.read_text()},
    })
    config, secret = timed_rubric(tmp_path), tmp_path / "secret.txt"
    secret.write_text("ray-test\n")
    common = ["--config", config, "--secret-file", secret]
    started = time.monotonic()
    local = grade_all(source, "--out", tmp_path / "local", "--jobs", "2", *common)
    print(f"local backend: {time.monotonic() - started:.1f} s")
    assert local.returncode == 0, local.stderr

    out = tmp_path / "ray"
    first = subprocess.Popen([sys.executable, "-m", "autograder", "grade-all", str(source), "--out", str(out), "--backend", "ray", "--jobs", "1",
                              *map(str, common)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **RAY_ENV})
    try:
        _until_lines(out / "journal.jsonl", 2, first)
        grading = {pid for pid in descendants(first.pid) if _cmdline(pid).startswith("ray::Grader")}
        grading |= {below for pid in grading for below in descendants(pid)}  # their jobs and workers
        assert len(grading) > 3 and first.poll() is None
        os.kill(first.pid, signal.SIGKILL)  # the driver, and with it the embedded cluster
    finally:
        first.kill()
        first.wait()
    _until_dead(grading)
    done_before = len(journal(out))
    assert 2 <= done_before < 4, "the batch finished before it could be killed"

    started = time.monotonic()
    ray = grade_all(source, "--out", out, "--backend", "ray", "--jobs", "1", *common, env=RAY_ENV)
    print(f"embedded Ray, resuming {4 - done_before} submissions: {time.monotonic() - started:.1f} s")
    assert ray.returncode == 0, ray.stderr
    assert f"{done_before} already graded" in ray.stderr
    assert "Ray (embedded, on this machine): 1 node" in ray.stderr and "timing cases on its node's timing slot" in ray.stderr
    assert sorted(line["id"] for line in journal(out)) == ["empty", "forbidden", "good", "mistake"]  # each once

    assert (out / "grades.csv").read_text() == (tmp_path / "local" / "grades.csv").read_text()
    got = rows(out)
    assert {sid: r["status"] for sid, r in got.items()} == {"empty": "not_gradable", "forbidden": "ok", "good": "ok", "mistake": "ok"}
    assert got["good"]["score"] == got["good"]["max_score"] and float(got["forbidden"]["lstm"]) == 0
    for sid in ("good", "mistake", "forbidden"):
        ours, theirs = (json.loads((where / "results" / sid / "results.json").read_text()) for where in (out, tmp_path / "local"))
        assert [(t["number"], t["score"], t["status"]) for t in ours["tests"]] == [(t["number"], t["score"], t["status"]) for t in theirs["tests"]]
        timing = [t for t in ours["tests"] if "timing" in t["tags"]]
        assert len(timing) == 1 and ("ratio" in timing[0]["extra_data"]) == (sid != "forbidden"), timing
    step = json.loads((out / "results" / "forbidden" / "results.json").read_text())["tests"][-2]
    assert step["extra_data"]["check"] == "lstm.step" and "LSTMCell" in step["output"]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture(scope="module")
def cluster():
    """A Ray cluster on this machine (Ray's own test utility): a head with no CPU to grade on, and one node with a CPU
    and a timing slot. Tests add and kill nodes."""
    assert "ray" not in sys.modules, "Ray must first be imported with RAY_ENV set, to bind to loopback"
    with pytest.MonkeyPatch.context() as env:
        for key, value in RAY_ENV.items():
            env.setenv(key, value)
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        try:
            cluster.add_node(num_cpus=1, resources={"timing": 1})
            yield cluster
        finally:
            cluster.shutdown()


@pytest.mark.slow
def test_a_part_asking_for_a_gpu_no_node_has_ends_as_infra_error_within_its_deadline(cluster, tmp_path):
    """A rubric of one timing case, so that the part asking for a GPU is the only one, and nothing else waits."""
    source = folder_of_submissions(tmp_path, {"good": {"lstm.py": (SOLUTIONS / "lstm.py").read_text()}})
    started = time.monotonic()
    proc = grade_all(source, "--out", tmp_path / "out", "--config", timed_rubric(tmp_path, timing_only=True), "--backend", "ray",
                     "--address", cluster.address, "--timing-on", "gpu", "--schedule-timeout", "3", env=RAY_ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 30  # the deadline, and joining the cluster
    row = journal(tmp_path / "out")[0]
    assert row["status"] == "infra_error" and row["score"] == 0, row
    assert "no grader started for its timing part within 3 s: it needs a GPU (num_gpus=1)" in row["message"], row
    assert "CPU 1" in row["message"] and "GPU" not in row["message"].split("the cluster has")[1]
    assert rows(tmp_path / "out")["good"]["status"] == "infra_error"


@pytest.mark.slow
def test_a_batch_survives_the_loss_of_the_node_grading_it(cluster, tmp_path):
    """The only node with a CPU dies while it grades; another joins: every submission ends graded, each once."""
    ngram, backprop = (SOLUTIONS / "ngram.py").read_text(), (SOLUTIONS / "backprop.py").read_text()
    source = folder_of_submissions(tmp_path, {
        f"s{i}": {"ngram.py": ngram, "backprop.py": backprop if i % 2 else backprop.replace("z.max(axis=-1, keepdims=True)", "z.max()")}
        for i in range(4)})
    out = tmp_path / "out"
    batch = subprocess.Popen([sys.executable, "-m", "autograder", "grade-all", str(source), "--out", str(out), "--config",
                              str(small_rubric(tmp_path)), "--backend", "ray", "--address", cluster.address, "--schedule-timeout", "120"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **RAY_ENV})
    try:
        deadline = time.monotonic() + 120
        while not ((out / "journal.jsonl").exists() and (out / "journal.jsonl").read_text().count("\n") >= 1):
            assert batch.poll() is None and time.monotonic() < deadline, batch.stdout.read() if batch.poll() is not None else "no line in 120 s"
            time.sleep(0.2)
        time.sleep(1)  # the node's grader has taken the next submission
        (node,) = cluster.worker_nodes
        cluster.remove_node(node, allow_graceful=False)
        cluster.add_node(num_cpus=1, resources={"timing": 1})
        output, _ = batch.communicate(timeout=240)
    finally:
        batch.kill()
    assert batch.returncode == 0, output
    assert "its grader was lost" in output and "grading it again on another" in output, output
    lines = journal(out)
    assert sorted(line["id"] for line in lines) == ["s0", "s1", "s2", "s3"]  # nothing lost, nothing graded twice
    got = rows(out)
    assert all(r["status"] == "ok" for r in got.values()), got
    assert got["s1"]["score"] == got["s1"]["max_score"] and float(got["s0"]["backprop"]) < float(got["s1"]["backprop"])
