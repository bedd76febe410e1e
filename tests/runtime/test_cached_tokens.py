"""Hosted prompt caching in the accounting: cached tokens priced at the cached rate, summed into the
counters, shown in the progress line, last_run(), the usage column, the run history and the estimate."""

import asyncio
import json
import sqlite3

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe.ai.config import AICallConfig
from inferframe.ai.prompt import PromptOperator
from inferframe.ai.run import RunServices
from inferframe.ai.requests import estimate_call
from inferframe.errors import PlanError
from inferframe.observe import progress
from inferframe.observe.history import MIGRATIONS, RunHistory, _v1
from inferframe.observe.progress import job_progress, last_run, render_line
from inferframe.observe.stats import RunCounters, RunStats
from inferframe.providers import openai_format as wire
from inferframe.providers.interface import BatchState, Capabilities, MockProvider, Outcome, Request, Usage
from inferframe.providers.spec import ProviderSpec
from inferframe.runtime import InferenceRuntime, RuntimeConfig
from inferframe.runtime.clock import FakeClock
from inferframe.runtime.coordinator import LocalCoordinator
from inferframe.runtime.pricing import cost_of, price_of
from inferframe.series import Series
from inferframe.session import current, set_prices

OFF = dict(cache_policy="off")
# gpt-5-mini: $0.25 input, $2.00 output, $0.025 cached input per million tokens.
GPT5_MINI = (0.25, 2.0, 0.025)


def cached_answers(cached=1536, inp=2000, out=10):
    return MockProvider(lambda r: Outcome(value="ok", usage=Usage(inp, out, cached)))


def test_built_in_prices_carry_the_published_cached_rates():
    assert price_of("gpt-5-mini") == GPT5_MINI
    assert price_of("gpt-4.1-2025-04-14")[2] == 0.50 and price_of("o4-mini")[2] == 0.275
    assert len(price_of("text-embedding-3-small")) == 2  # no prompt cache for embeddings


def test_cached_tokens_cost_the_cached_rate_worked_by_hand():
    # 2,000 input of which 1,536 cached, 10 output, at gpt-5-mini's prices:
    #   464 x 0.25 + 1,536 x 0.025 + 10 x 2.00 = 116 + 38.4 + 20 = 174.4 dollars per million -> $0.0001744
    assert cost_of(GPT5_MINI, 2000, 10, 1536) == pytest.approx(0.0001744, abs=1e-12)
    # Without a cached rate cached tokens cost the input rate: (2,000 x 0.25 + 10 x 2) / 1M.
    assert cost_of((0.25, 2.0), 2000, 10, 1536) == pytest.approx(0.00052, abs=1e-12)
    assert cost_of(GPT5_MINI, 2000, 10) == cost_of((0.25, 2.0), 2000, 10)  # old callers: unchanged


def test_the_runtime_prices_cached_tokens_and_counts_them_and_the_saving():
    rt = InferenceRuntime(cached_answers(), RuntimeConfig(price=GPT5_MINI, **OFF), model="m", clock=FakeClock())
    results = asyncio.run(rt.run_many([Request("chat", {"q": i}) for i in range(4)]))
    assert [r.usage.cached_tokens for r in results] == [1536] * 4
    assert [r.cost for r in results] == [pytest.approx(0.0001744, abs=1e-12)] * 4
    s = rt.stats
    assert (s.input_tokens, s.cached_tokens) == (8000, 6144)
    assert s.cost == pytest.approx(4 * 0.0001744)
    # Saved: 6,144 tokens x (0.25 - 0.025) / 1M = $0.0013824.
    assert s.cache_saved == pytest.approx(0.0013824)


def test_without_a_price_cached_tokens_are_counted_and_nothing_is_saved():
    rt = InferenceRuntime(cached_answers(), RuntimeConfig(**OFF), model="m", clock=FakeClock())
    asyncio.run(rt.run_many([Request("chat", {"q": i}) for i in range(3)]))
    assert (rt.stats.cached_tokens, rt.stats.cost, rt.stats.cache_saved) == (4608, 0.0, 0.0)


class BatchMock(MockProvider):
    """A Batch API whose output lines carry OpenAI's usage with cached tokens."""

    capabilities = Capabilities(batch_api=True)

    def batch_lines(self, endpoint, items):
        return wire.batch_lines(endpoint, items)

    async def submit_batch(self, endpoint, name, data):
        self.data = data
        return "batch_1"

    async def poll_batch(self, batch_id):
        return BatchState(batch_id, True, ("out",))

    async def batch_results(self, endpoint, state):
        out = []
        for raw in self.data.splitlines():
            key = json.loads(raw)["custom_id"]
            body = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
                    "usage": {"prompt_tokens": 2000, "completion_tokens": 10, "total_tokens": 2010,
                              "prompt_tokens_details": {"cached_tokens": 1536}}}
            out.append(wire.parse_batch_line(endpoint, {"custom_id": key, "response": {"status_code": 200, "body": body}}))
        return out


def test_the_batch_api_halves_the_cost_and_the_saving(tmp_path):
    config = RuntimeConfig(price=GPT5_MINI, cache_dir=str(tmp_path), batch=True, batch_poll_interval=0.0)
    rt = InferenceRuntime(BatchMock(lambda r: None), config, model="m", clock=FakeClock())
    results = asyncio.run(rt.run_batch_api([Request("chat", {"q": i}) for i in range(2)]))
    assert [r.usage.cached_tokens for r in results] == [1536, 1536]
    assert [r.cost for r in results] == [pytest.approx(0.0000872, abs=1e-12)] * 2  # half of $0.0001744
    assert rt.stats.cost == pytest.approx(2 * 0.0000872)
    assert rt.stats.cache_saved == pytest.approx(2 * 1536 * 0.225 / 1e6 / 2)


def test_worker_counters_merge_their_cached_tokens():
    counters = RunCounters()
    mine = RunStats(label="prompt[m]")
    mine.add_usage(1000, 5, 0.1, cached_tokens=512, cache_saved=0.01)
    counters.add(mine)
    counters.merge("worker-1", [{**mine.snapshot(), "age_s": 0.0}])
    (total,) = counters.runs()
    assert (total.cached_tokens, total.cache_saved, total.input_tokens) == (1024, pytest.approx(0.02), 2000)


def test_the_progress_line_shows_the_cached_share_and_the_saving():
    s = RunStats(label="prompt[gpt-5-mini]", rows_done=4, input_tokens=10_000, output_tokens=40, cost=0.01)
    s.add_usage(0, 0, 0.0, cached_tokens=6_100, cache_saved=0.42)
    line = render_line(s, 4)
    assert "61% of input cached, saved $0.4200" in line
    assert "cached" not in render_line(RunStats(label="x", input_tokens=10), None)  # nothing cached: nothing said


def test_last_run_and_the_usage_column_carry_the_cached_tokens():
    config = AICallConfig("chat", ProviderSpec("openai"), "gpt-5-mini", None, (),
                          RuntimeConfig(price=GPT5_MINI, **OFF), 1, "prompt[gpt-5-mini]")

    async def go(counters):  # the operator counts into the job's counters, as a runner's services give them
        op = PromptOperator(config, RunServices(LocalCoordinator(), counters), provider=cached_answers())
        return await op(Series(pa.array(["q1", "q2", None])))

    with job_progress(3, show=False) as counters:
        out = asyncio.run(go(counters))
    usage = out.field("usage").to_pylist()
    assert [u and u["cached_tokens"] for u in usage] == [1536, 1536, None]
    assert usage[0]["cost"] == pytest.approx(0.0001744, abs=1e-12)
    (run,) = last_run()
    assert run["cached_tokens"] == 3072 and run["input_tokens"] == 4000
    assert run["cache_saved"] == pytest.approx(3072 * 0.225 / 1e6)
    assert "of which cached" in progress.summary_html([run])


def test_set_prices_takes_a_cached_rate_and_refuses_a_bad_price():
    set_prices({"my-cached": (1.0, 4.0, 0.1), "my-plain": [0.5, 1.5]})
    assert current().price_of("my-cached") == (1.0, 4.0, 0.1)
    assert current().price_of("my-plain") == (0.5, 1.5)
    for bad in [(1.0,), (1.0, 2.0, 3.0, 4.0), (1.0, -2.0), (1.0, 2.0, "cheap"), 3.0]:
        with pytest.raises(PlanError, match=r"set_prices\(\): bad: a price is \(input, output\) or"):
            set_prices({"bad": bad})
    assert current().price_of("bad") is None  # nothing was set


def test_the_history_migrates_an_old_database_and_stores_the_cached_tokens(tmp_path):
    path = tmp_path / "runs.sqlite"
    db = sqlite3.connect(path)
    with db:
        _v1(db)  # a history written before prompt caching was counted
        db.execute("PRAGMA user_version = 1")
        db.execute("INSERT INTO runs (run_id, started, fingerprint, input_tokens, cost) VALUES ('old', 1.0, 'f', 100, 0.5)")
    db.close()
    h = RunHistory(tmp_path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    (old,) = h.runs()
    assert (old["cached_tokens"], old["cache_saved"], old["input_tokens"]) == (0, 0, 100)
    h.record({"run_id": "new", "started": 2.0, "fingerprint": "f", "input_tokens": 4000, "cached_tokens": 3072,
              "cache_saved": 0.0006912}, [])
    new = RunHistory(tmp_path).runs()[0]  # reopened: no migration runs twice
    assert (new["run_id"], new["cached_tokens"], new["cache_saved"]) == ("new", 3072, 0.0006912)
    table = ifr.runs(directory=str(tmp_path)).to_pydict()
    assert table["cached_tokens"] == [3072, 0] and table["cache_saved"] == [0.0006912, 0.0]


def test_a_new_history_has_the_columns_from_the_start(tmp_path):
    h = RunHistory(tmp_path)
    h.record({"run_id": "r", "started": 1.0, "fingerprint": "f", "cached_tokens": 5, "cache_saved": 0.1}, [])
    assert h.runs()[0]["cached_tokens"] == 5


def test_the_report_shows_the_cached_tokens_and_the_saving():
    from inferframe.observe.report import render_report

    run = {"run_id": "r1", "started": 0.0, "ended": 2.0, "rows": 4, "requests": 4, "input_tokens": 8000,
           "cached_tokens": 6144, "cost": 0.0007, "cache_saved": 0.0013824}
    page = render_report(run, [], [])
    assert "input from prompt cache" in page and "76.8%" in page and "$0.0014" in page and "of which cached" in page
    assert "input from prompt cache" not in render_report({**run, "cached_tokens": 0}, [], [])


# --- the estimate -----------------------------------------------------------------------------

RULES = "You are a meticulous support-ticket triager. Read the ticket and answer with one label. " * 80


def estimate(texts, system=RULES, price=GPT5_MINI, provider="openai"):
    config = AICallConfig("chat", ProviderSpec(provider), "gpt-5-mini", system, (),
                          RuntimeConfig(price=price), 1, "prompt[gpt-5-mini]", max_output_tokens=5)
    return estimate_call(config, [(t,) for t in texts])


def test_the_estimate_shows_a_saving_for_rows_sharing_a_long_prefix():
    est = estimate([f"Ticket {i}: my order is late" for i in range(20)])
    per_row = est["input_tokens"] / 20
    assert per_row > 1500
    # Every row but the first finds the shared instructions cached, in 128-token steps.
    assert est["cached_tokens"] % 128 == 0
    assert 19 * (per_row - 128 - 20) <= est["cached_tokens"] <= 19 * per_row
    assert est["cache_saving_usd"] == pytest.approx(est["cached_tokens"] * 0.225 / 1e6)
    assert est["cost_usd"] == pytest.approx((est["input_tokens"] * 0.25 + 100 * 2.0) / 1e6)  # the price without hits


def test_the_estimate_shows_no_saving_for_unrelated_or_short_rows():
    unrelated = [f"{i} " + "lorem ipsum dolor " * 400 for i in range(10, 30)]
    est = estimate(unrelated, system=None)
    assert est["cached_tokens"] == 0 and est["cache_saving_usd"] == 0.0
    # A shared start under OpenAI's 1,024 tokens is never cached there...
    short = estimate([f"Ticket {i}" for i in range(20)], system="Label the ticket. " * 40)
    assert short["cached_tokens"] == 0
    # ...while a llama.cpp or vLLM server reuses any shared prefix.
    assert estimate([f"Ticket {i}" for i in range(20)], system="Label the ticket. " * 40, provider="vllm")["cached_tokens"] > 0


def test_the_estimate_saving_is_unknown_without_a_price():
    est = estimate([f"Ticket {i}" for i in range(5)], price=None)
    assert est["cost_usd"] is None and est["cache_saving_usd"] is None and est["cached_tokens"] > 0


def test_the_cli_estimate_prints_the_cached_tokens_and_the_saving(tmp_path):
    from typer.testing import CliRunner

    from inferframe.cli import app

    data = tmp_path / "t.csv"
    data.write_text("ticket\n" + "".join(f"Ticket {i}: my order is late\n" for i in range(30)))
    rules = tmp_path / "rules.txt"
    rules.write_text(RULES)
    args = ["estimate", str(data), "-c", "ticket", "--provider", "openai", "--model", "gpt-5-mini", "--max-tokens", "16"]
    shared = CliRunner().invoke(app, args + ["--system-message", f"@{rules}"])
    assert shared.exit_code == 0, shared.output
    assert "a prompt cache could serve ~" in shared.stdout and "saving ~$" in shared.stdout
    alone = CliRunner().invoke(app, args)
    assert alone.exit_code == 0 and "prompt cache" not in alone.stdout
