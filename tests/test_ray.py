"""`run --executor ray` (issue 20, part 5): episodes on a real Ray cluster, records on the head.

The cluster tests start a real local Ray cluster, a head and a second node, each its own `ray start --block`
process tree with one CPU, and end every process of it by pid in teardown. They show that the same worlds give the
same records, trajectories and work products as the local executor; that killing the second node mid-campaign
loses nothing (Ray re-runs the lost episode, or, with retries off, the head records a fault row that `--resume`
re-runs); that a resume re-runs only what is missing or faulted; and that the run-folder lock holds as on one
machine. The fast tests run the worker's side in this process.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from benchmark.errors import BenchmarkError
from benchmark.suite.loader import REPO_ROOT, load_suite
from benchmark.run.episodes import RunConfig, execute
from benchmark.run.store import RunStore, result_key

ray = pytest.importorskip("ray")

from benchmark.run.ray_executor import (  # noqa: E402
    EpisodeResult, EpisodeTask, WorkerMismatch, record_result, run_remote_episode)
from tests.fake_openai import FakeOpenAI, report, slow  # noqa: E402

ORACLE_WORLDS = ["scrna.L1.integrity.clean", "scrna.L1.integrity.doublets", "crispr.L1.integrity.clean",
                 "scrna.L2.markers.clean"]
FAKE_WORLDS = ["scrna.L1.integrity.clean", "scrna.L1.integrity.doublets", "scrna.L1.integrity.ambient_rna",
               "scrna.L1.integrity.swapped_labels"]
FAKE_MODEL = "openai/fake-model"
RAY_BIN = str(Path(sys.executable).parent / "ray")
VOLATILE = {"wall_s", "budget_s", "collect_s", "run_id", "elapsed_s", "t", "started_at", "finished_at",
            "chain",  # the digest chain covers each row's time stamps and run id, so it differs as they do
            "attempt", "lost_usage"}  # a new id per attempt; lost requests are asserted where a test loses one
CALL_ID = re.compile(r"call_[0-9a-f]{10}")


# ------------------------------------------------------------------------------------------------------ helpers

def _norm(x):
    """A record or trajectory without what differs between two runs of the same episode: timings, the run id and
    the random tool-call ids."""
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_norm(v) for v in x]
    if isinstance(x, str):
        return CALL_ID.sub("call_X", x)
    return x


def snapshot(out: Path) -> dict:
    """Everything a run folder says about its episodes, normalized: records, trajectories and work products."""
    recs = {result_key(r.world_id, r.replicate): r for r in RunStore(out).results()}
    snap = {}
    for key, r in sorted(recs.items()):
        art = out / "artifacts" / key
        snap[key] = {
            "record": _norm(json.loads(r.model_dump_json(by_alias=True))),
            "trajectory": _norm(json.loads((out / r.trajectory).read_text())),
            "artifacts": sorted((str(p.relative_to(art)), p.read_bytes() if p.is_file() else None)
                                for p in art.rglob("*")) if art.exists() else None,
        }
    return snap


def assert_same_runs(a: Path, b: Path) -> None:
    sa, sb = snapshot(a), snapshot(b)
    assert sorted(sa) == sorted(sb)
    for key in sa:
        for part in ("record", "trajectory", "artifacts"):
            assert sa[key][part] == sb[key][part], f"{key}: {part} differs between {a.name} and {b.name}"


def result_lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of a live process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[3])


def process_tree(root: int) -> set[int]:
    """`root`, every process of its session, and every descendant (a sandbox starts its own session)."""
    table = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st is not None:
                table[int(d)] = st
    tree = {root} | {pid for pid, (_, sid) in table.items() if sid == root}
    grew = True
    while grew:
        more = {pid for pid, (ppid, _) in table.items() if ppid in tree and pid not in tree}
        tree |= more
        grew = bool(more)
    return {p for p in tree if p in table or p == root}


class LocalCluster:
    """A Ray head and extra nodes on this machine, each started as its own `ray start --block` session; every
    process is ended by pid (never `ray stop`, which would stop any other Ray on this machine)."""

    def __init__(self, env: dict[str, str]):
        self.tmp = Path(tempfile.mkdtemp(prefix="bray-", dir="/tmp"))  # short: Ray's socket paths are bounded
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "BENCHMARK_PROGRESS": "0", **env}
        self.nodes: list[subprocess.Popen] = []
        self.logs: dict[subprocess.Popen, Path] = {}

    def _start(self, args: list[str], name: str) -> subprocess.Popen:
        path = self.tmp / f"{name}.log"
        log = open(path, "wb")
        common = ["--block", "--num-cpus", "1", "--object-store-memory", str(80 << 20), "--disable-usage-stats",
                  "--dashboard-agent-listen-port", str(free_port()), "--metrics-export-port", str(free_port())]
        proc = subprocess.Popen([RAY_BIN, "start", *args, *common], cwd=self.tmp, env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.nodes.append(proc)
        self.logs[proc] = path
        return proc

    def start_head(self) -> None:
        self._start(["--head", "--port", str(self.port), "--include-dashboard", "false",
                     "--dashboard-port", str(free_port()),
                     "--temp-dir", str(self.tmp / "ray")], "head")
        self.wait_nodes()

    def add_node(self) -> subprocess.Popen:
        proc = self._start(["--address", self.address], f"node{len(self.nodes)}")
        self.wait_nodes()
        return proc

    def live(self) -> list[subprocess.Popen]:
        return [p for p in self.nodes if p.poll() is None]

    def alive_nodes(self) -> int:
        try:  # ray.init retries an address nobody answers on for many minutes: ask only once the GCS listens
            socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
        except OSError:
            return 0
        code = (f"import ray, logging; ray.init(address={self.address!r}, logging_level=logging.ERROR, "
                "log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive']))")
        try:
            p = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return 0
        return int(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else 0

    def wait_nodes(self, timeout: float = 180) -> None:
        """Until Ray counts exactly the nodes whose processes live: the new one joined, a killed one marked dead."""
        deadline = time.time() + timeout
        while self.alive_nodes() != len(self.live()):
            last = self.nodes[-1]
            assert last.poll() is None, self.logs[last].read_text()[-3000:]
            assert time.time() < deadline, f"Ray does not count {len(self.live())} live node(s)"
            time.sleep(1)

    def kill(self, proc: subprocess.Popen) -> None:
        """kill -9 a node: its `ray start`, raylet, workers and their sandboxes."""
        for _ in range(3):  # fork races: a worker may be starting while we look
            for pid in process_tree(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        proc.wait(timeout=30)

    def stop(self) -> None:
        for proc in reversed(self.nodes):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # `ray start --block` stops its node's processes
        for proc in reversed(self.nodes):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            self.kill(proc)  # whatever outlived it
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def fake():
    with FakeOpenAI(default=report(_valid_report())) as server:
        yield server


def _valid_report() -> dict:
    from benchmark.models.scripted import first_option_value

    return first_option_value(load_suite().worlds[FAKE_WORLDS[0]].family.report_schema)


def _leave_ray(when: str) -> None:
    """This pytest process must not stay a Ray driver: Ray's GCS client ends its process (std::_Exit, no
    traceback) a minute after the cluster goes: an xdist worker would die in the middle of a later test."""
    if ray.is_initialized():
        ray.shutdown()
        pytest.fail(f"{when} left this process joined to a Ray cluster (RayExecutor.close was not reached)")


@pytest.fixture(autouse=True)
def no_driver_left_behind(request):
    yield
    _leave_ray(request.node.name)


@pytest.fixture(scope="module")
def cluster(fake):
    """A head and a second node; the model endpoint and key are exported before `ray start`, as on real nodes."""
    c = LocalCluster({"OPENAI_API_BASE": fake.url, "OPENAI_API_KEY": "sk-fake-ray"})
    try:
        c.start_head()
        c.add_node()
        yield c
    finally:
        try:
            _leave_ray("the cluster's tests")
        finally:
            c.stop()
        from benchmark.run.ray_executor import _sweep_scratch

        _sweep_scratch(min_age_s=0)  # the scratch folders of the episodes the tests killed (their locks are free)


def _cli(out: Path, model: str, worlds: list[str], extra: tuple[str, ...]) -> list[str]:
    levels = sorted({w.split(".")[1] for w in worlds})
    return [sys.executable, "-m", "benchmark", "run", "--model", model, "--out", str(out), "--levels", *levels,
            "--worlds", *worlds, *extra]


def run_cli(out: Path, model: str, worlds: list[str], *extra: str, env: dict | None = None, timeout: int = 600):
    """`python -m benchmark run` as a user runs it (the head of a Ray campaign is this process)."""
    e = dict(os.environ, BENCHMARK_PROGRESS="0", **(env or {}))
    return subprocess.run(_cli(out, model, worlds, extra), cwd=REPO_ROOT, env=e, capture_output=True, text=True,
                          timeout=timeout)


def start_cli(out: Path, model: str, worlds: list[str], *extra: str, env: dict | None = None) -> subprocess.Popen:
    e = dict(os.environ, BENCHMARK_PROGRESS="0", **(env or {}))
    return subprocess.Popen(_cli(out, model, worlds, extra), cwd=REPO_ROOT, env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


# ------------------------------------------------------------------------------- fast: the worker in this process

def _task(ref, replicate: int, cfg: RunConfig, run_id: str = "head") -> EpisodeTask:
    from benchmark.run.agent import HARNESS_VERSION

    return EpisodeTask(world_id=ref.id, replicate=replicate, cfg=cfg, run_id=run_id, harness_version=HARNESS_VERSION,
                       lock=ref.lock_path.read_bytes(), golden=ref.golden_path.read_bytes(),
                       campaign_seed=ref.campaign.seed if ref.campaign else None,
                       campaign_root=str(ref.campaign.root) if ref.campaign else None)


def _record_all(out: Path, refs, cfg: RunConfig, results: list[EpisodeResult]) -> None:
    store = RunStore(out)
    store.init({"run_id": out.name, "model": cfg.model}, resume=False)
    try:
        for ref, res in zip(refs, results):
            record_result(store, ref, 0, res)
    finally:
        store.close()


def test_a_worker_episode_recorded_on_the_head_equals_the_local_one(tmp_path):
    worlds = ["scrna.L1.integrity.doublets", "scrna.L2.markers.clean"]
    local = tmp_path / "local"
    execute(RunConfig(model="scripted/oracle", out=local, worlds=worlds, levels=["L1", "L2"]))
    refs = [load_suite().worlds[w] for w in worlds]
    cfg = RunConfig(model="scripted/oracle", out=tmp_path / "elsewhere", worlds=worlds, levels=["L1", "L2"])
    results = [run_remote_episode(_task(ref, 0, cfg, run_id="remote")) for ref in refs]
    assert all(r.artifacts for r in results), "the oracle writes work products; they travel back as bytes"
    remote = tmp_path / "remote"
    _record_all(remote, refs, cfg, results)
    assert_same_runs(local, remote)
    assert {r.run_id for r in RunStore(remote).results()} == {"remote"}, "the head's run id, not the scratch folder's"


def test_a_worker_node_without_a_numba_seed_builds_it_for_a_scanpy_world(tmp_path, monkeypatch):
    """Each node builds its own seed, as `run` does on one machine; a world of a track without scanpy, or an L3
    dossier, builds none."""
    from benchmark.run.ray_executor import _seed_numba
    from sandbox import numba_seed

    monkeypatch.setenv("DISCERN_SANDBOX_CACHE", str(tmp_path / "node-cache"))
    built = []
    monkeypatch.setattr(numba_seed, "build", lambda say=print: built.append(1) or tmp_path)
    suite = load_suite()
    _seed_numba(suite.worlds["clinvar.L1.integrity.clean"])
    _seed_numba(next(r for r in suite.worlds.values() if r.world.level == "L3" and r.world.track == "scrna"))
    assert built == []
    ref = suite.worlds["scrna.L1.integrity.clean"]
    result = run_remote_episode(_task(ref, 0, RunConfig(model="scripted/oracle", out=tmp_path / "head")))
    assert built == [1] and json.loads(result.record)["status"] == "graded"


def test_a_worker_whose_checkout_differs_refuses_the_episode(tmp_path):
    ref = load_suite().worlds["scrna.L1.integrity.clean"]
    cfg = RunConfig(model="scripted/oracle", out=tmp_path)
    task = _task(ref, 0, cfg)
    with pytest.raises(WorkerMismatch, match=r"the lock of world 'scrna.L1.integrity.clean' .* differs from the head's"):
        run_remote_episode(dataclasses.replace(task, lock=task.lock + b" "))
    with pytest.raises(WorkerMismatch, match=r"the golden of world"):
        run_remote_episode(dataclasses.replace(task, golden=b"{}"))
    with pytest.raises(WorkerMismatch, match=r"harness version .* check out the head's commit"):
        run_remote_episode(dataclasses.replace(task, harness_version="0-other"))
    with pytest.raises(WorkerMismatch, match=r"has no world 'scrna.L1.integrity.nope'"):
        run_remote_episode(dataclasses.replace(task, world_id="scrna.L1.integrity.nope"))


def test_a_private_campaign_runs_on_a_worker_without_the_head_folder(tmp_path, monkeypatch):
    """The worker gets the campaign's lock and golden with the task, keeps them in its own cache, builds the world
    there from the lock, and scores exactly as the head would."""
    import benchmark.suite.freeze as freeze
    from benchmark.suite.campaign import campaign_suite, start_campaign

    wid = "scrna.L1.integrity.clean"
    camp = tmp_path / "campaign"
    refs = start_campaign(camp, 31, [load_suite().worlds[wid]])
    freeze.freeze_worlds(refs, 1)
    local = tmp_path / "local"
    execute(RunConfig(model="scripted/oracle", out=local, worlds=[wid], levels=["L1"], suite=camp))
    ref = campaign_suite(load_suite(), camp).worlds[wid]
    cfg = RunConfig(model="scripted/oracle", out=tmp_path / "x", worlds=[wid], levels=["L1"], suite=camp)
    monkeypatch.setattr(freeze, "CACHE_ROOT", tmp_path / "worker-cache" / "worlds")
    res = run_remote_episode(dataclasses.replace(_task(ref, 0, cfg, run_id="local"), campaign_root=None))
    built = list((tmp_path / "worker-cache" / "ray-campaigns").glob(f"*/data/{wid}"))
    assert len(built) == 1 and any(built[0].iterdir()), "built on the worker from the lock, in the worker's cache"
    remote = tmp_path / "remote"
    _record_all(remote, [ref], cfg, [res])
    assert_same_runs(local, remote)


def test_a_worker_answer_cannot_write_outside_its_pair(tmp_path):
    ref = load_suite().worlds["scrna.L1.integrity.clean"]
    cfg = RunConfig(model="scripted/oracle", out=tmp_path)
    res = run_remote_episode(_task(ref, 0, cfg))
    store = RunStore(tmp_path / "run")
    store.init({"run_id": "run"}, resume=False)
    try:
        for bad in ("../../escape.txt", "/etc/passwd"):
            with pytest.raises(BenchmarkError, match="leaves its folder"):
                record_result(store, ref, 0, dataclasses.replace(res, artifacts=[(bad, b"x")]))
        with pytest.raises(BenchmarkError, match="answered"):
            record_result(store, ref, 1, res)
        assert not store.results_path.exists(), "nothing was recorded for a refused answer"
    finally:
        store.close()
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.slow
def test_a_join_that_fails_part_way_leaves_no_driver_behind(cluster, tmp_path, monkeypatch):
    """ray.init connects, then fails (a GCS lost mid-join, a timeout): the run says it cannot join, writes nothing,
    and this process is no Ray driver any more, so nothing ends it when the cluster goes away."""
    real = ray.init

    def joins_then_fails(*args, **kwargs):
        real(*args, **kwargs)
        raise RuntimeError("lost the GCS while joining")

    monkeypatch.setattr(ray, "init", joins_then_fails)
    out = tmp_path / "run"
    with pytest.raises(BenchmarkError, match=r"cannot join the Ray cluster at .* \(lost the GCS while joining\)"):
        execute(RunConfig(model="scripted/oracle", out=out, worlds=["scrna.L1.integrity.clean"], levels=["L1"],
                          executor="ray", address=cluster.address))
    assert not ray.is_initialized() and not out.exists()


def test_address_needs_the_ray_executor_and_a_dead_address_writes_nothing(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(BenchmarkError, match="--address names a Ray cluster"):
        execute(RunConfig(model="scripted/oracle", out=out, worlds=["scrna.L1.integrity.clean"], address="h:1"))
    t0 = time.monotonic()
    p = run_cli(out, "scripted/oracle", ["scrna.L1.integrity.clean"], "--executor", "ray", "--address",
                f"127.0.0.1:{free_port()}")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "no Ray cluster answers at 127.0.0.1:" in p.stderr and "EVALUATE_MODEL.md" in p.stderr
    assert time.monotonic() - t0 < 60 and not out.exists(), "one sentence, at once, and nothing written"


def test_a_killed_workers_scratch_folder_is_swept_and_a_live_one_kept(tmp_path, monkeypatch):
    import benchmark.run.ray_executor as rx
    from benchmark.run.store import HarnessLock

    monkeypatch.setattr(rx, "SCRATCH_ROOT", tmp_path)
    dead, live, young = tmp_path / "dead", tmp_path / "live", tmp_path / "young"
    for d in (dead, live, young):
        (d / "run").mkdir(parents=True)
        (d / "run" / HarnessLock.NAME).touch()
    held = HarnessLock(live / "run")  # an episode still running on this node
    old = time.time() - 600
    for d in (dead, live):
        os.utime(d, (old, old))
    try:
        rx._sweep_scratch()
    finally:
        held.close()
    assert not dead.exists() and live.exists() and young.exists()


def test_the_cli_does_not_import_ray_unless_asked():
    code = "import sys, benchmark.cli, benchmark.run.episodes; benchmark.cli.build_parser(); print('ray' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "False", p.stdout + p.stderr


# ------------------------------------------------------------------------------ slow: a real two-node Ray cluster

@pytest.mark.slow
def test_ray_gives_the_same_records_as_local(cluster, tmp_path_factory):
    base = tmp_path_factory.mktemp("same")
    local, remote = base / "local", base / "ray"
    execute(RunConfig(model="scripted/oracle", out=local, worlds=ORACLE_WORLDS, levels=["L1", "L2"], replicates=2,
                      concurrency=2))
    recs = execute(RunConfig(model="scripted/oracle", out=remote, worlds=ORACLE_WORLDS, levels=["L1", "L2"],
                             replicates=2, concurrency=2, executor="ray", address=cluster.address))
    assert len(recs) == 2 * len(ORACLE_WORLDS) and all(r.status == "graded" for r in recs)
    assert not ray.is_initialized(), "the head leaves the cluster when the run ends"
    assert_same_runs(local, remote)
    cfg = json.loads((remote / "config.json").read_text())
    assert cfg["executor"] == "ray" and cfg["address"] == cluster.address and cfg["run_id"] == "ray"
    assert {r.run_id for r in recs} == {"ray"}
    again = RunStore(remote)
    again.acquire()  # the head released the folder's lock at the end of the run
    again.close()


@pytest.mark.slow
def test_resume_on_ray_reruns_only_missing_and_faulted_pairs(cluster, tmp_path_factory):
    base = tmp_path_factory.mktemp("resume")
    local, remote = base / "local", base / "ray"
    worlds = ORACLE_WORLDS[:3]
    execute(RunConfig(model="scripted/oracle", out=local, worlds=worlds, levels=["L1", "L2"]))
    cfg = RunConfig(model="scripted/oracle", out=remote, worlds=worlds, levels=["L1", "L2"], concurrency=2,
                    executor="ray", address=cluster.address)
    execute(cfg)
    lines = result_lines(remote)
    by_world = {x["world_id"]: x for x in lines}
    missing, faulted, kept = worlds
    # a pair lost before its line was written, and a pair whose only row is a fault (the harness never writes a
    # fault after a scored row: that second record would be refused on read)
    fault = dict(by_world[faulted], status="harness_error", score=None, grade=None, error="RuntimeError: boom")
    (remote / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in (by_world[kept], fault)))
    kept_mtime = (remote / by_world[kept]["trajectory"]).stat().st_mtime_ns
    recs = execute(dataclasses.replace(cfg, resume=True))
    assert sorted(r.world_id for r in recs) == sorted(worlds) and all(r.status == "graded" for r in recs)
    after = result_lines(remote)
    assert [x["world_id"] for x in after[2:]] and sorted(x["world_id"] for x in after[2:]) == sorted([missing, faulted])
    assert (remote / by_world[kept]["trajectory"]).stat().st_mtime_ns == kept_mtime, "a finished pair was re-run"
    assert_same_runs(local, remote)


@pytest.mark.slow
def test_the_run_folder_lock_holds_with_ray(cluster, tmp_path):
    out = tmp_path / "locked"
    holder = RunStore(out)
    holder.init({"model": "scripted/oracle"}, resume=False)
    try:
        with pytest.raises(BenchmarkError, match="in use by another harness"):
            execute(RunConfig(model="scripted/oracle", out=out, worlds=["scrna.L1.integrity.clean"], levels=["L1"],
                              resume=True, executor="ray", address=cluster.address))
        assert not ray.is_initialized()
        assert not (out / "results.jsonl").exists()
    finally:
        holder.close()


def _kill_second_node_mid_campaign(cluster, fake, out: Path, env: dict) -> tuple[subprocess.CompletedProcess, int]:
    """Run FAKE_WORLDS on Ray (both nodes busy with one slow episode each), kill -9 the second node while its
    episode waits for the model, then let the campaign finish. Returns the finished run and the model calls made."""
    if len(cluster.live()) < 2:
        cluster.add_node()
    node = cluster.live()[-1]
    assert node is not cluster.nodes[0], "never the head"
    before = len(fake.requests)
    fake.default = slow(8, report(_valid_report()))
    proc = start_cli(out, FAKE_MODEL, FAKE_WORLDS, "--executor", "ray", "--address", cluster.address,
                     "--concurrency", "2", env=env)
    try:
        deadline = time.time() + 300
        while len(fake.requests) - before < 2:  # one episode in flight on each node
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the episodes never reached the model"
            time.sleep(0.2)
        cluster.kill(node)
        fake.default = report(_valid_report())
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), len(fake.requests) - before


@pytest.fixture(scope="module")
def fake_local(fake, tmp_path_factory, cluster):
    """The local executor's records of FAKE_WORLDS against the same endpoint: what every Ray run must equal."""
    out = tmp_path_factory.mktemp("fake") / "local"
    fake.default = report(_valid_report())
    p = run_cli(out, FAKE_MODEL, FAKE_WORLDS, "--concurrency", "2",
                env={"OPENAI_API_BASE": fake.url, "OPENAI_API_KEY": "sk-fake-ray"})
    assert p.returncode == 0, p.stdout + p.stderr
    return out


@pytest.mark.slow
def test_killing_a_worker_node_loses_nothing_ray_reruns_the_episode(cluster, fake, fake_local, tmp_path):
    out = tmp_path / "retried"
    p, calls = _kill_second_node_mid_campaign(cluster, fake, out, env={})
    assert p.returncode == 0, p.stdout + p.stderr
    lines = result_lines(out)
    assert sorted(x["world_id"] for x in lines) == sorted(FAKE_WORLDS), "one line per world: nothing lost or doubled"
    assert all(x["status"] == "graded" for x in lines)
    assert calls == len(FAKE_WORLDS) + 1, "exactly the killed episode ran again"
    lost = {x["world_id"]: x["lost_usage"] for x in lines if x["lost_usage"]}
    # the killed attempt's request was sent and never answered: the re-run episode's row counts its prompt (issue 40)
    assert len(lost) == 1 and list(lost.values())[0]["agent"]["calls"] == 1, lost
    assert list(lost.values())[0]["agent"]["estimated_calls"] == 1 and list(lost.values())[0]["agent"]["tokens_in"] > 0
    assert all(x["attempt"] for x in lines)
    assert_same_runs(fake_local, out)


@pytest.mark.slow
def test_killing_a_worker_node_without_retries_is_a_fault_row_that_resume_reruns(cluster, fake, fake_local, tmp_path):
    out = tmp_path / "faulted"
    p, calls = _kill_second_node_mid_campaign(cluster, fake, out, env={"BENCHMARK_RAY_MAX_RETRIES": "0"})
    assert p.returncode == 3, p.stdout + p.stderr
    assert "1 of 4 worlds failed (harness_error 1); rerun with --resume to retry them" in p.stderr
    lines = result_lines(out)
    assert len(lines) == len(FAKE_WORLDS) and calls == len(FAKE_WORLDS)
    bad = [x for x in lines if x["status"] != "graded"]
    assert len(bad) == 1 and bad[0]["status"] == "harness_error" and bad[0]["score"] is None
    assert "EpisodeLost" in bad[0]["error"] and "was lost after 0 retries" in bad[0]["error"], bad[0]["error"]
    assert bad[0]["attempt"] is None and bad[0]["lost_usage"]["agent"]["calls"] == 1, bad[0]  # the killed request
    traj = json.loads((out / bad[0]["trajectory"]).read_text())
    assert traj["status"] == "harness_error" and traj["error"] == bad[0]["error"]
    good = {x["world_id"]: (out / x["trajectory"]).stat().st_mtime_ns for x in lines if x["status"] == "graded"}
    before = len(fake.requests)
    p = run_cli(out, FAKE_MODEL, FAKE_WORLDS, "--executor", "ray", "--address", cluster.address, "--concurrency", "2",
                "--resume")
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(fake.requests) - before == 1, "the resume ran exactly the faulted pair"
    for wid, mtime in good.items():
        assert (out / f"trajectories/{wid}__r0.json").stat().st_mtime_ns == mtime, f"{wid} was re-run"
    final = result_lines(out)
    assert len(final) == len(FAKE_WORLDS) + 1 and final[-1]["world_id"] == bad[0]["world_id"]
    assert final[-1]["lost_usage"] == bad[0]["lost_usage"], "the row that replaced the fault counts its lost request"
    assert_same_runs(fake_local, out)


@pytest.mark.slow
def test_a_worker_with_another_harness_version_refuses_and_the_pair_is_a_fault_row(cluster, tmp_path, monkeypatch):
    """The head claims another harness version than the workers run: every episode is refused on its node and
    recorded as a harness_error row naming the node, never scored."""
    import benchmark.run.agent

    monkeypatch.setattr(benchmark.run.agent, "HARNESS_VERSION", "0-other")
    recs = execute(RunConfig(model="scripted/oracle", out=tmp_path / "other", worlds=["scrna.L1.integrity.clean"],
                             levels=["L1"], executor="ray", address=cluster.address))
    assert [r.status for r in recs] == ["harness_error"] and recs[0].score is None
    assert recs[0].error.startswith("WorkerMismatch: node ") and "the head 0-other" in recs[0].error, recs[0].error


def _running_episodes() -> list[int]:
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if b"run_remote_episode" in Path(f"/proc/{d}/cmdline").read_bytes():
                    pids.append(int(d))
            except OSError:
                pass
    return pids


@pytest.mark.slow
def test_killing_the_head_stops_its_episodes_and_resume_finishes(cluster, fake, fake_local, tmp_path):
    """kill -9 of the head mid-campaign: Ray stops the episodes it owned (none is recorded), and `--resume`
    runs the campaign to the same records."""
    if len(cluster.live()) < 2:
        cluster.add_node()
    out = tmp_path / "headless"
    before = len(fake.requests)
    fake.default = slow(90, report(_valid_report()))  # the episodes would run on long after the head is gone
    proc = start_cli(out, FAKE_MODEL, FAKE_WORLDS, "--executor", "ray", "--address", cluster.address,
                     "--concurrency", "2")
    try:
        deadline = time.time() + 300
        while len(fake.requests) - before < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the episodes never reached the model"
            time.sleep(0.2)
        assert _running_episodes(), "two episodes are running on the workers"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        fake.default = report(_valid_report())
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    t0 = time.time()
    while _running_episodes():
        assert time.time() < t0 + 45, "the dead head's episodes are still running"
        time.sleep(0.5)
    assert not (out / "results.jsonl").exists() or not result_lines(out), "nothing of them was recorded"
    p = run_cli(out, FAKE_MODEL, FAKE_WORLDS, "--executor", "ray", "--address", cluster.address, "--concurrency", "2",
                "--resume")
    assert p.returncode == 0, p.stdout + p.stderr
    assert_same_runs(fake_local, out)


def test_a_dead_cluster_left_behind_by_auto_is_one_sentence_at_once(tmp_path, monkeypatch):
    """Issue 40: `--resume` against a dead cluster waited silently: "auto" follows Ray's record of the last `ray
    start` on this machine, which a dead cluster leaves behind. The address it names is probed first."""
    import ray._private.services as services
    import ray._private.utils as rutils

    from benchmark.run.ray_executor import RayExecutor

    dead = f"127.0.0.1:{free_port()}"
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(rutils, "read_ray_address", lambda temp_dir=None: dead)
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: [])
    cfg = RunConfig(model="scripted/oracle", out=tmp_path / "run", worlds=["scrna.L1.integrity.clean"], levels=["L1"],
                    executor="ray", address=None)
    t0 = time.monotonic()
    with pytest.raises(BenchmarkError, match=rf"no Ray cluster answers at {dead}"):
        RayExecutor.connect(cfg)
    assert time.monotonic() - t0 < 15
