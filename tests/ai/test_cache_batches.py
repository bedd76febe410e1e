"""Cached rows are looked up per batch (one query per morsel) and skip the per-row async path.

MockProvider and a FakeClock: no HTTP, no real sleeping, no timing.
"""

import asyncio
import pickle

import pytest

from inferframe.ai.config import AICallConfig
from inferframe.ai.prompt import PromptOperator
from inferframe.ai.requests import EstimatedRequest, build_request
from inferframe.providers.interface import MockProvider, Outcome, Request, Usage
from inferframe.providers.openai import OpenAIProvider
from inferframe.providers.spec import ProviderSpec
from inferframe.runtime import InferenceRuntime, RuntimeConfig
from inferframe.runtime.cache import CacheReader, ResponseCache, cache_key, cache_keys
from inferframe.runtime.clock import FakeClock


def run(coro):
    return asyncio.run(coro)


def answer(r: Request) -> Outcome:
    return Outcome(value=f"new {r.body['q']}", usage=Usage(10, 2))


async def later(r: Request) -> Outcome:
    await asyncio.sleep(0)  # still in flight when the next row starts
    return answer(r)


def runtime(tmp_path, policy="read_write", handler=answer, **kw):
    provider = MockProvider(handler)
    config = RuntimeConfig(cache_policy=policy, cache_dir=str(tmp_path), price=(1.0, 1.0), **kw)
    return InferenceRuntime(provider, config, model="m", clock=FakeClock()), provider


def seed(rt, qs):
    rt.cache.put_many([(cache_key(rt.identity, "chat", {"q": q}), f"old {q}", 7, 3) for q in qs])


def selects(cache: ResponseCache) -> list[str]:
    seen: list[str] = []
    cache._db.set_trace_callback(lambda sql: seen.append(sql) if sql.lstrip().upper().startswith("SELECT") else None)
    return seen


# --- the cache ------------------------------------------------------------------------------------


def test_cache_keys_are_the_keys_of_cache_key():
    reqs = [Request("chat", {"model": "m", "messages": [{"role": "user", "content": f"é {i}"}], "n": i}) for i in range(3)]
    reqs += [None, Request("responses", {"input": "x", "z": {"b": 1, "a": [1.5, None]}}), Request("embeddings", {})]
    for version in (None, "v2"):
        assert cache_keys("openai:http://x/v1", reqs, version) == [
            None if r is None else cache_key("openai:http://x/v1", r.endpoint, r.body, version) for r in reqs
        ]
    assert cache_keys("p", []) == []


def test_get_many_answers_in_the_order_asked_with_one_query_per_500_keys(tmp_path):
    cache = ResponseCache(tmp_path)
    keys = [f"k{i}" for i in range(1200)]
    cache.put_many([(k, {"n": i, "v": [1.5, "é"]}, i, 1) for i, k in enumerate(keys) if i % 3])
    seen = selects(cache)
    asked = ["missing", *reversed(keys), "k1", "k1"]
    got = cache.get_many(asked)
    assert len(seen) == 3  # 1,200 distinct keys: three queries, never one per key
    assert got == [cache.get(k) for k in asked]
    assert got[0] is None and got[-1] == got[-2] == ({"n": 1, "v": [1.5, "é"]}, 1, 1, None)
    assert cache.get_many([]) == [] and cache.get_many(["nope"]) == [None]


def test_get_many_reads_values_json_wrote_that_orjson_refuses(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put("plain", "ok", 1, 1)
    cache._db.execute("INSERT INTO responses (key, value, input_tokens, output_tokens, created)"
                      " VALUES ('nan', '[NaN, 1]', 1, 1, 0)")  # an old json-written row
    value, _, _, _ = cache.get_many(["nan", "plain"])[0]
    assert value[0] != value[0] and value[1] == 1
    assert cache.get_many(["plain", "nan"])[0] == ("ok", 1, 1, None)


def stored_in(cache: ResponseCache, keys: list[str]) -> None:
    cache.put_many([(k, f"answer {k}", 1, 1) for k in keys])


@pytest.mark.parametrize("order", ["in order", "jittered", "among another job's", "reversed"])
def test_the_reader_answers_every_batch_whatever_order_the_answers_were_stored_in(tmp_path, order):
    import random

    keys = [f"k{i:05d}" for i in range(3000)]
    stored = list(keys)
    rng = random.Random(7)
    if order == "jittered":  # as a first run stores them: rows in flight together finish in any order
        stored = sorted(keys, key=lambda k: int(k[1:]) + rng.uniform(-300, 300))
    elif order == "reversed":
        stored.reverse()
    cache = ResponseCache(tmp_path)
    if order == "among another job's":
        for i in range(0, 3000, 100):
            stored_in(cache, stored[i:i + 100])
            stored_in(cache, [f"other{i}-{j}" for j in range(150)])
    else:
        stored_in(cache, stored)
    reader = cache.reader()
    asked = keys + ["absent"]
    seen = selects(cache)
    got = []
    for i in range(0, len(asked), 128):
        got += reader.get_many(asked[i:i + 128])
    assert got == cache.get_many(asked) and got[-1] is None and got[0] == ("answer k00000", 1, 1, None)
    batches = -(-len(asked) // 128)
    assert len(seen) <= batches * (CacheReader.rounds + 2)
    if order in ("in order", "jittered"):
        assert reader.by_key < 0.2 * len(asked) and reader.read_on < 2 * len(asked)
    assert len(reader.window) <= reader.max_rows


def test_the_reader_window_is_bounded_in_rows_and_bytes(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put_many([(f"k{i}", "x" * 1000, 1, 1) for i in range(2000)])
    reader = CacheReader(cache, max_rows=500, max_bytes=100_000)
    for i in range(0, 2000, 128):
        assert all(reader.get_many([f"k{j}" for j in range(i, min(i + 128, 2000))]))
        assert len(reader.window) <= 500 and reader.bytes <= 100_000


# --- the runtime ----------------------------------------------------------------------------------


def test_a_cached_batch_is_one_query_no_task_and_no_send(tmp_path, monkeypatch):
    rt, provider = runtime(tmp_path)
    seed(rt, range(1280))
    seen = selects(rt.cache)

    async def no_row_path(*a, **k):
        raise AssertionError("a cached row took the per-row path")

    monkeypatch.setattr(rt, "_run_keyed", no_row_path)
    monkeypatch.setattr(rt, "run_one", no_row_path)
    reqs = [Request("chat", {"q": i}) for i in range(1280)]
    results = []
    for i in range(0, 1280, 128):  # the prompt operator's morsels
        results += run(rt.run_many(reqs[i:i + 128]))
    # The first batch by key, the next ones reading on in the order the answers were stored.
    assert len(seen) == 10 and not [q for q in seen if "key = ?" in q] and provider.requests == []
    assert rt._cache_reader.by_key == 128
    assert [r.value for r in results] == [f"old {i}" for i in range(1280)]
    # A cached answer cost nothing in this run.
    assert all(r.usage == Usage() and r.cost == 0.0 and r.attempts == 0 and r.error is None for r in results)
    s = rt.stats
    assert (s.cache_hits, s.rows_done, s.requests, s.input_tokens, s.cost) == (1280, 1280, 0, 0, 0.0)
    assert list(rt.breaker.recent) == [True] * len(rt.breaker.recent) and len(rt.breaker.recent) > 0


def test_a_mixed_batch_sends_only_the_misses_and_keeps_the_order(tmp_path):
    rt, provider = runtime(tmp_path, handler=later)
    seed(rt, [0, 2, 5])
    reqs = [Request("chat", {"q": i}) if i != 3 else None for i in range(7)] + [Request("chat", {"q": 4})]
    results = run(rt.run_many(reqs))
    values = [r and r.value for r in results]
    assert values == ["old 0", "new 1", "old 2", None, "new 4", "old 5", "new 6", "new 4"]
    assert sorted(r.body["q"] for r in provider.requests) == [1, 4, 6]  # the repeated 4 shares one call
    s = rt.stats
    assert (s.cache_hits, s.requests, s.deduped, s.rows_done) == (3, 3, 1, 7)
    assert results[1].usage == Usage(10, 2) and results[1].cost == pytest.approx(12 / 1e6)
    assert results[7].usage == Usage() and results[7].cost == 0.0  # paid once, by the first row
    assert rt.cache.get(cache_key(rt.identity, "chat", {"q": 6}))[0] == "new 6"  # stored as it arrived
    again = run(rt.run_many(reqs))
    assert [r and r.value for r in again] == values and len(provider.requests) == 3


@pytest.mark.parametrize("policy, sent, stored", [("read_only", 2, False), ("refresh", 3, True), ("off", 3, False)])
def test_policies_in_batches(tmp_path, policy, sent, stored):
    writer, _ = runtime(tmp_path)
    seed(writer, [0])
    rt, provider = runtime(tmp_path, policy)
    results = run(rt.run_many([Request("chat", {"q": i}) for i in range(3)]))
    assert len(provider.requests) == sent and rt.stats.cache_hits == 3 - sent
    assert [r.value for r in results][1:] == ["new 1", "new 2"]
    assert results[0].value == ("old 0" if policy == "read_only" else "new 0")
    assert (writer.cache.get(cache_key(writer.identity, "chat", {"q": 1})) is not None) is stored


@pytest.mark.parametrize("slow", [False, True])
def test_an_identical_request_in_another_batch_is_not_sent_twice(tmp_path, slow):
    """Both batches miss at lookup; the second's row then finds the answer stored, or shares it in flight."""
    rt, provider = runtime(tmp_path, handler=later if slow else answer)

    async def both():
        first = asyncio.ensure_future(rt.run_many([Request("chat", {"q": 1})]))
        second = asyncio.ensure_future(rt.run_many([Request("chat", {"q": 1}), Request("chat", {"q": 2})]))
        return await first, await second

    a, b = run(both())
    assert a[0].value == b[0].value == "new 1" and b[1].value == "new 2"
    assert sorted(r.body["q"] for r in provider.requests) == [1, 2]
    assert rt.stats.cache_hits + rt.stats.deduped == 1 and rt.stats.rows_done == 3


# --- requests -------------------------------------------------------------------------------------


def test_rows_answered_from_the_cache_are_never_estimated(tmp_path, monkeypatch):
    from inferframe.ai import requests as ai_requests

    config = AICallConfig("chat", ProviderSpec("openai"), "m", None, (), RuntimeConfig(), 1, "p", max_output_tokens=5)
    reqs = [build_request(config, [f"q{i}"], cls=OpenAIProvider) for i in range(4)]
    counted = []
    real = ai_requests.count_text
    monkeypatch.setattr(ai_requests, "count_text", lambda text, model: counted.append(text) or real(text, model))
    rt, provider = runtime(tmp_path, handler=lambda r: Outcome(value="x"))
    rt.cache.put_many([(k, "old", 1, 1) for k in cache_keys(rt.identity, reqs[:3])])
    run(rt.run_many(reqs))
    assert len(counted) == 1 and len(provider.requests) == 1  # only the row that was sent
    # The estimate as the wire format makes it from the body: the same figure, from the prompt kept beside it.
    assert reqs[3].est_tokens == sum(OpenAIProvider.estimate_tokens(reqs[3].body, "m"))
    assert len(counted) == 1  # made once, then kept


def test_an_estimated_request_behaves_as_a_request():
    body = {"messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 5}
    r = EstimatedRequest("chat", body, "user\x1f" + "x" * 40, 5)
    plain = Request("chat", body, r.est_tokens, r.prompt, 5)
    assert isinstance(r, Request) and r == plain and plain == r and r != Request("chat", body, 1)
    assert pickle.loads(pickle.dumps(r)) == plain and type(pickle.loads(pickle.dumps(r))) is Request
    import dataclasses

    assert dataclasses.replace(r, body={}).body == {} and dataclasses.asdict(r)["est_tokens"] == plain.est_tokens
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.body = {}


def test_the_prompt_operator_answers_a_cached_batch_with_zero_usage(tmp_path):
    import pyarrow as pa

    from inferframe.series import Series

    config = AICallConfig("chat", ProviderSpec("lm_studio"), "m", None, (),
                          RuntimeConfig(cache_dir=str(tmp_path)), 1, "prompt[m]")

    async def go():
        op = PromptOperator(config, provider=MockProvider(lambda r: Outcome(value="yes", usage=Usage(3, 1))))
        first = await op(Series(pa.array(["a", None, "b"])))
        op2 = PromptOperator(config, provider=MockProvider(lambda r: Outcome(value="no")))
        second = await op2(Series(pa.array(["b", "a", None, "c"])))
        return first, second, op2

    first, second, op2 = run(go())
    first, second = first.to_pylist(), second.to_pylist()
    assert [r["value"] for r in first] == ["yes", None, "yes"]
    assert [r["value"] for r in second] == ["yes", "yes", None, "no"]
    assert {k: second[0]["usage"][k] for k in ("input_tokens", "output_tokens", "cost")} == {"input_tokens": 0, "output_tokens": 0, "cost": 0.0}
    assert op2.stats.cache_hits == 2 and op2.stats.rows_done == 4 and len(op2.provider.requests) == 1


def test_a_first_run_does_not_read_on_through_its_own_answers(tmp_path):
    """Reading on that finds none of a batch's keys forgets the position: no wasted read per batch."""
    cache = ResponseCache(tmp_path)
    reader = cache.reader()
    for i in range(0, 1280, 128):
        batch = [f"k{j}" for j in range(i, i + 128)] + ["same"]  # a row repeated in every batch
        got = reader.get_many(batch)
        assert got[:128] == [None] * 128 and (got[128] is None) == (i == 0)
        stored_in(cache, batch)  # the answers this batch was sent for
    assert reader.read_on <= 2 * 129 and reader.window["same"][2] == '"answer same"'


class CountingWire(OpenAIProvider):
    """The OpenAI wire format, counting the bodies built; ``shout`` upper-cases the row text."""

    bodies = 0
    shout = False

    @classmethod
    def request_body(cls, endpoint, model, parts, *rest, **kw):
        cls.bodies += 1
        if cls.shout:
            parts = [(str(v).upper(), k, n) for v, k, n in parts]
        return super().request_body(endpoint, model, parts, *rest, **kw)


def text_config(tmp_path, **runtime):
    return AICallConfig("chat", ProviderSpec("lm_studio"), "m", "be brief", (),
                        RuntimeConfig(cache_dir=str(tmp_path), **runtime), 2, "prompt[m]", max_output_tokens=5)


def stored_answers(op: PromptOperator, rows: list[tuple]) -> None:
    """Answers stored under the keys of the bodies the usual way builds (as a run before this one did)."""
    reqs = [build_request(op.config, list(r), cls=OpenAIProvider) for r in rows]
    op.runtime.cache.put_many([(k, f"old {r[0]}", 1, 1) for k, r in zip(cache_keys(op.runtime.identity, reqs), rows)])


@pytest.mark.parametrize("shout", [False, True])
def test_a_cached_text_batch_builds_no_body_per_row(tmp_path, monkeypatch, shout):
    """Text rows are looked up by keys spliced from one template; a provider that reshapes text keeps the usual path."""
    import pyarrow as pa

    from inferframe.series import Series

    monkeypatch.setattr(CountingWire, "shout", shout)
    rows = [(f"q{i} é\n\"", i) for i in range(300)]  # text and an int column: joined as str() would
    config = text_config(tmp_path)

    async def go():
        op = PromptOperator(config, provider=MockProvider(lambda r: Outcome(value="new")))
        op.wire = CountingWire
        stored_answers(op, [r for r in rows if r[1] != 7] if not shout else [])
        if shout:  # the answers of this wire's bodies
            reqs = [build_request(config, list(r), cls=CountingWire) for r in rows if r[1] != 7]
            op.runtime.cache.put_many([(k, f"old {r[0]}", 1, 1) for k, r in
                                       zip(cache_keys(op.runtime.identity, reqs), [r for r in rows if r[1] != 7])])
        CountingWire.bodies = 0
        out = []
        for i in range(0, 300, 128):
            part = rows[i:i + 128]
            out += (await op(Series(pa.array([a for a, _ in part])), Series(pa.array([b for _, b in part])))).to_pylist()
        return op, out

    op, out = run(go())
    assert [r["value"] for r in out] == [f"old {a}" if b != 7 else "new" for a, b in rows]
    assert len(op.provider.requests) == 1 and op.provider.requests[0].body["messages"][-1]["content"] == (
        rows[7][0].upper() if shout else rows[7][0]) + "7"
    assert op.stats.cache_hits == 299 and op.stats.rows_done == 300
    batches = 3
    if shout:
        assert CountingWire.bodies >= 300  # the template did not match: every row's body, as before
    else:
        # One body for the template, one per batch to check it, and one for the row that was sent.
        assert CountingWire.bodies <= 1 + batches + 1


def test_cached_text_rows_with_nulls_and_a_structured_answer(tmp_path):
    import pyarrow as pa
    from pydantic import BaseModel

    from inferframe.series import Series

    class Label(BaseModel):
        label: str

    config = dataclasses_replace(text_config(tmp_path), n_parts=1, return_format=Label)

    async def go():
        op = PromptOperator(config, provider=MockProvider(lambda r: Outcome(value='{"label": "new"}')))
        reqs = [build_request(config, [q], cls=OpenAIProvider) for q in ("a", "b")]
        op.runtime.cache.put_many([(k, v, 1, 1) for k, v in zip(cache_keys(op.runtime.identity, reqs),
                                                                  ['{"label": "old"}', '{"label": 3}'])])
        return op, (await op(Series(pa.array(["a", None, "b", "c"])))).to_pylist()

    op, out = run(go())
    assert [r["value"] for r in out] == [{"label": "old"}, None, None, {"label": "new"}]
    assert out[2]["error"]["kind"] == "schema" and out[1]["error"] is None and out[1]["usage"] is None
    assert op.stats.cache_hits == 2 and op.stats.rows_done == 4 and op.stats.errors == 1


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)
