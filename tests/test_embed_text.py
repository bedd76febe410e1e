"""embed_text() over OpenAI-compatible /v1/embeddings: packing, per-row cache, long inputs, plan-time size."""

import asyncio

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import embed_text
from inferframe.ai.chunking import Chunker
from inferframe.simulator import FailRule, Simulator, SimulatorConfig
from inferframe.simulator.embeddings import embed as sim_vector


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(record_requests=True, record_max=10_000)) as s:
        yield s


TEXTS = ["the cat sat on the mat", "a cat sat on a mat", "quarterly revenue grew by ten percent", "the cat sat on the mat"]
TOPICS = ["cats", "dogs", "money", "rain", "chess"]


def rows(n, start=0):
    return [f"row {i} is about {TOPICS[i % 5]} and the number {i * 7}" for i in range(start, start + n)]


def embed(sim, tmp_path, **kw):
    return embed_text(col("t"), provider="openai", base_url=sim.base_url, api_key="k", cache_dir=str(tmp_path), **kw)


def run(sim, tmp_path, texts, **kw):
    return ifr.from_pydict({"t": texts}).with_column("e", embed(sim, tmp_path, **kw)).to_pydict()


def sent(sim):
    """The inputs of every /v1/embeddings request the simulator saw, one list per request."""
    return [r["body"]["input"] for r in sim.requests() if r["path"].endswith("/embeddings")]


def requests_seen(sim):
    return sim.stats()["by_endpoint"].get("embeddings", 0)


@pytest.mark.parametrize("batch", [False, True])
def test_embeddings_are_fixed_size_float32_and_deterministic(sim, tmp_path, batch):
    df = ifr.from_pydict({"t": TEXTS}).with_column("e", embed(sim, tmp_path, batch=batch, batch_poll_interval=0.05))
    assert df.schema()["e"].to_arrow() == pa.list_(pa.float32(), 1536)  # known before the run
    out = df.to_pydict()
    assert out["e_error"] == [None] * 4
    v = np.array(out["e"], dtype=np.float32)
    assert v.shape == (4, 1536)
    assert np.array_equal(v[0], v[3])
    cos = v @ v.T / np.outer(np.linalg.norm(v, axis=1), np.linalg.norm(v, axis=1))
    assert cos[0, 1] > cos[0, 2]  # similar sentences score higher than unrelated ones
    assert sim.stats().get("batches_created", 0) == (1 if batch else 0)
    if not batch:
        assert sent(sim) == [TEXTS[:3]]  # one request; the repeated text is sent once


def test_dimensions_and_unknown_models(sim, tmp_path):
    df = ifr.from_pydict({"t": TEXTS[:2]}).with_column("e", embed(sim, tmp_path, model="text-embedding-3-large", dimensions=256))
    assert len(df.to_pydict()["e"][0]) == 256
    with pytest.raises(ifr.PlanError, match="dimensions=N") as info:
        embed(sim, tmp_path, model="my-embedder")
    assert sim.base_url in str(info.value)  # names the server that refused the probe


def test_a_thousand_rows_go_in_one_request_in_row_order(sim, tmp_path):
    texts = rows(1000)
    out = run(sim, tmp_path, texts, usage_column=True)
    assert requests_seen(sim) == 1
    assert out["e_error"] == [None] * 1000
    expected = np.array([sim_vector(t, 1536) for t in texts], dtype=np.float32)
    assert np.array_equal(np.array(out["e"], dtype=np.float32), expected)
    # The request's token usage is shared out over its rows, to the token.
    assert sum(u["input_tokens"] for u in out["e_usage"]) == sim.stats()["prompt_tokens"] > 0


def test_packs_respect_the_input_and_token_budgets(sim, tmp_path):
    texts = rows(1000)
    out = run(sim, tmp_path, texts, max_batch_inputs=100, cache="off")
    assert out["e_error"] == [None] * 1000
    assert [len(x) for x in sent(sim)] == [100] * 10
    sim.reset()
    out = run(sim, tmp_path, texts, max_batch_tokens=2_000, cache="off")
    packs = sent(sim)
    # ~11 estimated tokens a row: about 180 rows a request, never over the budget.
    assert 5 <= len(packs) <= 8
    assert all(sum(len(t) // 4 + 1 for t in p) <= 2_000 for p in packs)
    assert [t for p in packs for t in p] == texts
    expected = np.array([sim_vector(t, 1536) for t in texts], dtype=np.float32)
    assert np.array_equal(np.array(out["e"], dtype=np.float32), expected)


def test_identical_texts_are_sent_once(sim, tmp_path):
    texts = rows(50) * 4
    out = run(sim, tmp_path, texts, max_batch_inputs=16, cache="off", usage_column=True)
    assert sorted(t for p in sent(sim) for t in p) == sorted(rows(50))
    v = np.array(out["e"], dtype=np.float32)
    assert np.array_equal(v[:50], v[150:])
    # Paid once, by the first row with the text.
    assert all(u["input_tokens"] == 0 for u in out["e_usage"][50:])


def test_the_cache_is_per_row_whatever_the_grouping(sim, tmp_path):
    first = run(sim, tmp_path, rows(200), max_batch_inputs=7)
    assert requests_seen(sim) == 29  # ceil(200 / 7)
    sim.reset()
    second = run(sim, tmp_path, rows(300), max_batch_inputs=64)
    # Only the 100 new rows are sent, in two requests of at most 64.
    assert len(sent(sim)) == 2 and all(len(p) <= 64 for p in sent(sim))
    assert [t for p in sent(sim) for t in p] == rows(100, start=200)
    assert second["e"][:200] == first["e"]
    assert second["e_error"] == [None] * 300


def test_answers_cached_one_row_per_request_are_found_by_packed_runs(sim, tmp_path):
    # The Batch API path sends (and caches) one row per line, keyed as a lone request.
    lone = run(sim, tmp_path, TEXTS, batch=True, batch_poll_interval=0.05)
    sim.reset()
    packed = run(sim, tmp_path, TEXTS)
    assert requests_seen(sim) == 0
    assert packed["e"] == lone["e"]


def test_vectors_cached_by_packed_runs_are_found_by_batch_api_runs(sim, tmp_path):
    # Packed runs store vectors as base64 float32; every reader decodes them to the same floats.
    packed = run(sim, tmp_path, TEXTS)
    sim.reset()
    lone = run(sim, tmp_path, TEXTS, batch=True, batch_poll_interval=0.05)
    assert requests_seen(sim) == 0
    assert lone["e"] == packed["e"] and all(len(v) == 1536 for v in lone["e"])


def test_a_4xx_on_a_packed_request_is_split_until_only_the_bad_row_fails(sim, tmp_path):
    sim.configure(fail_rules=[FailRule(match="POISON", status=400, message="bad input")])
    texts = rows(30)
    texts[13] = "row 13 is POISON"
    out = run(sim, tmp_path, texts, max_batch_inputs=10)
    errors = out["e_error"]
    assert errors[13]["kind"] == "bad_request" and errors[13]["status"] == 400 and "bad input" in errors[13]["message"]
    assert out["e"][13] is None
    assert all(e is None for i, e in enumerate(errors) if i != 13)
    assert all(v is not None for i, v in enumerate(out["e"]) if i != 13)
    # 3 packs, then the refused pack of 10 halves down to the bad row: 5+5, 2+3 (or 3+2), ... (a 4xx is not retried)
    assert 3 + 2 <= requests_seen(sim) <= 3 + 2 * 4


def test_a_packed_request_is_retried_as_a_whole(sim, tmp_path):
    sim.configure(fail_rules=[FailRule(match="FLAKY", status=503, times=2)])
    texts = rows(20)
    texts[5] = "row 5 is FLAKY"
    out = run(sim, tmp_path, texts, max_batch_inputs=10, max_retries=3)
    assert out["e_error"] == [None] * 20
    assert requests_seen(sim) == 4  # two packs, the first one sent three times


def test_empty_texts_are_row_errors_not_sent(sim, tmp_path):
    out = run(sim, tmp_path, ["a cat", "", None, "a dog"])
    assert out["e_error"][1]["kind"] == "input"
    assert out["e_error"][2] is None and out["e"][2] is None  # null in, null out
    assert out["e"][0] is not None and out["e"][3] is not None
    assert sent(sim) == [["a cat", "a dog"]]


def weighted_mean(vectors, weights):
    m = (np.asarray(vectors, dtype=np.float64) * np.asarray(weights, dtype=np.float64)[:, None]).sum(0) / sum(weights)
    return m / np.linalg.norm(m)


def test_a_long_text_is_the_token_weighted_mean_of_its_chunks(sim, tmp_path):
    long = " ".join(f"sentence {i} about {TOPICS[i % 5]} in a long report." for i in range(60))
    chunks = asyncio.run(Chunker("text-embedding-3-small", 100).split(long))
    assert len(chunks) >= 4 and "".join(c for c, _ in chunks) == long
    out = run(sim, tmp_path, ["a short row", long], max_input_tokens=100, usage_column=True)
    assert out["e_error"] == [None, None]
    # No input over the limit reached the server, and every chunk went out in the one request.
    assert sent(sim) == [["a short row"] + [c for c, _ in chunks]]
    # Each chunk embedded separately (fresh cache, so they are really sent again):
    alone = run(sim, tmp_path / "other", [c for c, _ in chunks], max_input_tokens=100)
    expected = weighted_mean(alone["e"], [n for _, n in chunks])
    got = np.array(out["e"][1], dtype=np.float64)
    assert np.allclose(got, expected, atol=1e-6)
    assert abs(np.linalg.norm(got) - 1) < 1e-5
    assert not np.allclose(got, np.array(alone["e"][0]), atol=1e-2)  # not just the first chunk


def test_texts_over_the_model_limit_embed_by_default(sim, tmp_path):
    # ~12,500 estimated tokens: the simulator, like OpenAI, refuses inputs over 8,192.
    long = "word " * 10_000
    out = run(sim, tmp_path, [long, "short"])
    assert out["e_error"] == [None, None]
    assert all(len(t) // 4 + 1 <= 8191 for p in sent(sim) for t in p)
    refused = run(sim, tmp_path / "other", [long], max_input_tokens=20_000)
    assert refused["e_error"][0]["status"] == 400


def test_unknown_models_are_probed_once_at_plan_time(tmp_path):
    with Simulator(SimulatorConfig(allow_unknown_models=True)) as s:
        expr = embed(s, tmp_path, model="acme-embedding-v1")
        df = ifr.from_pydict({"t": TEXTS}).with_column("e", expr)
        assert df.schema()["e"].to_arrow() == pa.list_(pa.float32(), 1536)
        assert requests_seen(s) == 1  # the probe, before any run
        embed(s, tmp_path, model="acme-embedding-v1")
        assert requests_seen(s) == 1  # learnt once per process
        out = df.to_pydict()
        assert out["e_error"] == [None] * 4 and len(out["e"][0]) == 1536


def test_a_probe_that_cannot_reach_the_server_is_a_plan_error(tmp_path):
    with pytest.raises(ifr.PlanError, match=r"dimensions=N"):
        embed_text(col("t"), provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k",
                   model="acme-embedding-v1", cache_dir=str(tmp_path), timeout=5)


def test_packing_options_are_checked_at_plan_time(sim, tmp_path):
    with pytest.raises(ifr.PlanError, match="max_batch_inputs"):
        embed(sim, tmp_path, max_batch_inputs=0)


def _embedded_after_an_earlier_job(answer, texts: list[str], max_batch_inputs: int) -> list[dict]:
    """``texts`` embedded through a MockProvider that calls ``answer``, after a job of four texts at the same endpoint
    (the limits are known then: no one-at-a-time probe, every pack goes out at once)."""
    import asyncio

    from inferframe.ai.embed import EmbeddingOperator
    from inferframe.functions._embed_api import api_embed_call
    from inferframe.models.registry import resolve_model
    from inferframe.providers.interface import MockProvider

    options = {"base_url": "http://127.0.0.1:9/v1", "api_key": "k", "cache": "off", "max_batch_inputs": max_batch_inputs}
    ref = resolve_model("embed_text", "openai", "text-embedding-3-small", kind="embed", options=options)
    config = api_embed_call(col("t"), ref, 2, options).config

    async def job(texts):
        op = EmbeddingOperator(config, provider=MockProvider(answer))
        try:
            return (await op(pa.array(texts))).to_pylist()
        finally:
            await op.aclose()

    asyncio.run(job([f"earlier {i}" for i in range(4)]))
    return asyncio.run(job(texts))


def test_one_bad_input_split_out_of_its_pack_is_one_refused_row_not_three():
    """The halves of a refused pack repeat its refusal: they are not more rows refused the same way.

    Found in a full run (tests/io/test_interop.py): one bad input among three, the limits known from an earlier job
    (no probe), the halves' refusals came back before the good half's answer, and the breaker read pack, half and
    input as three rows refused alike: "The first 3 rows were refused with the same error" stopped the job.
    """
    import asyncio

    from inferframe.errors import ErrorKind
    from inferframe.providers.interface import Outcome, Usage

    async def answer(request):
        texts = request.body["input"]
        if any("POISON" in t for t in texts):  # refused at once; the good inputs' answers come later
            return Outcome(status=400, error_kind=ErrorKind.BAD_REQUEST, message="HTTP 400: bad input")
        await asyncio.sleep(0.2)
        return Outcome(value=[[1.0, 0.0]] * len(texts), usage=Usage(input_tokens=len(texts)))

    out = _embedded_after_an_earlier_job(answer, ["row 0 POISON"] + [f"row {i}" for i in range(1, 16)], 16)
    assert out[0]["value"] is None and out[0]["error"]["kind"] == "bad_request"
    assert all(r["value"] == [1.0, 0.0] and r["error"] is None for r in out[1:])


def test_a_refusal_of_every_pack_still_stops_the_job():
    """An option the server refuses on every request stops the job once three packs were refused alike, although
    their halves (split in search of one bad input) are refused too and count neither way."""
    import asyncio

    from inferframe.errors import ErrorKind, ServiceError
    from inferframe.providers.interface import Outcome

    packs = []

    async def refuse(request):
        if request.body["input"][0].startswith("earlier"):
            return Outcome(value=[[1.0, 0.0]] * len(request.body["input"]))
        if len(request.body["input"]) == 4:  # a whole pack: refused a little later each, its parts at once
            packs.append(request)
            await asyncio.sleep(0.05 * len(packs))
        return Outcome(status=400, error_kind=ErrorKind.BAD_REQUEST, message="HTTP 400: unknown parameter")

    with pytest.raises(ServiceError, match="refused with the same error"):
        _embedded_after_an_earlier_job(refuse, [f"row {i}" for i in range(64)], 4)
    assert len(packs) == 16  # and the job stopped after three of them, their parts between them
