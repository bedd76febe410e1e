"""Never pay twice: the response cache, in-run dedupe and resume after a kill."""

import collections
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.runtime.cache import ResponseCache, cache_key
from inferframe.simulator import Simulator, SimulatorConfig


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(allow_unknown_models=True)) as s:
        yield s


def ask(sim, cache_dir, **kw):
    kw.setdefault("model", "gpt-5-mini")
    return prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=kw.pop("api_key", "sk-one"),
                  cache_dir=str(cache_dir), **kw)


def test_key_ignores_the_api_key_and_changes_with_every_answer_field(sim, tmp_path):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    k = cache_key("openai:http://x/v1", "chat", body)
    assert k == cache_key("openai:http://x/v1", "chat", dict(reversed(list(body.items()))))  # canonical JSON
    for other in (
        cache_key("openai:http://y/v1", "chat", body),
        cache_key("openai:http://x/v1", "responses", body),
        cache_key("openai:http://x/v1", "chat", {**body, "model": "m2"}),
        cache_key("openai:http://x/v1", "chat", {**body, "temperature": 1}),
        cache_key("openai:http://x/v1", "chat", {**body, "messages": [{"role": "user", "content": "hi!"}]}),
        cache_key("openai:http://x/v1", "chat", {**body, "response_format": {"type": "json_object"}}),
        cache_key("openai:http://x/v1", "chat", body, prompt_version="v2"),
    ):
        assert other != k
    df = ifr.from_pydict({"q": ["a", "b"]})
    df.with_column("a", ask(sim, tmp_path, api_key="sk-one")).collect()
    sent = sim.stats()["total_requests"]
    df.with_column("a", ask(sim, tmp_path, api_key="sk-two")).collect()  # another key: same answers, from cache
    assert sim.stats()["total_requests"] == sent
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"sk-one" not in raw and b"sk-two" not in raw
    assert oct(os.stat(tmp_path / "responses.sqlite").st_mode & 0o777) == "0o600"


def test_rerun_is_served_from_the_cache(sim, tmp_path):
    df = ifr.from_pydict({"q": [f"q{i}" for i in range(300)]}).with_column("a", ask(sim, tmp_path))
    first = df.to_pydict()
    assert sim.stats()["total_requests"] == 300
    second = df.to_pydict()
    assert second == first
    assert sim.stats()["total_requests"] == 300
    from inferframe.observe import last_run

    assert last_run()[0]["cache_hits"] == 300 and last_run()[0]["requests"] == 0


def test_policies(sim, tmp_path):
    df = ifr.from_pydict({"q": ["x", "y"]})
    df.with_column("a", ask(sim, tmp_path, cache="read_only")).collect()
    assert len(ResponseCache(tmp_path)) == 0  # read_only never writes
    df.with_column("a", ask(sim, tmp_path)).collect()
    assert len(ResponseCache(tmp_path)) == 2 and sim.stats()["total_requests"] == 4
    df.with_column("a", ask(sim, tmp_path, cache="refresh")).collect()
    assert sim.stats()["total_requests"] == 6  # refresh sends again and overwrites
    df.with_column("a", ask(sim, tmp_path, cache="off")).collect()
    assert sim.stats()["total_requests"] == 8
    with pytest.raises(ifr.PlanError, match="cache must be one of"):
        ask(sim, tmp_path, cache="sometimes")


def test_identical_rows_share_one_request(sim, tmp_path):
    sim.configure(latency_ms=200)
    out = ifr.from_pydict({"q": ["same question"] * 1000}).with_column("a", ask(sim, tmp_path)).to_pydict()
    assert out["a"] == ["sim answer: same question"] * 1000
    assert sim.stats()["total_requests"] == 1
    # Without the cache, rows in flight together still share one call.
    sim.reset()
    sim.configure(latency_ms=200)
    ifr.from_pydict({"q": ["again"] * 1000}).with_column("a", ask(sim, tmp_path, cache="off")).collect()
    assert 1 <= sim.stats()["total_requests"] <= 10


def test_failed_rows_are_not_cached_and_run_again(sim, tmp_path):
    sim.configure(fail_rules=[{"match": "q3", "status": 400}])
    df = ifr.from_pydict({"q": [f"q{i}" for i in range(6)]}).with_column("a", ask(sim, tmp_path))
    assert df.to_pydict()["a"][3] is None
    sim.configure(fail_rules=[])
    before = sim.stats()["total_requests"]
    assert df.to_pydict()["a"][3] == "sim answer: q3"
    assert sim.stats()["total_requests"] == before + 1


JOB = textwrap.dedent("""
    import sys
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    base_url, cache_dir, out = sys.argv[1:4]
    df = ifr.from_pydict({"q": [f"row {i}" for i in range(400)]}).into_batches(20)
    df = df.with_column("a", prompt(col("q"), provider="openai", base_url=base_url, api_key="k",
                                    model="gpt-5-mini", cache_dir=cache_dir, max_concurrency=16))
    df.write_parquet(out)
""")


def test_killed_runs_resume_without_paying_twice(tmp_path):
    """kill -9 a job at several points; each restart sends only what never came back."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    with Simulator(SimulatorConfig(latency_ms=40, record_requests=True, record_max=2000)) as sim:
        cache_dir, out = tmp_path / "cache", tmp_path / "out"
        for target in (40, 150, 260):  # kill when the server has seen this many requests in all
            proc = subprocess.Popen([sys.executable, str(script), sim.base_url, str(cache_dir), str(out)])
            deadline = time.monotonic() + 60
            while sim.stats()["total_requests"] < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            assert not out.exists() or not any(p.name.startswith("part-") for p in out.iterdir())  # atomic writer
        before = sim.stats()["total_requests"]
        assert 0 < before < 400
        subprocess.run([sys.executable, str(script), sim.base_url, str(cache_dir), str(out)], check=True, timeout=120)
        total = sim.stats()["total_requests"]
        # A row's request is its body less the cache-routing hint: prompt_cache_key names the prefix
        # group the row went out with, which may differ when a killed run's row is sent again.
        sent = collections.Counter(json.dumps({k: v for k, v in r["body"].items() if k != "prompt_cache_key"},
                                              sort_keys=True) for r in sim.requests())
    got = ifr.read_parquet(str(out)).sort("q").to_pydict()
    assert got["a"] == sorted(f"sim answer: row {i}" for i in range(400))
    # Only requests in flight at a kill may go out twice: at most 16 per kill.
    assert total <= 400 + 3 * 16 and sum(sent.values()) == total
    assert len(sent) == 400  # every row was answered once at least
    dupes = sum(c - 1 for c in sent.values() if c > 1)
    assert dupes <= 3 * 16


def test_rows_over_the_budget_run_on_the_next_start(sim, tmp_path):
    ifr.set_prices({"priced": (1000.0, 1000.0)})
    df = ifr.from_pydict({"q": [f"q{i}" for i in range(30)]})
    capped = df.with_column("a", ask(sim, tmp_path, model="priced", max_cost=0.05, max_tokens=20,
                                     max_concurrency=1)).to_pydict()
    not_run = [i for i, e in enumerate(capped["a_error"]) if e and e["kind"] == "budget"]
    assert not_run and len(not_run) < 30
    sent = sim.stats()["total_requests"]
    again = df.with_column("a", ask(sim, tmp_path, model="priced", max_tokens=20, max_concurrency=1)).to_pydict()
    assert again["a_error"] == [None] * 30
    assert sim.stats()["total_requests"] - sent == len(not_run)  # only the rows the cap held back were sent


def test_a_partly_cached_rerun_sends_only_the_rest_and_keeps_the_order(sim, tmp_path):
    from inferframe.observe import last_run

    qs = [f"q{i}" for i in range(400)]
    ifr.from_pydict({"q": qs[::2]}).with_column("a", ask(sim, tmp_path)).collect()
    assert sim.stats()["total_requests"] == 200
    out = ifr.from_pydict({"q": qs}).with_column("a", ask(sim, tmp_path, usage_column=True)).to_pydict()
    assert out["a"] == [f"sim answer: {q}" for q in qs]
    assert sim.stats()["total_requests"] == 400  # only the rows the first run did not ask
    run = last_run()[0]
    assert (run["cache_hits"], run["requests"], run["rows_done"]) == (200, 200, 400)
    # A cached row cost nothing in this run; a sent one shows what it used.
    assert all(u["input_tokens"] == 0 and u["cost"] == 0 for u in out["a_usage"][::2])
    assert all(u["input_tokens"] > 0 for u in out["a_usage"][1::2])


# --- a cached answer keeps what the first answer had (issue 22 item 6) ----------------------------

def test_a_rerun_from_the_cache_gives_the_same_output_finish_reason_included(sim, tmp_path):
    from inferframe.observe import last_run

    df = ifr.from_pydict({"q": [f"q{i}" for i in range(4)]})
    job = df.with_column("a", ask(sim, tmp_path, max_tokens=2, usage_column=True, use_chat_completions=True))
    with pytest.warns(ifr.observe.TruncatedWarning):
        first = job.to_pydict()
    assert [u["finish_reason"] for u in first["a_usage"]] == ["length"] * 4
    sent = sim.stats()["total_requests"]
    with pytest.warns(ifr.observe.TruncatedWarning):  # the output still holds cut answers: said again
        again = job.to_pydict()
    assert sim.stats()["total_requests"] == sent  # all from the cache
    assert again["a"] == first["a"] and again["a_error"] == first["a_error"]
    assert [u["finish_reason"] for u in again["a_usage"]] == ["length"] * 4
    assert last_run()[0]["cache_hits"] == 4 and last_run()[0]["truncated"] == 4


def test_a_partly_cached_rerun_keeps_the_finish_reason_of_its_cached_rows(sim, tmp_path):
    # The path that builds a Result per row (some rows sent, some cached), not the all-cached one.
    sim.configure(p_length=0.5, seed=3)  # about half the answers cut at max_tokens, the rest whole
    qs = [f"q{i}" for i in range(32)]
    job = ask(sim, tmp_path, usage_column=True, use_chat_completions=True)
    first = ifr.from_pydict({"q": qs[:16]}).with_column("a", job).to_pydict()
    reasons = [u["finish_reason"] for u in first["a_usage"]]
    assert {"length", "stop"} <= set(reasons)
    both = ifr.from_pydict({"q": qs}).with_column("a", job).to_pydict()
    assert sim.stats()["total_requests"] == 32  # the first 16 from the cache
    assert [u["finish_reason"] for u in both["a_usage"]][:16] == reasons


def test_a_cut_structured_answer_from_the_cache_is_the_same_length_error(sim, tmp_path):
    job = ifr.from_pydict({"q": ["q0", "q1"]}).with_column(
        "a", ask(sim, tmp_path, return_format=["yes", "no"], max_tokens=1, use_chat_completions=True))
    first = job.to_pydict()
    assert {e["kind"] for e in first["a_error"]} == {"length"}
    sent = sim.stats()["total_requests"]
    again = job.to_pydict()
    assert sim.stats()["total_requests"] == sent
    # Without the stored finish_reason the cut JSON was checked as if whole: a "schema" error.
    assert [e["kind"] for e in again["a_error"]] == ["length", "length"]


def test_cache_entries_stored_before_finish_reason_was_kept_still_read(sim, tmp_path):
    import sqlite3

    from inferframe.runtime.cache import MIGRATIONS

    df = ifr.from_pydict({"q": ["q0", "q1"]})
    first = df.with_column("a", ask(sim, tmp_path / "new", max_tokens=2, usage_column=True,
                                    use_chat_completions=True)).to_pydict()
    assert [u["finish_reason"] for u in first["a_usage"]] == ["length"] * 2
    stored = sqlite3.connect(tmp_path / "new" / "responses.sqlite").execute(
        "SELECT key, value, input_tokens, output_tokens, created FROM responses").fetchall()
    # The same answers in a cache written by the release before: two migrations, no finish_reason.
    (tmp_path / "old").mkdir()
    db = sqlite3.connect(tmp_path / "old" / "responses.sqlite", isolation_level=None)
    for step in MIGRATIONS[:2]:
        step(db)
    db.execute("PRAGMA user_version = 2")
    db.executemany("INSERT INTO responses VALUES (?, ?, ?, ?, ?)", stored)
    db.close()
    sent = sim.stats()["total_requests"]
    out = df.with_column("a", ask(sim, tmp_path / "old", max_tokens=2, usage_column=True,
                                  use_chat_completions=True)).to_pydict()
    assert sim.stats()["total_requests"] == sent  # every answer read from the old entries
    assert out["a"] == first["a"] and [u["finish_reason"] for u in out["a_usage"]] == [None, None]
    cache = ResponseCache(tmp_path / "old")
    assert cache.get(stored[0][0])[3] is None
    cache.put("new", "x", 1, 1, "stop")  # the migrated table keeps it from now on
    assert ResponseCache(tmp_path / "old").get("new") == ("x", 1, 1, "stop")


@pytest.mark.timeout(600)
def test_the_local_model_cut_at_max_tokens_says_length_again_from_the_cache(tmp_path):
    """The issue's reproduction: prompt(..., provider="local", max_tokens=8, usage_column=True) twice."""
    from inferframe.observe import last_run

    df = ifr.from_pydict({"q": ["Write a long story about a dragon who loves tea."]})
    job = df.with_column("a", prompt(col("q"), provider="local", max_tokens=8, temperature=0, usage_column=True,
                                     cache_dir=str(tmp_path)))
    with pytest.warns(ifr.observe.TruncatedWarning):
        first = job.to_pydict()
    assert first["a_usage"][0]["finish_reason"] == "length"
    with pytest.warns(ifr.observe.TruncatedWarning):
        again = job.to_pydict()
    assert last_run()[0]["cache_hits"] == 1 and last_run()[0]["requests"] == 0
    assert again["a"] == first["a"] and again["a_usage"][0]["finish_reason"] == "length"
