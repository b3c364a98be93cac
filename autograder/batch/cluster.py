"""Grading a batch on a Ray cluster (`grade-all --backend ray`): Ray schedules, the sandbox isolates.

Ray's resources are bookkeeping and its tasks are pickled code, so no student code runs in a Ray worker. Each Ray
actor here is the trusted grader of one slot on its node: it holds a job process (jobs.py) that grades exactly as a
local job does, and that job's sandboxed workers are the only processes that run student code, as with `grade`.

What a node needs travels as Ray's runtime environment: the grader's package (py_modules, so every node grades with
the driver's code, which the journal's key names) and the rubric with its solutions (working_dir); Ray unpacks both
into its session folder on the node, which a node's grader adds to what the root tier hides from student uids (with
Ray's logs and sockets). The secret travels in the actors' arguments and stays in memory. Each submission's files
travel with its task and are written to a private folder on the node that grades it.

A submission with timing cases is graded in two parts (runner.grade's `timing`) that runner.merged joins: its other
cases on a slot holding a CPU, its timing cases on a slot holding the device they are measured on, a GPU (num_gpus=1;
Ray sets CUDA_VISIBLE_DEVICES) where the cluster has GPUs, else its node's one `timing` resource. On a node, the lock
file its graders share (floor.Floor) keeps a measured case alone there, as locally.

Every wait has a deadline: a part for which no grader starts within `schedule_timeout` (Ray placing it on a node, and
it starting there) ends as infra_error saying what it asked for, and a slot that outlives the budget by MARGIN is
taken for lost. A part whose node or grader dies is graded again on another (RETRIES times); a student's failure
never is: the job reports it as a reply (crashed, timeout), and Ray retries nothing itself.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..cases import TIMING
from ..rubric import Rubric
from ..runner import merged
from ..sandbox.host import scratch
from ..submission.reading import read_within, walk
from .jobs import Jobs, Setup, Task, failure
from .journal import GRADER

RETRIES = 3  # a part whose grader is lost this often (its node died, say) is given up: infra_error
MARGIN = 120.0  # seconds past the budget before a busy slot is taken for lost (its job stops itself at the budget)
POLL = 1.0  # seconds between looks at the cluster while waiting
STAGED = {"path": "grading.yaml", "solutions_dir": "solutions", "expected": "expected.bin"}  # a rubric's files, on a node


class ClusterError(Exception):
    """The cluster cannot grade: Ray is not installed or not reachable, or a node's grader cannot start."""


def _ray(embedded: bool):
    """Ray, imported. An embedded Ray is one machine's: token authentication with a fresh token, and every process
    bound to loopback (Ray does that only when it takes itself for a single machine, which this switch says)."""
    if embedded:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise ClusterError("--backend ray needs Ray, which is not installed: pip install -e '.[ray]'") from None
    return ray


@dataclass(frozen=True)
class Shipped:
    """A submission's files as the driver reads them, laid out again on the node that grades them. Links go as links,
    never followed here: the node's open_submission judges them as a grade on this machine would."""

    name: str
    files: dict[str, bytes] | None  # a folder's files by path inside it
    data: bytes = b""  # or a single file (a .zip, .py or .ipynb)
    links: dict[str, str] = field(default_factory=dict)  # link -> its target, by path inside the folder ("": the path itself)

    @classmethod
    def read(cls, path: Path) -> Shipped:
        if path.is_symlink():
            return cls(path.name, None, links={"": os.readlink(path)})
        if path.is_dir():
            found = walk(path)
            return cls(path.name, {rel: read_within(path, rel) for rel, target in found.items() if target is None},
                       links={rel: target for rel, target in found.items() if target is not None})
        return cls(path.name, None, path.read_bytes())

    def write(self, folder: Path) -> Path:
        target = folder / self.name
        if "" in self.links:
            target.symlink_to(self.links[""])
            return target
        if self.files is None:
            target.write_bytes(self.data)
            return target
        target.mkdir()
        for rel, data in self.files.items():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).write_bytes(data)
        for rel, to in self.links.items():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).symlink_to(to)
        return target


def _moved(rubric: Rubric, folder: Path) -> Rubric:
    """The rubric with its files (STAGED) in `folder`."""
    return replace(rubric, **{name: folder / file for name, file in STAGED.items() if getattr(rubric, name)})


def _stage(rubric: Rubric, folder: Path) -> None:
    for name, file in STAGED.items():
        source = getattr(rubric, name)
        if source and source.is_dir():
            shutil.copytree(source, folder / file, ignore=shutil.ignore_patterns("__pycache__"))
        elif source:
            shutil.copyfile(source, folder / file)
    for file in rubric.staff_files:  # relative to grading.yaml, as the rubric names them
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rubric.path.parent / file, folder / file)


class Grader:
    """A slot's grader on its node (a Ray actor): one job process (jobs.py), kept from one submission to the next."""

    def __init__(self, setup: Setup, budget: float):
        import ray

        context = ray.get_runtime_context()
        session = Path(context.get_temp_dir()) / context.get_session_name()  # Ray's files here: runtime env, logs, sockets
        # What the driver hides (its batch folder, the submissions, the secret: there on the driver's machine), and Ray's.
        self.setup = replace(setup, rubric=_moved(setup.rubric, Path.cwd()), hidden=(*setup.hidden, session),
                             timing_lock=session / "autograder-timing.lock", parent=os.getpid())
        self.jobs = Jobs(1, self.setup, budget)

    def start(self) -> dict:
        """Start the job; returns the isolation it entered. RuntimeError when it cannot."""
        return self.jobs.start()

    def grade(self, task: Task, shipped: Shipped) -> dict:
        replies = []
        with scratch.folder("cluster") as copies:  # 0700: no student uid reads it; swept if this grader is killed outright
            self.jobs.grade([replace(task, path=shipped.write(copies))], lambda t, reply: replies.append(reply))
        return replies[0]

    def stop(self) -> None:
        self.jobs.stop()


@dataclass
class _Unit:
    """A part of a submission to grade, and how often its grader was lost under it."""

    task: Task
    shipped: object  # the ObjectRef of its Shipped files
    tries: int = 0


@dataclass
class _Slot:
    actor: object
    starting: object  # the ObjectRef of its start(), until it answers
    unit: _Unit | None = None
    call: object = None  # the ObjectRef of its grade()
    since: float = 0.0  # when it was given its unit


class _Pool:
    """The slots of one kind (Ray options), one per unit of `resource` on the cluster's live nodes (at most `cap`), and
    at least one while there is work, so that Ray is the one to wait for a node that fits."""

    def __init__(self, name: str, options: dict, needs: str, resource: str, setup: Setup, cap: int | None = None):
        self.name, self.options, self.needs, self.resource, self.setup, self.cap = name, options, needs, resource, setup, cap
        self.queue: list[_Unit] = []
        self.slots: list[_Slot] = []
        self.stalled: float | None = None  # since when work waits with no slot started

    def room(self, nodes: list[dict]) -> int:
        return sum(int(n["Resources"].get(self.resource, 0)) for n in nodes)

    def busy(self) -> int:
        return sum(1 for s in self.slots if s.unit)

    def refs(self) -> list:
        return [s.starting for s in self.slots if s.starting] + [s.call for s in self.slots if s.call]


class Cluster:
    """The Ray backend of grade-all, with Jobs' contract: run(tasks, on_done) grades each task, calling
    on_done(task, reply) as each ends, and returns the isolation the first grader reported; stop() ends it all."""

    def __init__(self, rubric: Rubric, setup: Setup, budget: float, *, address: str | None, cores: int, jobs: int | None,
                 timing_on: str, schedule_timeout: float, say):
        self.ray = ray = _ray(address is None)
        self.rubric, self.budget, self.schedule_timeout, self.say = rubric, budget, schedule_timeout, say
        self.isolation: dict = {}  # as the first grader to start reported it
        with tempfile.TemporaryDirectory(prefix="autograder-course-") as staged:
            _stage(rubric, Path(staged))
            runtime_env = {"py_modules": [str(GRADER)], "working_dir": staged}
            on_sigterm = signal.getsignal(signal.SIGTERM)
            try:
                if address:
                    ray.init(address=address, runtime_env=runtime_env, logging_level="warning")
                else:
                    ray.init(num_cpus=cores, resources={"timing": 1}, include_dashboard=False, _node_ip_address="127.0.0.1",
                             runtime_env=runtime_env, logging_level="warning")
            except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:  # unreachable, refused, malformed
                raise ClusterError(f"Ray at {address or 'this machine'}: {exc}") from None
            finally:  # ray.init makes SIGTERM a sys.exit: it stays the batch's stop (the CLI's), which ends Ray too (stop)
                signal.signal(signal.SIGTERM, on_sigterm)
        self.actor = ray.remote(Grader)
        nodes = self._nodes()
        cpus, gpus = (sum(int(n["Resources"].get(kind, 0)) for n in nodes) for kind in ("CPU", "GPU"))
        on_gpu = timing_on == "gpu" or (timing_on == "auto" and gpus > 0)
        # As local jobs by default: one slot per CPU, grading one component at a time (a lane).
        self.pools = {
            False: _Pool("grading", {"num_cpus": 1}, "a CPU", "CPU", replace(setup, lanes=1), jobs),
            True: _Pool("timing", {"num_cpus": 0, **({"num_gpus": 1} if on_gpu else {"resources": {"timing": 1}})},
                        "a GPU (num_gpus=1)" if on_gpu else "its node's timing slot (ray start --resources '{\"timing\": 1}')",
                        "GPU" if on_gpu else "timing", replace(setup, lanes=1)),
        }
        # The parts a submission is graded in: the other cases, the timing cases; one part where the rubric has one kind.
        kinds = {k.check in TIMING for c in rubric.components for k in c.cases}
        self.split = (False, True) if len(kinds) == 2 else (True,) if kinds == {True} else (None,)
        say(f"Ray ({address or 'embedded, on this machine'}): {len(nodes)} node{'s' * (len(nodes) != 1)}, {cpus} CPUs, {gpus} GPUs; "
            "a slot per CPU grades submissions" + (f", timing cases on {self.pools[True].needs}" if len(self.split) > 1 else ""))

    def _nodes(self) -> list[dict]:
        return [n for n in self.ray.nodes() if n["Alive"]]

    def run(self, tasks: list[Task], on_done) -> dict:
        ray = self.ray
        try:
            replies: dict[str, dict] = {t.id: {} for t in tasks}
            for task in tasks:
                shipped = ray.put(Shipped.read(task.path))
                for timing in self.split:
                    self.pools[bool(timing)].queue.append(_Unit(replace(task, timing=timing), shipped))
            pools = list(self.pools.values())
            while any(p.queue or p.busy() for p in pools):
                nodes = self._nodes()
                for pool in pools:
                    self._grow(pool, nodes)
                refs = [r for p in pools for r in p.refs()]  # never none while there is work: _grow saw to it
                ray.wait(refs, num_returns=1, timeout=POLL)
                ready = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
                for pool in pools:
                    for unit, reply in self._collect(pool, ready):
                        parts = replies[unit.task.id]
                        parts[unit.task.timing] = reply
                        if len(parts) == len(self.split):
                            on_done(replace(unit.task, timing=None), self._joined(parts))
                    self._dispatch(pool)
        finally:
            self.stop()
        return self.isolation

    def _grow(self, pool: _Pool, nodes: list[dict]) -> None:
        want = len(pool.queue) + pool.busy()
        target = min(want, max(1, min(pool.room(nodes), pool.cap or want)))
        for _ in range(target - len(pool.slots)):  # no restarts: a lost grader's part goes to whichever slot is free
            actor = self.actor.options(max_restarts=0, max_task_retries=0, **pool.options).remote(pool.setup, self.budget)
            pool.slots.append(_Slot(actor, actor.start.remote()))
        for slot in [s for s in pool.slots if not s.unit and not s.starting and not pool.queue]:
            self._drop(pool, slot)  # the batch's tail: room for others

    def _collect(self, pool: _Pool, ready: set) -> list[tuple[_Unit, dict]]:
        """(unit, reply) for each part graded or given up since the last look; slots started are ready for work."""
        ray, now, ended = self.ray, time.monotonic(), []
        for slot in list(pool.slots):
            if slot.starting in ready:
                try:
                    isolation = ray.get(slot.starting, timeout=60)
                    self.isolation = self.isolation or isolation
                    slot.starting = None
                except ray.exceptions.RayError as exc:
                    if isinstance(exc, ray.exceptions.RayTaskError) or getattr(exc, "actor_init_failed", False):
                        why = getattr(exc, "cause", None) or exc  # the exception the grader raised, if it got that far
                        raise ClusterError(f"a grader could not start on the cluster: {why}") from None  # as a local job
                    self._drop(pool, slot)  # its node died while it started: another slot takes its place
            elif slot.call in ready:
                unit, call = slot.unit, slot.call
                slot.unit = slot.call = None
                try:
                    ended.append((unit, ray.get(call, timeout=60)))
                except ray.exceptions.RayTaskError as exc:  # the grader's own failure on this part: not the node's
                    traceback.print_exception(exc)
                    ended.append((unit, failure("infra_error", f"internal error ({type(exc.cause).__name__}); course staff have been told")))
                except ray.exceptions.RayError as exc:
                    self._drop(pool, slot)
                    ended += self._lost(pool, unit, type(exc).__name__)
            elif slot.unit and now - slot.since > self.budget + MARGIN:
                unit = slot.unit
                self._drop(pool, slot)
                ended += self._lost(pool, unit, f"no reply within the budget and {MARGIN:g} s")
        started = any(not s.starting for s in pool.slots)
        pool.stalled = None if started or not pool.queue else pool.stalled or now
        if pool.stalled is not None and now - pool.stalled > self.schedule_timeout:
            have = ", ".join(f"{k} {v:g}" for k, v in sorted(self.ray.cluster_resources().items()) if not k.startswith(("node:", "memory", "object")))
            message = (f"no grader started for its {pool.name} part within {self.schedule_timeout:g} s: it needs {pool.needs}, "
                       f"and the cluster has {have or 'nothing'}")
            ended += [(unit, failure("infra_error", message)) for unit in pool.queue]
            pool.queue.clear()
            for slot in list(pool.slots):
                self._drop(pool, slot)
        return ended

    def _lost(self, pool: _Pool, unit: _Unit, why: str) -> list[tuple[_Unit, dict]]:
        """A part whose grader was lost: graded again on another slot, unless that happened RETRIES times."""
        unit.tries += 1
        if unit.tries > RETRIES:
            return [(unit, failure("infra_error", f"its grader was lost {unit.tries} times ({why}), so it was given up"))]
        self.say(f"{unit.task.id}: its grader was lost ({why}); grading it again on another")
        pool.queue.insert(0, unit)
        return []

    def _dispatch(self, pool: _Pool) -> None:
        for slot in pool.slots:
            if pool.queue and not slot.unit and not slot.starting:
                slot.unit, slot.since = pool.queue.pop(0), time.monotonic()
                slot.call = slot.actor.grade.remote(slot.unit.task, slot.unit.shipped)

    def _drop(self, pool: _Pool, slot: _Slot) -> None:
        pool.slots.remove(slot)
        self.ray.kill(slot.actor)

    def _joined(self, parts: dict) -> dict:
        """One reply for a submission from its parts' (runner.merged), or the first part's that did not end graded."""
        if len(self.split) == 1:
            return parts[self.split[0]]
        bad = next((parts[t] for t in self.split if parts[t]["status"] != "ok"), None)
        if bad:
            return bad
        run = merged(self.rubric, [parts[t]["run"] for t in self.split])
        return {"status": "ok", "message": "", "run": run, "account": parts[False]["account"], "seconds": run.seconds}

    def stop(self) -> None:
        """Idle graders stop their jobs (killing what students left, by uid at the root tier); a busy one is killed,
        and its job and workers die with it (their parent-death signal); then this driver leaves the cluster, an
        embedded one ending with it."""
        ray = self.ray
        if not ray.is_initialized():
            return
        slots = [s for pool in self.pools.values() for s in pool.slots]
        try:
            stopping = [s.actor.stop.remote() for s in slots if not s.unit and not s.starting]
            if stopping:
                ray.wait(stopping, num_returns=len(stopping), timeout=30)
            for slot in slots:
                with contextlib.suppress(ray.exceptions.RayError):  # a grader already lost with its node
                    ray.kill(slot.actor)
        finally:
            for pool in self.pools.values():
                pool.slots.clear()
            ray.shutdown()
