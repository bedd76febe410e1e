"""Each job counts its own AI calls: two jobs running at once in one process never see each other's counts.

The counters are carried by the run's services (``inferframe.ai.run.RunServices``), made per job;
the run history, the progress line and ``last_run()`` read the job's own.
"""

import threading

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-run-counters"


@pytest.fixture
def history_dir(tmp_path):
    ifr.set_history(directory=str(tmp_path / "history"))
    yield str(tmp_path / "history")
    ifr.set_history()


def _job(sim, n: int, model: str):
    rows = ifr.from_pydict({"q": [f"{model} question {i}" for i in range(n)]})
    return rows.with_column("a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model=model,
                                        cache="off", max_concurrency=4))


def test_two_jobs_at_once_each_count_only_their_own_calls(history_dir):
    sizes = {"gpt-4o-mini": 24, "gpt-4.1-mini": 12}
    with Simulator(SimulatorConfig(require_api_key=KEY, latency_ms=150)) as sim:
        started = threading.Barrier(2)
        errors: list = []

        jobs = {m: _job(sim, n, m) for m, n in sizes.items()}  # plans built here; each thread runs one

        def run(model: str) -> None:
            try:
                started.wait(timeout=30)
                out = jobs[model].to_pydict()
                assert out["a_error"] == [None] * sizes[model]
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=run, args=(m,)) for m in sizes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        assert sim.stats()["total_requests"] == sum(sizes.values())

    runs = ifr.runs(directory=history_dir).to_pylist()
    assert sorted((r["models"], r["requests"], r["rows"]) for r in runs) == sorted(
        (f"openai:{m}", n, n) for m, n in sizes.items())
    # last_run(): the job that finished last, and only its own call.
    (last,) = last_run()
    model = last["label"].removeprefix("prompt[").removesuffix("]")
    assert last["requests"] == last["rows_done"] == sizes[model]


def test_the_workers_in_flight_bounds_are_the_job_s_in_last_run():
    """Issue 46 item 5: on Ray or Spark each worker bounds its own requests, and the driver (which sent nothing)
    showed an empty timeline. The job's bound is the sum of the workers', each counted from when it started."""
    from inferframe.observe.stats import RunCounters, RunStats

    counters = RunCounters()
    counters.add(RunStats(label="prompt[m]"))  # the driver's own call: it sent nothing
    driver_start = counters.runs()[0].started
    counters.merge("w1", [{"label": "prompt[m]", "age_s": 0.0,
                           "concurrency": [[0.0, 32, "start"], [2.0, 64, "latency"], [5.0, 40, "capacity"]]}])
    counters.merge("w2", [{"label": "prompt[m]", "age_s": 0.0,
                           "concurrency": [[0.0, 32, "start"], [2.0, 64, "latency"]]}])
    (run,) = counters.runs()
    offset = run.concurrency[0][0]  # the workers started when they reported, after the driver's call
    assert offset >= 0 and run.started == driver_start
    assert [[round(t - offset, 3), bound, why] for t, bound, why in run.concurrency] == \
        [[0.0, 64, "start"], [2.0, 128, "latency"], [5.0, 104, "capacity"]], run.concurrency
    assert run.capacity_bound is None  # 104 in flight needed: none here


def test_one_process_s_bound_timeline_is_kept_as_it_is():
    from inferframe.observe.stats import RunCounters, RunStats

    counters = RunCounters()
    history = [[0.0, 64, "start"], [1.5, 128, "latency"]]
    counters.add(RunStats(label="prompt[m]", concurrency=history))
    counters.add(RunStats(label="embed[e]"))
    counters.merge("w1", [{"label": "embed[e]", "rows_done": 1}])
    by_label = {r.label: r.concurrency for r in counters.runs()}
    assert by_label == {"prompt[m]": history, "embed[e]": []}
