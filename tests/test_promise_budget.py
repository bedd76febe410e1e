"""The README's promise about budgets, one test per sentence (issue 41 item 2): a budget is a cap.

Each test runs the product as a user does, against the project's OpenAI simulator with prices set
(``ifr.set_prices``); the CLI test runs the installed ``inferframe`` program in its own process.
"""

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-budget-test-secret-7"
PRICE = (0.25, 2.0)  # dollars per million input / output tokens


@pytest.fixture(autouse=True)
def _session_restored(monkeypatch):
    """The prices ``ask`` sets (gpt-5-mini's among them, without its cached rate) end with the test: the process's
    session is put back, so a later test in the same process sees the published prices."""
    from inferframe import session

    monkeypatch.setattr(session, "_current", session.current())


@pytest.fixture
def sim():
    # 20 ms a request: many requests are in flight when the cap is reached, as against a real API.
    with Simulator(SimulatorConfig(require_api_key=KEY, allow_unknown_models=True, latency_ms=20)) as s:
        yield s


def rows(n):
    return ifr.from_pydict({"q": [f"question number {i}: what is {i} times {i + 1}?" for i in range(n)]})


def ask(sim, tmp_path, model="budget-model", **kw):
    ifr.set_prices({model: PRICE})
    return prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model=model,
                  cache_dir=str(tmp_path / "cache"), **kw)


def run_quietly(df):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = df.to_pydict()
    return out, [w for w in seen if w.category.__name__ == "BudgetExceededWarning"]


def test_promise_a_budget_is_a_cap(sim, tmp_path):
    cap = 0.001
    out, _ = run_quietly(rows(600).with_column("a", ask(sim, tmp_path, max_tokens=50, max_cost=cap)))
    run = last_run()[0]
    answered = [a for a in out["a"] if a]
    not_run = [e for e in out["a_error"] if e and e["kind"] == "budget"]
    assert answered and not_run and len(answered) + len(not_run) == 600
    assert 0 < run["cost"] <= cap  # today: $0.00304 for a $0.001 cap
    assert sim.stats()["total_requests"] == len(answered)


def test_promise_a_token_budget_is_a_cap_too(sim, tmp_path):
    budget = 3_000
    out, _ = run_quietly(rows(600).with_column("a", ask(sim, tmp_path, max_tokens=50, max_tokens_budget=budget)))
    run = last_run()[0]
    assert any(e and e["kind"] == "budget" for e in out["a_error"])
    assert 0 < run["input_tokens"] + run["output_tokens"] <= budget


def test_promise_without_max_tokens_a_request_is_reserved_at_the_models_output_limit(sim, tmp_path):
    # gpt-5-mini answers up to 128,000 tokens: at $2/M one request may cost $0.256, more than the cap.
    out, seen = run_quietly(rows(50).with_column("a", ask(sim, tmp_path, model="gpt-5-mini", max_cost=0.1)))
    assert sim.stats()["total_requests"] == 0 and last_run()[0]["cost"] == 0
    assert [e["kind"] for e in out["a_error"]] == ["budget"] * 50
    assert len(seen) == 1 and "max_tokens" in str(seen[0].message)


def test_promise_hitting_the_cap_gives_one_budget_exceeded_warning(sim, tmp_path):
    df = rows(600).with_column("a", ask(sim, tmp_path, max_tokens=50, max_cost=0.001))
    out, seen = run_quietly(df)
    assert len(seen) == 1
    not_run = sum(1 for e in out["a_error"] if e and e["kind"] == "budget")
    spent = last_run()[0]["cost"]
    text = str(seen[0].message)
    assert f"${spent:.6f}" in text and "max_cost=0.001" in text  # what was spent, and the cap
    assert f"{not_run:,} of 600 rows were not run" in text
    assert seen[0].category is ifr.BudgetExceededWarning
    suggested = float(re.search(r"raise the cap \(e\.g\. max_cost=([0-9.]+)", text).group(1))
    assert suggested > 0.001 and "response cache" in text  # how to go on
    # ...and the advice holds: a rerun with the suggested cap pays only for the rest, and finishes.
    sent = sim.stats()["total_requests"]
    again, seen = run_quietly(rows(600).with_column("a", ask(sim, tmp_path, max_tokens=50, max_cost=suggested)))
    assert seen == [] and again["a_error"] == [None] * 600
    assert sim.stats()["total_requests"] - sent == not_run


def test_promise_under_on_error_raise_hitting_the_cap_is_an_error(sim, tmp_path):
    df = rows(600).with_column("a", ask(sim, tmp_path, max_tokens=50, max_cost=0.001, on_error="raise"))
    with pytest.raises(ifr.BudgetExceededError, match=r"max_cost=0\.001.*spent.*response cache"):
        df.collect()
    # What was paid for is kept: a rerun without the cap finds those answers in the cache.
    paid = sim.stats()["total_requests"]
    assert paid > 0
    rows(600).with_column("a", ask(sim, tmp_path, max_tokens=50)).collect()
    assert sim.stats()["total_requests"] == 600  # every row sent once in all: none paid twice


def _program():
    script = Path(sys.executable).parent / "inferframe"
    return [str(script)] if script.exists() else [sys.executable, "-m", "inferframe"]


def test_promise_the_cli_max_cost_is_a_cap(sim, tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text("review\n" + "".join(f"review number {i} with a few more words in it\n" for i in range(600)))
    cap = 0.0005
    proc = subprocess.run([*_program(), "prompt", str(path), "-c", "review", "--provider", "openai",
                           "--base-url", sim.base_url, "--model", "gpt-5-mini", "--max-tokens", "50",
                           "--max-cost", str(cap), "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OPENAI_API_KEY": KEY})
    assert proc.returncode == 1, proc.stderr
    spent = float(re.search(r"done: .*?\$([0-9.]+)", proc.stderr).group(1))
    assert 0 < spent <= cap  # today: $0.002845 for a $0.0005 cap
    assert proc.stderr.count("reached its budget") == 1  # one warning
    assert "--max-cost" in proc.stderr and "rows were not run" in proc.stderr
