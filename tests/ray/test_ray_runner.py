"""The same plan on the Ray runner and on the local runner: equal results, one cache, atomic writes,
model classes as actor pools with their own GPUs, interop with Ray Datasets.

One local Ray cluster per session (tests/ray/conftest.py); the OpenAI-compatible simulator stands in
for the paid API.
"""

import os
import pathlib
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig


@pytest.fixture
def on_ray(ray_cluster):
    """Run the test's DataFrames on Ray; back to the local runner afterwards."""
    ifr.set_runner_ray()
    yield
    ifr.set_runner_native()


def both(df: ifr.DataFrame) -> tuple[pa.Table, pa.Table]:
    ifr.set_runner_native()
    local = df.to_arrow()
    ifr.set_runner_ray()
    return local, df.to_arrow()


@pytest.fixture
def data(tmp_path) -> str:
    """Two Parquet files, one of several row groups, with nulls."""
    root = tmp_path / "in"
    root.mkdir()
    n = 3000
    pq.write_table(pa.table({"id": list(range(n)), "g": [i % 7 for i in range(n)],
                             "q": [f"question {i % 400}" if i % 11 else None for i in range(n)]}),
                   root / "a.parquet", row_group_size=500)
    pq.write_table(pa.table({"id": list(range(n, n + 500)), "g": [i % 3 for i in range(500)],
                             "q": [f"question {i}" for i in range(500)]}), root / "b.parquet")
    return str(root)


@ifr.func(return_dtype=ifr.DataType.int64())
def scaled(x):
    return None if x is None else 3 * x + 1


def test_a_plan_with_read_filter_func_prompt_sort_groupby_and_write_gives_the_local_result(on_ray, data, tmp_path):
    with Simulator(SimulatorConfig()) as sim:
        df = (ifr.read_parquet(data)
              .where(col("id") % 2 == 0)
              .with_column("s", scaled(col("id")))
              .with_column("a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="k",
                                       model="gpt-5-mini", use_chat_completions=True)))
        local, ray_ = both(df.sort("s", desc=True))
        assert ray_.num_rows == local.num_rows == 1750
        assert ray_.equals(local)  # row for row, order included
        run = last_run()[0]  # the Ray run's counters, merged on the driver from every worker
        assert run["rows_done"] == 1750 and run["cache_hits"] == 1750 - ray_.column("q").null_count
        assert ray_.column("a_error").null_count == ray_.num_rows
        sent = sim.stats()["total_requests"]
        assert sent <= 400 + 250  # distinct questions only: the Ray run found the local run's answers

        grouped = df.groupby("g").agg(col("s").sum().alias("total"), col("a").count().alias("answered"),
                                      col("id").mean().alias("mean_id"))
        local_g, ray_g = both(grouped)
        assert ray_g.equals(local_g)
        assert sim.stats()["total_requests"] == sent  # every answer came from the one cache

        ifr.set_runner_ray()
        out = df.sort("id").write_parquet(str(tmp_path / "out"))
        paths = out.to_pydict()["path"]
        assert [pathlib.Path(p).name for p in paths] == [f"part-{i:05d}.parquet" for i in range(len(paths))]
        written = ifr.read_parquet(str(tmp_path / "out")).to_arrow()
        ifr.set_runner_native()
        assert written.equals(df.sort("id").to_arrow())
        assert not [p for p in os.listdir(tmp_path / "out") if p.startswith(".")]


# One test per operator: each is a Ray job (seconds apiece, more on a loaded machine), and eleven in
# one test passed its 300 s timeout on a CI machine running another test process beside it.
ORDERED = {
    "sort": lambda df: df.sort(["g", "q"], desc=[False, True]),
    "limit": lambda df: df.limit(37),
    "rebatch-func": lambda df: df.into_batches(100).with_column("s", scaled(col("id"))),
    "repartition": lambda df: df.repartition(4),
    "aggregates": lambda df: df.agg(col("id").sum().alias("t"), col("q").count().alias("n"), col("id").mean().alias("m"),
                                    col("id").min().alias("lo"), col("id").max().alias("hi")),
}


@pytest.mark.parametrize("op", list(ORDERED))
def test_ordered_operators_match_the_local_runner_row_for_row(on_ray, data, op):
    ordered = ORDERED[op](ifr.read_parquet(data))
    local, ray_ = both(ordered)
    assert ray_.equals(local), ordered.explain() if hasattr(ordered, "explain") else ""


NAMES = {"g": [0, 1, 2, 9], "name": ["zero", "one", "two", "nine"], "id": [5, 6, 7, 8]}


@pytest.mark.parametrize("op", ["distinct", "inner", "left", "semi", "anti", "outer"])
def test_unordered_operators_match_the_local_runner_as_sets(on_ray, data, op):
    df = ifr.read_parquet(data)
    unordered = df.select("g").distinct() if op == "distinct" else df.join(ifr.from_pydict(NAMES), on="g", how=op)
    local, ray_ = both(unordered)
    keys = [(c, "ascending") for c in local.column_names]
    assert ray_.sort_by(keys).equals(local.sort_by(keys)), (ray_.num_rows, local.num_rows, ray_.schema, local.schema)


def _ray_plan(df: ifr.DataFrame, capsys) -> str:
    """The Ray Dataset's plan as Ray prints it (``Dataset.explain``)."""
    capsys.readouterr()
    df.to_ray_dataset().explain()
    return capsys.readouterr().out


@pytest.mark.parametrize("op", ["inner", "anti"])
def test_a_join_with_a_right_side_of_unknown_size_is_ray_s_hash_join_and_matches_the_local_runner(on_ray, data,
                                                                                                  tmp_path, op, capsys):
    pq.write_table(pa.table(NAMES), tmp_path / "names.parquet")  # a file: the plan does not know its rows
    joined = ifr.read_parquet(data).join(ifr.read_parquet(str(tmp_path / "names.parquet")), on="g", how=op)
    local, ray_ = both(joined)
    keys = [(c, "ascending") for c in local.column_names]
    assert ray_.sort_by(keys).equals(local.sort_by(keys))
    assert "Join" in _ray_plan(joined, capsys)


def test_a_right_side_known_to_be_small_is_broadcast_not_shuffled(on_ray, data, capsys):
    plan = _ray_plan(ifr.read_parquet(data).join(ifr.from_pydict(NAMES), on="g", how="inner"), capsys)
    assert "Join" not in plan and "_join_batch" in plan, plan


def test_a_repartition_by_key_keeps_each_key_in_one_partition_on_ray(on_ray, data):
    parts = [t for t in ifr.read_parquet(data).repartition(3, "g").to_ray_dataset()
             .iter_batches(batch_size=None, batch_format="pyarrow") if t.num_rows]
    where = {}
    for i, t in enumerate(parts):
        for g in set(t.column("g").to_pylist()):
            where.setdefault(g, set()).add(i)
    assert sum(t.num_rows for t in parts) == 3500 and sorted(where) == list(range(7))
    assert all(len(found) == 1 for found in where.values()), where


def test_a_failed_job_leaves_no_partial_output(on_ray, data, tmp_path):
    @ifr.func(return_dtype=ifr.DataType.int64())
    def breaks_late(x):
        if x == 3400:
            raise ValueError("row 3400 is bad")
        return x

    root = tmp_path / "out"
    root.mkdir()
    (root / "keep.txt").write_text("not ours")  # a directory with data: added to, never replaced
    with pytest.raises(ifr.UDFError, match="row 3400 is bad"):
        ifr.read_parquet(data).with_column("b", breaks_late(col("id"))).write_parquet(str(root), mode="append")
    assert sorted(os.listdir(root)) == ["keep.txt"]  # no part file, no temporary directory


@ifr.cls(max_concurrency=2, gpus=1)
class WhereAmI:
    def __init__(self, log_dir: str):
        import ray

        self.where = f"{os.getpid()}:{','.join(str(g) for g in ray.get_gpu_ids())}"
        self.log_dir = log_dir
        pathlib.Path(log_dir, f"init-{self.where}").write_text("")  # one file per __init__

    @ifr.method.batch(return_dtype=ifr.DataType.string())
    def __call__(self, x):
        import time

        # Until both actors are up, a batch waits: on a loaded machine the second actor started after the
        # first had done every batch (a fixed sleep was not long enough), and the test saw one actor at work.
        deadline = time.monotonic() + 60
        while len(list(pathlib.Path(self.log_dir).glob("init-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.02)
        return [self.where] * len(x)


def test_a_model_class_is_an_actor_pool_with_a_gpu_each(on_ray, tmp_path):
    df = ifr.from_pydict({"x": list(range(3000))}).into_batches(100).with_column("w", WhereAmI(str(tmp_path))(col("x")))
    where = set(df.to_pydict()["w"])
    inits = [p.name for p in tmp_path.iterdir()]
    assert len(inits) == 2 and {f"init-{w}" for w in where} <= set(inits)  # max_concurrency=2: two actors, each built once
    gpus = {i.split(":")[1] for i in inits}
    assert gpus == {"0", "1"}  # each actor its own GPU, given by Ray
    assert len(where) == 2  # and both did work


def test_ray_datasets_round_trip(on_ray):
    import ray.data

    ds = ray.data.from_items([{"a": i, "b": f"x{i}"} for i in range(50)])
    df = ifr.from_ray_dataset(ds).with_column("c", col("a") * 2)
    assert df.to_pydict()["c"] == [2 * i for i in range(50)]
    back = df.where(col("a") < 5).to_ray_dataset()
    assert isinstance(back, ray.data.Dataset)
    assert back.to_arrow_refs() and pa.concat_tables(ray.get(back.to_arrow_refs())).to_pydict() == {
        "a": [0, 1, 2, 3, 4], "b": ["x0", "x1", "x2", "x3", "x4"], "c": [0, 2, 4, 6, 8]}


def _state_jobs() -> list[str]:
    from inferframe.runners.ray_job_state import JobState
    from inferframe.runners.ray_limits import driver_host

    return ray.get(driver_host("state", JobState)[0].open_jobs.remote())


def test_a_ray_dataset_with_ai_columns_keeps_its_job_state_while_it_is_used_and_frees_it_after(on_ray):
    import gc

    before = _state_jobs()
    with Simulator(SimulatorConfig()) as sim:
        ask = prompt(col("t"), provider="openai", base_url=sim.base_url, api_key="sk-test", model="gpt-5-mini")
        ds = ifr.from_pydict({"t": [f"row {i}" for i in range(6)]}).with_column("a", ask).to_ray_dataset()
        derived = ds.map_batches(lambda b: b, batch_format="pyarrow")  # a user's own step after ours
        del ds
        gc.collect()
        assert len(_state_jobs()) == len(before) + 1  # the derived dataset still needs the job's keys and counters
        rows = derived.take_all()
        assert len(rows) == 6 and all(r["a"] for r in rows) and sim.stats()["total_requests"] == 6
        del derived, rows
    # Ray Data's executor lets go of the plan as its threads wind down, and the host ends the job on its own turn.
    deadline = time.monotonic() + 30
    while _state_jobs() != before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.2)
    assert _state_jobs() == before  # nothing of the job is left in the driver's host


import ray  # noqa: E402


def test_the_runner_is_chosen_by_environment_and_joins_the_running_cluster(ray_cluster, tmp_path):
    import subprocess
    import sys

    script = ("import inferframe as ifr, ray\n"
              "from inferframe.runners import get_runner\n"
              "times10 = ifr.func(lambda a: a * 10, return_dtype=ifr.DataType.int64())\n"
              "df = ifr.from_pydict({'a': [1, 2, 3]}).with_column('b', times10(ifr.col('a')))  # a UDF: work for Ray\n"
              "print(get_runner().name, df.to_pydict()['b'], ray.get_runtime_context().gcs_address)\n")
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "INFERFRAME_RUNNER": "ray", "INFERFRAME_RAY_ADDRESS": address, "RAY_AUTH_MODE": "disabled"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == f"ray [10, 20, 30] {address}"  # joined this cluster, did not start one


def test_a_plan_with_no_user_code_over_rows_on_the_driver_starts_no_ray():
    # A projection, filter and sort of an in-memory table: a Ray job would only ship the rows to the workers and back.
    import subprocess
    import sys

    script = ("import inferframe as ifr, ray\n"
              "from inferframe.runners import get_runner\n"
              "df = ifr.from_pydict({'a': [3, 1, 2]}).where(ifr.col('a') > 1).sort('a').with_column('b', ifr.col('a') * 10)\n"
              "print(get_runner().name, df.to_pydict()['b'], ray.is_initialized())\n")
    env = {**os.environ, "INFERFRAME_RUNNER": "ray"}
    env.pop("RAY_ADDRESS", None)
    env.pop("INFERFRAME_RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "ray [20, 30] False"


def _stage_pids() -> list[int]:
    import psutil

    return [p.pid for p in psutil.process_iter(["cmdline"])
            if any("UDFStage" in part for part in (p.info["cmdline"] or []))]


def test_a_worker_killed_mid_run_loses_no_row_and_repeats_no_paid_request(on_ray, tmp_path):
    import signal
    import threading
    import time

    n = 1200
    with Simulator(SimulatorConfig(latency_ms=40, record_requests=True, record_max=10 * n)) as sim:
        df = ifr.from_pydict({"id": list(range(n)), "q": [f"question {i}" for i in range(n)]}).with_column(
            "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="k", model="gpt-5-mini",
                        use_chat_completions=True, max_concurrency=16))
        killed: list[int] = []

        def kill_one_when_half_is_paid():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                if sim.stats()["total_requests"] >= n // 2:
                    for pid in _stage_pids()[:1]:
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                time.sleep(0.05)

        killer = threading.Thread(target=kill_one_when_half_is_paid, daemon=True)
        killer.start()
        out = df.to_arrow()
        killer.join(timeout=5)
        # A row's request is its question: the cache-routing hint (prompt_cache_key) names the group the
        # row went out with, which may differ when the row is sent again.
        asked = [r["body"]["messages"][-1]["content"] for r in sim.requests()]
    assert killed, "no prompt worker was found to kill"
    assert out.column("id").to_pylist() == list(range(n))  # every row exactly once, in order
    assert out.column("a_error").null_count == n and out.column("a").null_count == 0
    # Answers stored before the kill are not bought again: at most the requests in flight then are repeated.
    assert len(set(asked)) == n and len(asked) - n <= 16
    run = last_run()[0]  # the whole cluster's counters, on the driver
    assert run["rows_done"] == n  # a batch run again after the kill counts its rows once
    # Spending is reported as it happens (every 0.25 s): the dead worker's last moments may be missing.
    assert 0.8 * len(asked) <= run["requests"] <= len(asked) and run["input_tokens"] > 0


def test_the_workers_of_a_node_share_one_local_model_server(on_ray):
    import psutil

    def servers_under_ray() -> set[int]:
        """llama-server processes started by a Ray worker (whatever else runs on the machine)."""
        found = set()
        for p in psutil.process_iter(["name", "ppid"]):
            if "llama-server" not in (p.info["name"] or ""):
                continue
            try:
                parent = " ".join(psutil.Process(p.info["ppid"]).cmdline())
            except psutil.Error:
                continue
            if parent.startswith("ray::") or "default_worker.py" in parent:
                found.add(p.pid)
        return found

    before = servers_under_ray()
    df = ifr.from_pydict({"q": ["The capital of France is", "The capital of Italy is"]})
    # Two AI calls: two actor pools, so at least two worker processes ask for the model.
    df = df.with_column("a", prompt(col("q"), provider="local", max_tokens=3)).with_column(
        "b", prompt(col("a"), provider="local", max_tokens=3))
    out = df.to_arrow()
    assert out.column("a_error").null_count == 2 and out.column("b_error").null_count == 2
    started = servers_under_ray() - before
    node = ray.get_runtime_context().get_node_id()
    host = ray.get_actor(f"inferframe-llama-{node}", namespace="inferframe")
    port = ray.get(host.url.remote(None))["base_url"].split(":")[-1].split("/")[0]
    # One server for the node (the host actor's), not one per worker: nothing else was started by a worker.
    assert all(f"--port {port}" in " ".join(psutil.Process(pid).cmdline()) or
               port in psutil.Process(pid).cmdline() for pid in started) and len(started) <= 1


def test_repartition_spreads_a_skewed_input_over_at_least_the_workers(on_ray):
    skewed = ifr.from_arrow(pa.table({"x": list(range(5000))}))  # one block of 5,000 rows
    blocks = [t.num_rows for t in skewed.repartition(4).to_ray_dataset().iter_batches(batch_size=None, batch_format="pyarrow")]
    assert len(blocks) == 4 and max(blocks) - min(blocks) <= 1 and sum(blocks) == 5000  # even, whatever the input
    batches = [t.num_rows for t in skewed.into_batches(700).to_ray_dataset().iter_batches(batch_size=None, batch_format="pyarrow")]
    assert sum(batches) == 5000 and max(batches) <= 700 and len(batches) >= 5000 // 700


def test_a_key_given_to_prompt_reaches_the_ray_workers_but_not_the_plan(on_ray):
    import pickle

    key = "sk-ray-test-7f3a9c"
    with Simulator(SimulatorConfig(require_api_key=key)) as sim:
        df = ifr.from_pydict({"q": ["a", "b", "c"]}).with_column(
            "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=key, model="gpt-5-mini"))
        assert key.encode() not in pickle.dumps(df._optimized())
        out = df.to_arrow()
    assert out.column("a_error").null_count == 3 and out.column("a").null_count == 0


def test_in_process_embeddings_on_ray_equal_the_local_ones(on_ray):
    import numpy as np

    from inferframe.functions import embed_text

    texts = [f"review number {i}: {'great' if i % 2 else 'awful'} product" for i in range(300)] + [None]
    df = ifr.from_pydict({"t": texts}).into_batches(100).with_column("v", embed_text(col("t")))
    local, ray_ = both(df)
    assert ray_.column("t").equals(local.column("t")) and ray_.column("v").type == local.column("v").type
    a = np.array([v for v in ray_.column("v").to_pylist() if v is not None])
    b = np.array([v for v in local.column("v").to_pylist() if v is not None])
    assert a.shape == (300, 384) and np.allclose(a, b, atol=1e-5) and ray_.column("v").null_count == 1


def test_a_classification_cascade_on_ray_equals_the_local_one_and_reports_its_stages(on_ray):
    """The cascade's stages run in the workers; the driver sums what each stage answered."""
    from inferframe.functions import classify_text

    pairs = [("a football match", "sport"), ("the tennis final", "sport"), ("a rugby game", "sport"),
             ("a bowl of pasta", "food"), ("fresh bread", "food"), ("a plate of rice", "food")] * 3
    texts = [f"{w} number {i}" for i in range(60) for w in ("the cricket test", "a spicy curry")][:100] + [None]
    expr = classify_text(col("t"), ["sport", "food"], target_accuracy=0.8, examples=pairs, cascade=[
        "embedding", {"method": "embedding", "label_descriptions": {"sport": "a sports event", "food": "a meal"}}])
    df = ifr.from_pydict({"t": texts}).into_batches(25).with_column("c", expr)
    local, ray_ = both(df)
    assert ray_.column("c").to_pylist() == local.column("c").to_pylist()
    assert ray_.column("c_confidence").to_pylist() == pytest.approx(local.column("c_confidence").to_pylist())
    run = next(r for r in last_run() if r["label"].startswith("cascade["))
    assert sum(run["stage_rows"].values()) == 100 and run["rows_done"] == 101


def test_a_dead_job_state_actor_stops_the_job_with_one_message(on_ray, monkeypatch):
    from inferframe.runners import ray_runner

    real_start = ray_runner._Job._start

    def start_then_kill(self):  # the job's actors start with its first UDF stage
        services = real_start(self)
        ray.kill(self.state.handle, no_restart=True)  # the driver's state host: the next job starts another
        return services

    monkeypatch.setattr(ray_runner._Job, "_start", start_then_kill)
    df = ifr.from_pydict({"x": list(range(10))}).with_column("s", scaled(col("x")))
    with pytest.raises(ifr.ServiceError, match="state actor .* is gone or does not answer"):
        df.to_arrow()


def test_explode_concat_and_nearest_match_the_local_runner(on_ray):
    tags = ifr.from_pydict({"id": [1, 2, 3], "tags": [["a", "b"], [], ["c"]]})
    more = ifr.from_pydict({"id": [4], "tags": [["d", "e", "f"]]})
    local, ray_ = both(tags.concat(more).explode("tags"))
    assert ray_.equals(local) and ray_.num_rows == local.num_rows
    docs = ifr.from_pydict({"doc": ["x", "y", "z"], "v": [[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]]})
    queries = ifr.from_pydict({"q": ["first", "second"], "qv": [[0.9, 0.1], [0.1, 0.9]]})
    local, ray_ = both(queries.nearest(docs, on="qv", other_on="v", k=2))
    assert ray_.equals(local) and ray_.column("doc").to_pylist() == ["x", "z", "y", "z"]


def test_read_tasks_are_split_by_file_and_row_group(tmp_path):
    from inferframe.runners import ray_plan

    pq.write_table(pa.table({"x": list(range(200_000))}), tmp_path / "big.parquet", row_group_size=20_000)
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "small.parquet")
    items = ray_plan._fragments(ifr.read_parquet(str(tmp_path))._plan)
    big = [i["row_groups"] for i in items if i["path"].endswith("big.parquet")]
    assert big == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]  # about 64k rows a task
    assert [i["row_groups"] for i in items if i["path"].endswith("small.parquet")] == [None]  # one task per small file



def test_an_ai_call_over_few_known_rows_runs_as_tasks_and_over_many_or_unknown_rows_on_an_actor_pool():
    import ray.data

    from inferframe.plan.physical import UDFStage, plan_physical
    from inferframe.runners import ray_plan as rp

    def stage(df) -> UDFStage:
        op = plan_physical(df.with_column("a", prompt(col("q"), provider="openai", base_url="http://127.0.0.1:9/v1",
                                                      api_key="k", model="m"))._plan)
        while not isinstance(op, UDFStage):
            op = op.input
        return op

    few = stage(ifr.from_pydict({"q": ["a", "b", "c"]}))
    assert rp.small_input(few, 3) and rp._actors_for(few.call, 2, True) == {}  # no actor process to start
    spread = stage(ifr.from_pydict({"q": [str(i) for i in range(300)]}).into_batches(10))
    assert not rp.small_input(spread, 300)  # thirty batches: one set-up per actor, not per batch
    assert not rp.small_input(few, None) and not rp.small_input(few, rp.SMALL_AI_ROWS + 1)
    assert isinstance(rp._actors_for(few.call, 2, False)["compute"], ray.data.ActorPoolStrategy)
