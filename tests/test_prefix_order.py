"""prompt() sends rows that share a prompt prefix together: against the simulator's prefix cache and the real local llama.cpp server."""

from __future__ import annotations

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.providers import openai as openai_providers
from inferframe.providers.local_server import get_local_server, stop_local_server
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-prefix"
DOCS = [f"Document {g}: " + " ".join(f"w{g}x{k}" for k in range(300)) + "\n" for g in range(6)]


def _answer(request: dict) -> str:
    text = request["messages"][-1]["content"] if "messages" in request else request["input"]
    return text[text.rindex("Question "):]


def _rows(per_doc: int, n_docs: int = 6) -> list[str]:
    return [DOCS[i % n_docs] + f"Question {i}" for i in range(per_doc * n_docs)]


@pytest.fixture
def sim():
    # Room for about two documents: interleaved rows evict each other, grouped rows hit.
    cfg = SimulatorConfig(require_api_key=KEY, responder=_answer, prefix_cache_tokens=2_000, record_requests=True,
                          record_max=10_000)
    with Simulator(cfg) as s:
        yield s


def _run(sim, texts, **kw):
    df = ifr.from_pydict({"q": texts}).with_column(
        "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini",
                    cache="off", max_concurrency=4, **kw))
    return df.to_pydict()


def test_grouped_rows_keep_their_output_order_and_hit_the_servers_prefix_cache(sim):
    texts = _rows(10)
    out = _run(sim, texts)
    assert out["a"] == [f"Question {i}" for i in range(len(texts))]  # every answer in its own row
    stats = last_run()[0]
    assert stats["cached_tokens"] > 0.8 * stats["input_tokens"]
    sent = [r["body"]["input"] for r in sim.requests()]
    docs = [t.split(":")[0] for t in sent]
    switches = sum(1 for a, b in zip(docs, docs[1:]) if a != b)
    # Grouped, not interleaved (59 switches): each group once, its warming row, and the jitter of 4 connections.
    assert switches < len(texts) // 2
    # One cache-routing key per document, the same for all its rows.
    keys = {}
    for r in sim.requests():
        keys.setdefault(r["body"]["input"].split(":")[0], set()).add(r["body"]["prompt_cache_key"])
    assert all(len(k) == 1 for k in keys.values()) and len(set().union(*keys.values())) == 6


def test_arrival_order_misses_the_cache_where_grouping_hits(sim):
    texts = _rows(10)
    out = _run(sim, texts, prefix_order=False)
    assert out["a"] == [f"Question {i}" for i in range(len(texts))]
    stats = last_run()[0]
    assert stats["cached_tokens"] < 0.2 * stats["input_tokens"]
    sent = [r["body"]["input"] for r in sim.requests()]
    assert "prompt_cache_key" not in sim.requests()[0]["body"]
    assert sorted(sent) == sorted(texts)


def test_bad_prefix_options_are_plan_errors():
    with pytest.raises(ifr.PlanError, match="prefix_window"):
        prompt(col("q"), model="gemma-3-270m", prefix_window=0)
    with pytest.raises(ifr.PlanError, match="prefix_order"):
        prompt(col("q"), model="gemma-3-270m", prefix_order="yes")


def test_groups_go_to_one_slot_each_on_the_real_local_server(monkeypatch):
    routed = []
    original = openai_providers.LlamaCppProvider.routed

    def spy(self, body, lane, group):
        out = original(self, body, lane, group)
        routed.append((out.get("id_slot"), out.get("cache_prompt"), body["messages"][-1]["content"].split(":")[0]))
        return out

    monkeypatch.setattr(openai_providers.LlamaCppProvider, "routed", spy)
    # A server with 4 slots (another test may have started one with fewer): 3 documents, one slot each.
    stop_local_server()
    get_local_server(4)
    texts = [DOCS[i % 3][:900] + f"\nQuestion {i}: yes or no?" for i in range(24)]
    df = ifr.from_pydict({"q": texts}).with_column(
        "a", prompt(col("q"), provider="local", max_tokens=2, temperature=0, cache="off", usage_column=True))
    try:
        out = df.to_pydict()
    finally:
        stop_local_server()  # the next test starts the default server again
    assert len(routed) == 24 and all(cp is True and slot is not None for slot, cp, _ in routed)
    slots_of: dict[str, set] = {}
    groups_of: dict[int, set] = {}
    for slot, _, doc in routed:
        slots_of.setdefault(doc, set()).add(slot)
        groups_of.setdefault(slot, set()).add(doc)
    # A slot serves a document's rows one after another and never goes back to a document it left; a free
    # slot helps a document only while it has rows to spare, so few (slot, document) pairs form.
    for slot in groups_of:
        seq = [doc for s, _, doc in routed if s == slot]
        runs = [d for k, d in enumerate(seq) if k == 0 or seq[k - 1] != d]
        assert len(runs) == len(set(runs)), seq
    assert sum(len(s) for s in slots_of.values()) <= 2 * len(slots_of), slots_of
    # The slot's cache serves its document: only a slot's first row of a document reads it in full.
    cached = [u["cached_tokens"] / u["input_tokens"] for u in out["a_usage"]]
    misses = sum(1 for c in cached if c < 0.5)
    assert misses <= sum(len(s) for s in slots_of.values()), cached
