"""prompt(batch=True) through the simulator's Files and Batch API, including a restart mid-batch."""

import json
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig


def batch_controls(sim, **settings):
    req = urllib.request.Request(sim.url + "/_sim/batches", data=json.dumps(settings).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req).read()


def ask(sim, cache_dir, **kw):
    return prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="k", model="gpt-5-mini",
                  cache_dir=str(cache_dir), batch=True, batch_poll_interval=0.05, **kw)


@pytest.mark.parametrize("chat", [True, False])
def test_batch_mode_answers_every_row_in_order(tmp_path, chat):
    with Simulator(SimulatorConfig()) as sim:
        df = ifr.from_pydict({"q": [f"row {i}" for i in range(40)] + ["row 0"]})
        out = df.with_column("a", ask(sim, tmp_path, usage_column=True, use_chat_completions=chat)).to_pydict()
        stats = sim.stats()
    assert out["a"] == [f"sim answer: row {i}" for i in range(40)] + ["sim answer: row 0"]
    assert out["a_error"] == [None] * 41
    assert stats["batches_created"] == 1 and stats["batch_requests"] == 40  # the repeated row went once
    by_endpoint = stats.get("by_endpoint", {})
    assert not by_endpoint.get("chat.completions") and not by_endpoint.get("responses")  # nothing sent synchronously
    run = last_run()[0]
    assert run["requests"] == 40 and run["errors"] == 0
    # The Batch API costs half: the run's total is the sum of the rows' (discounted) costs, not the full price.
    row_costs = sum(u["cost"] for u in out["a_usage"])
    assert run["cost"] == pytest.approx(row_costs) and row_costs > 0


def test_failed_lines_are_row_errors_and_answers_are_cached(tmp_path):
    with Simulator(SimulatorConfig()) as sim:
        batch_controls(sim, fail_custom_ids=[])
        df = ifr.from_pydict({"q": [f"row {i}" for i in range(10)]})
        df.with_column("a", ask(sim, tmp_path)).collect()
        again = df.with_column("a", ask(sim, tmp_path)).to_pydict()
        assert sim.stats()["batches_created"] == 1  # the second run was answered from the cache
    assert again["a"][3] == "sim answer: row 3"


def test_batch_mode_needs_a_batch_api(tmp_path):
    with pytest.raises(ifr.PlanError, match="no Batch API"):
        prompt(col("q"), provider="local", batch=True)


JOB = textwrap.dedent("""
    import sys
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    base_url, cache_dir, out = sys.argv[1:4]
    df = ifr.from_pydict({"q": [f"row {i}" for i in range(30)]})
    df = df.with_column("a", prompt(col("q"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini",
                                    cache_dir=cache_dir, batch=True, batch_poll_interval=0.05))
    df.write_parquet(out)
""")


def test_restart_between_submit_and_completion_polls_instead_of_resubmitting(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    cache_dir, out = tmp_path / "cache", tmp_path / "out"
    with Simulator(SimulatorConfig()) as sim:
        batch_controls(sim, process_s=3.0)
        proc = subprocess.Popen([sys.executable, str(script), sim.base_url, str(cache_dir), str(out)])
        deadline = time.monotonic() + 60
        while sim.stats().get("batches_created", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # submitted and recorded, not finished
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not out.exists() or not any(p.name.startswith("part-") for p in out.iterdir())
        subprocess.run([sys.executable, str(script), sim.base_url, str(cache_dir), str(out)], check=True, timeout=120)
        stats = sim.stats()
    assert stats["batches_created"] == 1  # the new process found the batch in the ledger
    got = ifr.read_parquet(str(out)).to_pydict()
    assert sorted(got["a"]) == sorted(f"sim answer: row {i}" for i in range(30))


def test_batch_mode_keeps_max_cost_a_cap(tmp_path):
    """A Batch API job reserves each row's worst case (at the batch price) before it submits: spend <= cap."""
    cap = 0.0005
    with Simulator(SimulatorConfig()) as sim:
        df = ifr.from_pydict({"q": [f"row {i}" for i in range(60)]})
        with pytest.warns(ifr.BudgetExceededWarning, match="reached its budget"):
            out = df.with_column("a", ask(sim, tmp_path, max_tokens=50, max_cost=cap)).to_pydict()
        sent = sim.stats()["batch_requests"]
    run = last_run()[0]
    answered = [a for a in out["a"] if a is not None]
    kinds = {e["kind"] for e in out["a_error"] if e}
    assert 0 < len(answered) < 60 and sent == len(answered)  # the rows past the cap were never submitted
    assert kinds == {"budget"}
    assert 0 < run["cost"] <= cap
