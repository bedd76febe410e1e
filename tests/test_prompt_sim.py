"""prompt() against the project's OpenAI-compatible simulator: limits, faults, errors as data."""

import gc
import pickle
import threading
import time

import cloudpickle
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-very-secret-123"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY)) as s:
        yield s


def rows(n):
    return ifr.from_pydict({"q": [f"question {i}" for i in range(n)]})


def ask(sim, **kw):
    kw.setdefault("model", "gpt-5-mini")
    return prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, **kw)


def test_every_row_answered_in_order(sim):
    out = rows(200).with_column("a", ask(sim)).to_pydict()
    assert out["a"] == [f"sim answer: question {i}" for i in range(200)]
    assert out["a_error"] == [None] * 200
    assert sim.stats()["total_requests"] == 200


@pytest.mark.parametrize("chat", [True, False])
def test_chat_and_responses_apis(sim, chat):
    out = rows(5).with_column("a", ask(sim, use_chat_completions=chat, system_message="Be brief.", max_tokens=50)).to_pydict()
    assert out["a"][3] == "sim answer: question 3"
    endpoint = "chat.completions" if chat else "responses"
    assert sim.stats()["by_endpoint"].get(endpoint) == 5


def test_rate_limited_run_answers_every_row(sim):
    sim.configure(rpm=3000, ratelimit_burst_s=1.0)
    t = time.perf_counter()
    out = rows(150).with_column("a", ask(sim, max_concurrency=64)).to_pydict()
    elapsed = time.perf_counter() - t
    assert out["a_error"] == [None] * 150 and None not in out["a"]
    # 3000 rpm = 50 rows/s: 150 rows need about 2 s after the first second's burst.
    assert elapsed > 1.0
    stats = sim.stats()
    assert stats["by_status"].get("200") == 150 or stats["by_status"].get(200) == 150


def test_faults_lose_no_row(sim):
    sim.configure(p_500=0.1, p_503=0.05, p_connection_reset=0.05, p_malformed=0.05, seed=3)
    out = rows(200).with_column("a", ask(sim, max_retries=8)).to_pydict()
    assert out["a_error"] == [None] * 200
    assert out["a"] == [f"sim answer: question {i}" for i in range(200)]
    run = last_run()[0]
    assert run["retries"] > 10 and run["errors"] == 0


def test_timeouts_are_retried(sim):
    sim.configure(p_timeout=0.05, timeout_hang_s=30, seed=5)
    out = rows(60).with_column("a", ask(sim, timeout=0.5, max_retries=6)).to_pydict()
    assert out["a_error"] == [None] * 60


def test_bad_request_is_data_not_retried(sim):
    sim.configure(fail_rules=[{"match": "question 7", "status": 400, "message": "bad thing"}])
    out = rows(20).with_column("a", ask(sim)).to_pydict()
    assert out["a"][7] is None
    err = out["a_error"][7]
    assert err["kind"] == "bad_request" and err["status"] == 400 and err["attempts"] == 1 and "bad thing" in err["message"]
    assert all(out["a"][i] for i in range(20) if i != 7)
    failed = rows(20).with_column("a", ask(sim)).where(col("a_error").not_null()).count_rows()
    assert failed == 1


def test_on_error_raise(sim):
    sim.configure(fail_rules=[{"match": "question 3", "status": 422}])
    with pytest.raises(Exception, match="422"):
        rows(10).with_column("a", ask(sim, on_error="raise")).collect()


def test_refusals_are_errors_and_cut_off_answers_keep_their_text(sim):
    sim.configure(p_length=0.5, p_refusal=0.5, seed=1)
    with pytest.warns(ifr.observe.TruncatedWarning, match=r"answers of prompt\[gpt-5-mini\] were cut off.*Raise max_tokens"):
        out = rows(20).with_column("a", ask(sim, usage_column=True, cache="off")).to_pydict()
    cut = [i for i, u in enumerate(out["a_usage"]) if u["finish_reason"] == "length"]
    refused = [i for i, e in enumerate(out["a_error"]) if e is not None]
    assert cut and refused and sorted(cut + refused) == list(range(20))
    assert {out["a_error"][i]["kind"] for i in refused} == {"refusal"}
    assert all(out["a"][i] and out["a_error"][i] is None for i in cut)  # the text is kept
    assert last_run()[0]["truncated"] == len(cut)


def test_text_cut_at_max_tokens_is_kept_with_its_finish_reason(sim):
    out = rows(3).with_column("a", ask(sim, max_tokens=2, usage_column=True, use_chat_completions=True)).to_pydict()
    assert all(a for a in out["a"]) and out["a_error"] == [None] * 3
    assert [u["finish_reason"] for u in out["a_usage"]] == ["length"] * 3
    assert all(u["output_tokens"] <= 2 for u in out["a_usage"])


def test_an_incomplete_response_keeps_its_text(sim):
    sim.configure(p_length=1.0, seed=2)  # /responses answers status "incomplete" (max_output_tokens)
    out = rows(3).with_column("a", ask(sim, usage_column=True, use_chat_completions=False)).to_pydict()
    assert all(a is not None for a in out["a"]) and out["a_error"] == [None] * 3
    assert [u["finish_reason"] for u in out["a_usage"]] == ["length"] * 3


def test_structured_answers_cut_off_stay_errors_with_the_raw_text(sim):
    out = rows(3).with_column("a", ask(sim, return_format=["yes", "no"], max_tokens=1, usage_column=True,
                                       use_chat_completions=True)).to_pydict()
    assert out["a"] == [None] * 3
    assert {e["kind"] for e in out["a_error"]} == {"length"}
    assert all(e["raw"] is not None and "max_tokens" in e["message"] for e in out["a_error"])
    assert last_run()[0]["truncated"] == 0 and last_run()[0]["errors"] == 3


def test_wrong_key_stops_fast_without_leaking_it(sim, caplog):
    t = time.perf_counter()
    with caplog.at_level("ERROR", logger="asyncio"), pytest.raises(Exception) as e:
        rows(500).with_column("a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="sk-wrong-key",
                                          model="gpt-5-mini")).collect()
    assert time.perf_counter() - t < 5
    time.sleep(0.5)
    gc.collect()
    # The batches still in flight when the job stopped fail too: their errors are retrieved, never logged as lost.
    assert [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()] == []
    assert "401" in str(e.value)
    assert "sk-wrong-key" not in str(e.value)
    assert sim.stats()["total_requests"] < 200


def test_unreachable_server_stops_fast():
    t = time.perf_counter()
    with pytest.raises(Exception, match="Cannot reach") as e:
        rows(100).with_column("a", prompt(col("q"), provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k",
                                          model="gpt-5-mini", max_retries=10)).collect()
    assert time.perf_counter() - t < 15
    # Where nothing answered and what to do, said once.
    assert "nothing answers at http://127.0.0.1:9/v1/responses" in str(e.value)
    assert str(e.value).count("base_url") == 1 and ".." not in str(e.value)


def test_missing_key_and_unknown_provider_fail_before_any_request(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ifr.PlanError, match="needs an API key"):
        prompt(col("q"), provider="openai", model="gpt-5")
    with pytest.raises(ifr.PlanError, match="Unknown provider 'opnai'"):
        prompt(col("q"), provider="opnai", model="gpt-5")
    with pytest.raises(ifr.ColumnNotFoundError):
        rows(1).with_column("a", prompt(col("qq"), provider="openai", base_url="http://x/v1", model="m"))


def test_key_never_reaches_the_plan_or_a_pickle(sim):
    df = rows(3).with_column("a", ask(sim))
    blob = cloudpickle.dumps(df._plan)
    assert KEY.encode() not in blob
    assert KEY not in df.explain()


def test_max_cost_marks_the_rest_not_run(sim):
    ifr.set_prices({"sim-priced": (1000.0, 1000.0)})
    sim.configure(allow_unknown_models=True)
    out = rows(50).with_column("a", ask(sim, model="sim-priced", max_cost=0.05, max_tokens=20,
                                        max_concurrency=1)).to_pydict()
    not_run = [e for e in out["a_error"] if e and e["kind"] == "budget"]
    answered = [a for a in out["a"] if a]
    assert answered and not_run and len(answered) + len(not_run) == 50
    assert last_run()[0]["cost"] <= 0.05  # a cap: each request's worst case is reserved before it is sent


def test_usage_column_and_cost(sim):
    out = rows(4).with_column("a", ask(sim, usage_column=True)).to_pydict()
    u = out["a_usage"][0]
    assert u["input_tokens"] > 0 and u["output_tokens"] > 0 and u["cost"] > 0


def test_ctrl_c_mid_run_stops_cleanly(sim):
    # In a fresh interpreter, as a user's script: what earlier tests left in this process must not decide it.
    from udf_helpers import interrupted_job

    sim.configure(latency_ms=2000)
    seconds, threads = interrupted_job(f"""
import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
df = ifr.from_pydict({{"q": [f"question {{i}}" for i in range(300)]}}).with_column(
    "a", prompt(col("q"), provider="openai", base_url={sim.base_url!r}, api_key={KEY!r}, model="gpt-5-mini"))
""", after=0.7)
    assert seconds < 8
    assert threads == "THREADS []"


def test_estimate_before_running(sim):
    df = rows(40).with_column("a", ask(sim, max_tokens=20))
    est = df.estimate()
    call = est["calls"][0]
    assert call["rows"] == 40 and call["max_output_tokens"] == 800
    assert call["input_tokens"] > 40
    assert est["cost_usd"] > 0
    assert sim.stats()["total_requests"] == 0  # nothing was sent


def test_vllm_provider_sends_structured_outputs_in_extra_body():
    from typing import Literal

    with Simulator(SimulatorConfig(record_requests=True, reject_unknown_params=False)) as sim:
        df = rows(2).with_column("a", prompt(col("q"), Literal["yes", "no"], provider="vllm", base_url=sim.base_url,
                                             model="gpt-5-mini"))
        df.collect()
        body = sim.requests()[0]["body"]
    assert "structured_outputs" in body and "response_format" not in body
    assert body["structured_outputs"]["json"]["properties"]["label"]["enum"] == ["yes", "no"]


def test_providers_are_registered_through_entry_points():
    from importlib.metadata import entry_points

    from inferframe.providers.registry import REGISTRY

    names = {ep.name for ep in entry_points(group="inferframe.providers")}
    assert {"openai", "local"} <= names
    assert {"openai", "lm_studio", "local", "vllm", "ollama", "openrouter"} <= set(REGISTRY.names())


def test_two_prompt_columns_share_one_concurrency_bound(sim):
    sim.configure(latency_ms=20)
    df = rows(600).with_columns({  # several batches, so both columns' stages run at the same time
        "a": ask(sim, max_concurrency=8, system_message="one", cache="off"),
        "b": ask(sim, max_concurrency=8, system_message="two", cache="off"),
    })
    sim.reset()
    out = df.to_pydict()
    assert out["a_error"] == [None] * 600 and out["b_error"] == [None] * 600
    assert sim.stats()["max_in_flight"] <= 8  # one bound for the model, not one per column
