"""A Ray cluster of two nodes on this machine (``ray.cluster_utils.Cluster``: a head and a worker node)
and the response cache (issue 33 items 3 and 4):

* a job whose AI calls cache in SQLite gets one warning when the cluster has more than one node
  (each node keeps its own answers); the fix it names is a shared store, ``cache_url=``;
* with the PostgreSQL store, the worker node is removed mid-job: the job finishes on the head, every
  row once, and only what was in flight at the removal is sent again; a rerun sends nothing.

The module runs its own cluster (not the session's single-node one from conftest.py); a real
PostgreSQL 16 from PyPI (pgserver) is the store, the simulator the paid API.
"""

import collections
import json
import os
import shutil
import tempfile
import threading
import time
import urllib.parse
import uuid
import warnings

import pgserver
import psutil
import pytest
import ray
import ray.data
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig

PASSWORD = "Pw-node-loss-never-shown"
HEAD = {"num_cpus": 2, "object_store_memory": 150 * 1024 * 1024,
        # A killed node is noticed in a few seconds rather than the default ~30.
        "_system_config": {"health_check_period_ms": 1000, "health_check_failure_threshold": 3,
                           "health_check_timeout_ms": 1000}}
WORKER = {"num_cpus": 2, "object_store_memory": 150 * 1024 * 1024}


@pytest.fixture(scope="module")
def cluster():
    """A head node with the driver; each test adds (and removes) its own worker node."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():  # another module's single-node session cluster: this module needs its own
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args=HEAD)
    ray.init(address=c.address, namespace="inferframe-node-loss", log_to_driver=False,
             runtime_env={"env_vars": {"INFERFRAME_PROGRESS": "0"}})
    ifr.set_runner_ray()
    yield c
    ifr.set_runner_native()
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def pg():
    data = tempfile.mkdtemp(prefix="inferframe-pg-")
    server = pgserver.get_server(data, cleanup_mode="stop")
    server.psql(f"CREATE ROLE inferframe LOGIN PASSWORD '{PASSWORD}';")
    yield server
    server.cleanup()
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def pg_url(pg):
    name = "t" + uuid.uuid4().hex[:12]
    pg.psql(f"CREATE DATABASE {name} OWNER inferframe;")
    sock = urllib.parse.parse_qs(urllib.parse.urlsplit(pg.get_uri()).query)["host"][0]
    return f"postgresql://inferframe:{PASSWORD}@/{name}?host={sock}"


def alive_nodes() -> int:
    return sum(1 for n in ray.nodes() if n["Alive"])


def actors_on(node_id: str) -> list[str]:
    """The live actors placed on a node (the GCS's actor table: no dashboard needed)."""
    from ray._private.state import actors

    return [a["Name"] or aid for aid, a in actors(actor_state_name="ALIVE").items()
            if a["Address"]["NodeID"] == node_id]


def node_local_warnings(seen) -> list[str]:
    return [str(w.message) for w in seen if "keeps for itself" in str(w.message)]


def job(base_url: str, n: int, **options) -> ifr.DataFrame:
    df = ifr.from_pydict({"q": [f"row {i}" for i in range(n)]}).into_batches(10)
    return df.with_column("a", prompt(col("q"), provider="openai", base_url=base_url, api_key="k",
                                      model="gpt-5-mini", **options))


def test_a_sqlite_cache_on_a_cluster_of_two_nodes_gets_one_warning_naming_the_shared_store(cluster, pg_url, tmp_path):
    with Simulator(SimulatorConfig()) as sim:
        two_calls = job(sim.base_url, 20).with_column("b", prompt(col("q"), provider="openai",
                                                                  base_url=sim.base_url, api_key="k", model="gpt-5-nano"))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert len(two_calls.to_pydict()["b"]) == 20 and alive_nodes() == 1
        assert node_local_warnings(seen) == []  # one machine: its SQLite file is the right cache

        worker = cluster.add_node(**WORKER)
        cluster.wait_for_nodes()
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                got = two_calls.to_pydict()
            assert got["a"] == [f"sim answer: row {i}" for i in range(20)]
            [message] = node_local_warnings(seen)  # one for the job, though two AI calls use the file
            assert "2 nodes" in message and 'cache_url="postgresql://' in message
            assert [w.filename for w in seen if "keeps for itself" in str(w.message)] == [__file__]  # the user's line
            assert os.environ["INFERFRAME_CACHE_DIR"] in message

            with warnings.catch_warnings(record=True) as seen:  # a write on the cluster: the same one warning
                warnings.simplefilter("always")
                job(sim.base_url, 20).write_parquet(str(tmp_path / "out"))
            assert len(node_local_warnings(seen)) == 1

            with warnings.catch_warnings(record=True) as seen:  # the shared store, or no cache: nothing to say
                warnings.simplefilter("always")
                job(sim.base_url, 20, cache_url=pg_url).to_pydict()
                job(sim.base_url, 20, cache="off").to_pydict()
            assert node_local_warnings(seen) == []
            assert not [w for w in seen if PASSWORD in str(w.message)]
        finally:
            cluster.remove_node(worker)


@pytest.fixture
def prefer_worker(cluster):
    """A worker node that Ray Data prefers for its tasks and actors (soft: once it is gone, the head runs them)."""
    worker = cluster.add_node(**WORKER)
    cluster.wait_for_nodes()
    ctx = ray.data.DataContext.get_current()
    before = ctx.scheduling_strategy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Ray deprecates the knob; it is the one that places a pool's actors
        ctx.scheduling_strategy = NodeAffinitySchedulingStrategy(worker.node_id, soft=True)
    yield worker
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx.scheduling_strategy = before
    if worker in cluster.worker_nodes:
        cluster.remove_node(worker, allow_graceful=False)


def stored(url: str) -> int:
    """How many answers the PostgreSQL store holds now (read through its own connection)."""
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT COUNT(*) FROM inferframe_responses").fetchone()[0]


def test_a_node_removed_mid_job_costs_only_what_was_in_flight_with_the_postgres_store(cluster, prefer_worker, pg_url):
    n, bound = 300, 8
    with Simulator(SimulatorConfig(latency_ms=150, record_requests=True, record_max=2000)) as sim:
        df = job(sim.base_url, n, cache_url=pg_url, max_concurrency=bound)
        result: dict = {}

        def run():
            try:
                result["table"] = df.to_arrow()
            except BaseException as e:  # handed to the test's thread
                result["error"] = e

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        deadline = time.monotonic() + 240
        while sim.stats()["total_requests"] < n // 3 and runner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        on_worker = actors_on(prefer_worker.node_id)
        in_flight = sim.stats()["in_flight"]
        workers = psutil.Process(prefer_worker.all_processes["raylet"][0].process.pid).children(recursive=True)
        cluster.remove_node(prefer_worker, allow_graceful=False)
        # The node's worker processes outlive its raylet for a moment, and may send and store in it: the
        # counts are read once they are gone, stored before sent. From then on, sent minus stored is what
        # the removed node sent and never stored, plus what the head node has in hand: a bound on the rows
        # sent again (read while the workers still ran, the bound was one short on a loaded CI machine).
        psutil.wait_procs(workers, timeout=60)
        stored_at_removal = stored(pg_url)
        sent_at_removal = sim.stats()["total_requests"]
        runner.join(timeout=300)
        assert not runner.is_alive(), "the job did not finish on the node left"
        assert "error" not in result, result.get("error")
        total = sim.stats()["total_requests"]

        again = df.to_arrow()  # a rerun: every answer is in the store
        assert sim.stats()["total_requests"] == total

    print(f"\nnode loss: {len(on_worker)} actors on the worker node, {in_flight} requests in flight and "
          f"{sent_at_removal} sent at the removal, {total} sent in all for {n} rows")
    assert on_worker, "nothing ran on the worker node: the removal tested nothing"
    assert 0 < sent_at_removal < n and alive_nodes() == 1
    got = result["table"].to_pydict()
    assert sorted(got["q"]) == sorted(f"row {i}" for i in range(n))  # every row exactly once
    assert all(a == f"sim answer: {q}" for q, a in zip(got["q"], got["a"]))
    assert again.to_pydict() == got
    sent = collections.Counter(json.dumps({k: v for k, v in r["body"].items() if k != "prompt_cache_key"},
                                          sort_keys=True) for r in sim.requests())
    assert len(sent) == n and sum(sent.values()) == total
    dupes = sum(c - 1 for c in sent.values() if c > 1)
    # Sent again: at most what the removed node had sent and not yet stored: its requests in flight
    # (max_concurrency) and the answers its store writer had not yet committed (a few at most; more only
    # on a starved machine, where the writer lags).
    assert dupes <= max(bound, sent_at_removal - stored_at_removal), (dupes, sent_at_removal, stored_at_removal)
