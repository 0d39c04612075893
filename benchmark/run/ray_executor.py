"""`run --executor ray [--address ADDR]`: each (world, replicate) episode runs as a task on a Ray cluster.

The head (the machine running `python -m benchmark run`) does everything `run` does on one machine except the
episodes: it selects the worlds, checks tools and locks, owns the run folder (its flock, config.json,
results.jsonl, trajectories/, artifacts/), and decides what is left to do (`--resume`: missing and faulted pairs).
It keeps at most `--concurrency` episodes in flight across the cluster and, as each comes back (completion order),
writes it through the same RunStore calls as the local executor: work products, then the trajectory, then one
fsync'ed results.jsonl line.

A worker (any node: the same checkout and `scripts/setup.sh` as the head) never touches the head's folder:
  1. it checks that its harness version and the world's lock and golden are byte-identical to the head's (shipped
     with the task; a private campaign's lock and golden are written to the worker's cache, as the head's campaign
     folder is not on the worker);
  2. it builds the world from its lock (`ensure_built`: rebuilt when absent, every file's sha256 checked), under a
     per-world file lock so two episodes of one world on one node build it once;
  3. it runs the episode exactly as the local executor does (`run_guarded`: sandbox, agent, grading, the same fault
     rows) into a scratch run folder, returns the result line, the trajectory and the work products (bytes,
     bounded by the sandbox's collection caps), and removes the scratch folder (a killed worker's is removed by a
     later episode on that node, once its lock is free).

Faults. An episode that fails on the worker is the same row as locally (run_guarded). A task whose worker or node
dies (kill -9, a lost machine, the out-of-memory killer) is re-run by Ray up to BENCHMARK_RAY_MAX_RETRIES times
(default 2) on any live node; the lost attempt's record is gone, exactly like an interrupted local run, but its paid
requests reached the head as they were sent and returned (benchmark.run.journal: a JournalBuffer actor the head
drains into its calls.jsonl), so the pair's row counts them as `lost_usage` and $/task includes them.
Past the retries, or when the worker refuses the task (another harness version or lock), the head records the
pair as a `harness_error` row (fault_record), and `--resume` runs it again. Exceptions inside an episode are never
retried by Ray: they already are rows.

`import ray` happens only here, and only when `--executor ray` is used.
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# The same offline defaults as the CLI: a worker process never imports benchmark.cli.
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmark.errors import BenchmarkError  # noqa: E402

DEFAULT_MAX_RETRIES = 2
# Settings the head forwards to every worker (non-secret; they change what an episode does and config.json records
# them): the harness's model retry policy and litellm's offline switches. Provider keys are never forwarded: export
# them on each node before `ray start` (EVALUATE_MODEL.md).
FORWARD_PREFIXES = ("BENCHMARK_MODEL_",)
FORWARD_NAMES = ("LITELLM_OFFLINE_MODE", "LITELLM_LOCAL_MODEL_COST_MAP")
SCRATCH_ROOT = Path(tempfile.gettempdir()) / "benchmark-ray"  # a worker's per-episode run folders
MAX_RETURN_BYTES = 256 << 20  # a worker's answer past this is refused (the sandbox collects at most 64 MiB)


class WorkerMismatch(BenchmarkError):
    """The worker's checkout differs from the head's (harness version, world manifest, lock or golden)."""


class EpisodeLost(BenchmarkError):
    """Ray could not bring an episode back: its worker or node died on every attempt."""


@dataclass
class EpisodeTask:
    """What the head sends: one (world, replicate) and everything the worker must agree with."""

    world_id: str
    replicate: int
    cfg: object  # benchmark.run.episodes.RunConfig; out and suite are the head's and are replaced on the worker
    run_id: str
    harness_version: str
    lock: bytes
    golden: bytes
    campaign_seed: int | None = None
    campaign_root: str | None = None  # the head's campaign folder (used as is when it is on this node, unchanged)
    journal: object = None  # the head's JournalBuffer actor: this attempt's paid requests, as they happen


@dataclass
class EpisodeResult:
    """What a worker returns: the result line, the trajectory and the work products, as bytes."""

    record: bytes
    trajectory: bytes
    artifacts: list[tuple[str, bytes]]  # work products, by path under the pair's artifacts folder
    dirs: list[str]  # every folder the collection made there ("." for the pair's folder itself), empty ones too
    node: str
    wall_s: float


def _env_int(name: str, default: int, low: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BenchmarkError(f"{name}={raw!r} is not an integer") from None
    if v < low:
        raise BenchmarkError(f"{name}={raw!r} must be at least {low}")
    return v


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------------------------ the worker side

def _worker_ref(task: EpisodeTask):
    """The world as this worker's checkout has it, bound to the head's lock and golden (or refused)."""
    from benchmark.run.agent import HARNESS_VERSION
    from benchmark.suite.canonical import _atomic_write
    from benchmark.suite.freeze import CACHE_ROOT
    from benchmark.suite.loader import Campaign, load_suite

    node = socket.gethostname()
    if task.harness_version != HARNESS_VERSION:
        raise WorkerMismatch(f"node {node} runs harness version {HARNESS_VERSION}, the head {task.harness_version}; "
                             "check out the head's commit on every node (and run scripts/setup.sh)")
    suite = load_suite()
    if task.world_id not in suite.worlds:
        raise WorkerMismatch(f"node {node} has no world '{task.world_id}'; check out the head's commit on every node")
    ref = suite.worlds[task.world_id]
    if task.campaign_seed is None:
        for what, path, want in (("lock", ref.lock_path, task.lock), ("golden", ref.golden_path, task.golden)):
            have = path.read_bytes() if path.is_file() else b""
            if _sha(have) != _sha(want):
                raise WorkerMismatch(f"node {node}: the {what} of world '{ref.id}' ({path.name}) differs from the head's; "
                                     "check out the head's commit on every node")
        return ref
    root = Path(task.campaign_root) if task.campaign_root else None
    same = root is not None and all(
        (root / sub / f"{ref.id}{ext}").is_file() and (root / sub / f"{ref.id}{ext}").read_bytes() == want
        for sub, ext, want in (("locks", ".lock.json", task.lock), ("goldens", ".golden.json", task.golden)))
    if not same:  # the head's campaign folder is elsewhere: keep this campaign's lock and golden in the node's cache
        root = CACHE_ROOT.parent / "ray-campaigns" / _sha(f"campaign:{task.campaign_seed}".encode())[:16]
        for sub, ext, want in (("locks", ".lock.json", task.lock), ("goldens", ".golden.json", task.golden)):
            p = root / sub / f"{ref.id}{ext}"
            if not p.is_file() or p.read_bytes() != want:
                _atomic_write(p, want)
    return dataclasses.replace(ref, campaign=Campaign(seed=task.campaign_seed, root=root.resolve()))


def _prebuild(ref) -> None:
    """Build the world once per node: episodes of one world on one node wait for the first to build it. A problem
    is left to the episode itself, which records it exactly as the local executor does."""
    from benchmark.suite.freeze import ensure_built, world_cache

    locks = SCRATCH_ROOT.parent / "benchmark-ray-builds"  # not in the cache: `worlds check` reads that
    locks.mkdir(parents=True, exist_ok=True)
    name = _sha(str(world_cache(ref).resolve()).encode())[:24]
    fd = os.open(locks / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            ensure_built(ref)
        except Exception:  # noqa: BLE001 - run_one meets it again and makes it the row it is locally
            pass
    finally:
        os.close(fd)


def _read_tree(root: Path) -> tuple[list[tuple[str, bytes]], list[str]]:
    """Files (path, bytes) and folders under `root`, as the sandbox's collection left them."""
    files: list[tuple[str, bytes]] = []
    dirs: list[str] = []
    if not root.is_dir():
        return files, dirs
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        dirs.append(Path(dirpath).relative_to(root).as_posix())
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                files.append((p.relative_to(root).as_posix(), p.read_bytes()))
    return files, dirs


def _seed_numba(ref) -> None:
    """This node's numba seed, built once (under its lock) by the first scanpy-track episode that finds none, as
    `run` does on one machine: without it every scanpy sandbox on the node compiles the kernels again (~13 CPU-s)."""
    from benchmark.run.episodes import seed_numba

    seed_numba([ref], say=lambda m: print(f"{socket.gethostname()}: {m}", file=sys.stderr, flush=True))


def run_remote_episode(task: EpisodeTask) -> EpisodeResult:
    """One episode on this node, exactly as run_guarded runs it on the head's machine, into a scratch folder."""
    from benchmark.run.episodes import run_guarded
    from benchmark.run.journal import episode_attempt
    from benchmark.run.store import RunStore, result_key

    t0 = time.monotonic()
    ref = _worker_ref(task)
    _prebuild(ref)
    _seed_numba(ref)
    SCRATCH_ROOT.mkdir(parents=True, exist_ok=True)
    _sweep_scratch()
    scratch = Path(tempfile.mkdtemp(dir=SCRATCH_ROOT))
    try:
        store = RunStore(scratch / "run")
        store.init({"run_id": task.run_id}, resume=False)  # held until the answer is read: see _sweep_scratch
        try:
            cfg = dataclasses.replace(task.cfg, out=store.root, suite=None, executor="local", address=None)
            with episode_attempt(result_key(ref.id, task.replicate), _journal_sink(task.journal) if cfg.paid else None):
                rec = run_guarded(ref, task.replicate, cfg, store, 0)
            files, dirs = _read_tree(store.artifacts / result_key(ref.id, task.replicate))
            return EpisodeResult(record=rec.model_dump_json(by_alias=True).encode(),
                                 trajectory=(store.root / rec.trajectory).read_bytes(), artifacts=files, dirs=dirs,
                                 node=socket.gethostname(), wall_s=round(time.monotonic() - t0, 3))
        finally:
            store.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _journal_sink(actor):
    """Each journal event goes to the head's actor and is acknowledged before the request is sent or its reply used,
    so a worker killed right after still leaves it with the head (its scratch folder dies with it)."""
    if actor is None:
        return None
    import ray

    return lambda event: ray.get(actor.add.remote(event), timeout=60)


def _sweep_scratch(min_age_s: float = 60.0) -> None:
    """Remove the scratch folders of episodes whose worker died (kill -9, a lost node): their harness lock is free.
    A young folder is left alone (its episode may be starting), and one without a lock until it is an hour old."""
    from benchmark.run.store import HarnessLock

    for d in SCRATCH_ROOT.iterdir() if SCRATCH_ROOT.is_dir() else ():
        lock = d / "run" / HarnessLock.NAME
        try:
            age = time.time() - d.stat().st_mtime
            if age < min_age_s:
                continue
            if lock.exists():
                fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live episode
                finally:
                    os.close(fd)
            elif age < 3600.0:
                continue
            shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue


# -------------------------------------------------------------------------------------------------- the head side

def _safe_rel(rel: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or ".." in p.parts or "\\" in rel or "\x00" in rel:
        raise BenchmarkError(f"a worker returned the work product path {rel[:120]!r}, which leaves its folder")
    return p


def record_result(store, ref, replicate: int, res: EpisodeResult):
    """Write a worker's episode into the head's run folder, in the local executor's order and through its calls:
    work products (atomic), the trajectory (store.save_trajectory), then the result line (store.append)."""
    from benchmark.suite.canonical import _atomic_write
    from benchmark.run.records import ResultRecord, Trajectory
    from benchmark.run.store import result_key

    size = len(res.record) + len(res.trajectory) + sum(len(b) for _, b in res.artifacts)
    if size > MAX_RETURN_BYTES:
        raise BenchmarkError(f"the worker's answer for {result_key(ref.id, replicate)} is {size} bytes, past {MAX_RETURN_BYTES}")
    rec = ResultRecord.model_validate_json(res.record)
    traj = Trajectory.model_validate_json(res.trajectory)
    if (rec.world_id, rec.replicate) != (ref.id, replicate) or (traj.world_id, traj.replicate) != (ref.id, replicate):
        raise BenchmarkError(f"a worker answered {rec.world_id} r{rec.replicate} for {ref.id} r{replicate}")
    dest = store.artifacts / result_key(ref.id, replicate)
    for rel in res.dirs:
        (dest / Path(*_safe_rel(rel).parts)).mkdir(parents=True, exist_ok=True)
    for rel, data in res.artifacts:
        _atomic_write(dest / Path(*_safe_rel(rel).parts), data)
    rel = store.save_trajectory(traj)
    if rel != rec.trajectory:
        raise BenchmarkError(f"a worker's record names trajectory {rec.trajectory!r}, not {rel!r}")
    store.append(rec)
    return rec


def _lost(exc: BaseException, ref, replicate: int, retries: int) -> BaseException:
    """The exception fault_record describes: the worker's own (a refusal such as WorkerMismatch), or EpisodeLost
    naming what Ray said when the worker or node died."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and not isinstance(cause, (SystemExit, KeyboardInterrupt)):
        return cause
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:240]
    return EpisodeLost(f"the Ray task of {ref.id} r{replicate} was lost after {retries} retr"
                       f"{'y' if retries == 1 else 'ies'} ({type(exc).__name__}: {first})")


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """A HOST:PORT nobody answers on is one sentence now: ray.init would retry it for many minutes."""
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise BenchmarkError(f"--address {address!r} is not HOST:PORT (the head's GCS port, 6379 unless "
                             "`ray start --head --port` said otherwise)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise BenchmarkError(f"no Ray cluster answers at {address} ({exc.strerror or exc}); start one with "
                             "`ray start --head` there, or check --address (EVALUATE_MODEL.md, 'Campaigns on a Ray "
                             "cluster')") from None


def gcs_exposure_warning(gcs_address: str, env: dict[str, str]) -> str | None:
    """One sentence when the cluster's GCS listens beyond loopback with Ray's token authentication off (issue 40):
    whoever reaches that port can submit tasks that run as this user on every node. None when it is bound to
    loopback or `RAY_AUTH_MODE=token` is set."""
    import ipaddress

    host = gcs_address.rpartition(":")[0].strip("[]") or gcs_address
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback or env.get("RAY_AUTH_MODE", "").lower() == "token":
        return None
    return (f"warning: the Ray cluster's GCS listens on {gcs_address}, beyond loopback, without authentication: anyone "
            "who reaches that port runs code as you on every node. Start the head with `RAY_AUTH_MODE=token ray start "
            "--head` (and set RAY_AUTH_MODE=token here), or bind it to one machine with `ray start --head "
            "--node-ip-address 127.0.0.1`, or keep the port behind a firewall")


def _resolved(address: str) -> str:
    """The HOST:PORT behind "auto": the last `ray start` on this machine (Ray's /tmp/ray/ray_current_cluster). A
    cluster that died leaves that file behind, and ray.init then waits silently for minutes (issue 40); probing the
    address it names turns that into one sentence. "auto" itself when Ray finds none (ray.init says so at once)."""
    if address != "auto":
        return address
    try:
        from ray._private.services import get_ray_address_from_environment

        found = get_ray_address_from_environment("auto", None)
    except Exception:  # noqa: BLE001 - no cluster found: ray.init reports it
        return address
    return found if isinstance(found, str) and found and "://" not in found else address


class RayExecutor:
    """A connection to a Ray cluster that runs a run's pending pairs and records them in the head's store."""

    def __init__(self, address: str):
        self.address = address
        self.max_retries = _env_int("BENCHMARK_RAY_MAX_RETRIES", DEFAULT_MAX_RETRIES, 0)
        self.cpus = _env_int("BENCHMARK_RAY_CPUS", 1, 1)
        self._ray = None

    @classmethod
    def connect(cls, cfg) -> "RayExecutor":
        """Join the cluster (before the run folder is touched, so a wrong address writes nothing)."""
        try:
            import ray
        except ImportError:
            raise BenchmarkError("--executor ray needs the ray package: run `bash scripts/setup.sh` (or "
                                 "`pip install -c constraints.txt ray`)") from None
        address = cfg.address or os.environ.get("RAY_ADDRESS") or "auto"
        self = cls(address)
        import logging

        _reachable(_resolved(address))
        env_vars = {k: v for k, v in os.environ.items() if k.startswith(FORWARD_PREFIXES) or k in FORWARD_NAMES}
        # each episode's local model uses the CPUs Ray reserved for its task, not every core of its node
        env_vars["BENCHMARK_LOCAL_THREADS"] = str(self.cpus)
        kwargs = dict(runtime_env={"env_vars": env_vars}, log_to_driver=False, logging_level=logging.WARNING)
        try:
            if address == "local":  # a one-machine cluster started for this run (mostly to try the executor)
                ray.init(include_dashboard=False, **kwargs)
            else:
                ray.init(address=address, **kwargs)
        except BaseException as exc:
            # A join that failed part way may have left this process a driver whose GCS client ends the whole
            # process (std::_Exit) a minute after the cluster goes away: leave it now, then say why.
            ray.shutdown()
            if not isinstance(exc, Exception):
                raise
            msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise BenchmarkError(f"cannot join the Ray cluster at {address} ({msg}); start one with `ray start --head` "
                                 "and pass its address with --address (EVALUATE_MODEL.md, 'Campaigns on a Ray "
                                 "cluster')") from None
        self._ray = ray
        try:
            warn = gcs_exposure_warning(str(ray.get_runtime_context().gcs_address), dict(os.environ))
        except Exception:  # noqa: BLE001 - an older Ray without gcs_address: nothing to check
            warn = None
        if warn:
            print(warn, file=sys.stderr)
        try:
            cpus = ray.cluster_resources().get("CPU", 0)
        except BaseException:
            self.close()
            raise
        if cpus < self.cpus:
            self.close()
            raise BenchmarkError(f"the Ray cluster at {address} has {cpus:g} CPU(s); an episode needs {self.cpus} "
                                 "(BENCHMARK_RAY_CPUS): start the nodes with --num-cpus")
        return self

    def close(self) -> None:
        if self._ray is not None:
            self._ray.shutdown()
            self._ray = None

    def _task(self, ref, replicate: int, cfg, run_id: str) -> EpisodeTask:
        from benchmark.run.agent import HARNESS_VERSION

        camp = ref.campaign
        return EpisodeTask(world_id=ref.id, replicate=replicate, cfg=cfg, run_id=run_id, harness_version=HARNESS_VERSION,
                           lock=ref.lock_path.read_bytes(), golden=ref.golden_path.read_bytes(),
                           campaign_seed=camp.seed if camp is not None else None,
                           campaign_root=str(camp.root) if camp is not None else None)

    def run(self, todo, cfg, store, step) -> None:
        """Run every (ref, replicate) of `todo`, at most cfg.concurrency at a time, recording each as it returns."""
        from benchmark.run.episodes import fault_record

        ray = self._ray
        remote = ray.remote(run_remote_episode).options(
            num_cpus=self.cpus, max_retries=self.max_retries, retry_exceptions=False, scheduling_strategy="SPREAD")
        run_id = store.run_id()
        from benchmark.run.journal import JournalBuffer

        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # the workers' journal events wait here until the head writes them to its calls.jsonl (drain). It lives on
        # this driver's own node: a worker node that dies must not take the journal (and the run) with it.
        here = ray.get_runtime_context().get_node_id()
        buffer = ray.remote(num_cpus=0)(JournalBuffer).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False)).remote()

        def drain() -> None:
            for event in ray.get(buffer.drain.remote(), timeout=60):
                try:
                    store.journal.write(event)
                except ValueError as exc:  # a worker's event that is no event: said, never recorded
                    print(f"warning: a worker sent a call-journal event that is not one ({str(exc)[:200]})",
                          file=sys.stderr)

        queue = list(todo)
        queue.reverse()
        pending: dict = {}

        def fill() -> None:
            while queue and len(pending) < cfg.concurrency:
                ref, rep = queue.pop()
                task = dataclasses.replace(self._task(ref, rep, cfg, run_id), journal=buffer)
                pending[remote.remote(task)] = (ref, rep, time.monotonic())

        fill()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            drain()  # before any row of these is written: a row's lost_usage reads the journal
            for oref in ready:
                ref, rep, t0 = pending.pop(oref)
                try:
                    res = ray.get(oref)
                except Exception as exc:  # noqa: BLE001 - a lost or refused task is a fault row, as locally
                    fault_record(ref, rep, cfg, store, _lost(exc, ref, rep, self.max_retries), time.monotonic() - t0)
                else:
                    try:
                        record_result(store, ref, rep, res)
                    except Exception as exc:  # noqa: BLE001 - an answer the head cannot record: a fault row
                        fault_record(ref, rep, cfg, store, exc, time.monotonic() - t0)
                step(f"{ref.id} r{rep}", time.monotonic() - t0)  # submit to answer: the pace learns from it
            fill()
