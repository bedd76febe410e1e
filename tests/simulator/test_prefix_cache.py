"""Prefix cache and prefill engine: the block LRU, and cached tokens / timing end to end."""

from __future__ import annotations

import json
import time

import pytest
from openai.types import Batch
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from inferframe.simulator import SimulatorConfig
from inferframe.simulator.__main__ import parse_args
from inferframe.simulator.endpoints.responses import WIRE_ONLY_KEYS
from inferframe.simulator.prefill import PrefillEngine
from inferframe.simulator.prefix_cache import PrefixCache, prompt_blocks
from inferframe.simulator.prompts import prompt_parts
from inferframe.simulator.tokens import TokenCounter

from .helpers import assert_strict, make_sim, post, sdk

BT = 16


def toks(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


# -- the block LRU -------------------------------------------------------------------------------


def test_shared_prefix_hits_its_full_blocks_only():
    c = PrefixCache(capacity_tokens=4096, block_tokens=BT)
    shared = toks(0, 100)  # 6 full blocks + 4 tokens
    assert c.serve(shared + toks(1000, 30)) == 0
    assert c.serve(shared + toks(2000, 30)) == 96
    assert c.serve(toks(5000, 130)) == 0  # nothing in common
    assert c.serve(toks(1, 130)) == 0  # same tokens shifted by one: every block differs
    assert c.snapshot()["hit_requests"] == 1 and c.snapshot()["hit_tokens"] == 96


def test_partial_block_prefixes_do_not_count():
    c = PrefixCache(capacity_tokens=4096, block_tokens=BT)
    c.serve(toks(0, 40))
    assert c.serve(toks(0, 15) + [-1] * 20) == 0  # diverges inside the first block
    assert c.serve(toks(0, 20) + [-2] * 20) == 16  # one whole block shared, the next only in part
    assert c.serve(toks(0, 15)) == 0  # shorter than a block: never cached
    assert c.serve(toks(0, 15)) == 0


def test_last_token_is_always_recomputed():
    c = PrefixCache(capacity_tokens=4096, block_tokens=BT)
    c.serve(toks(0, 32))
    assert c.serve(toks(0, 32)) == 16  # the same 2-block prompt: its last block holds the last token
    assert c.serve(toks(0, 33)) == 32


def test_eviction_when_over_capacity():
    c = PrefixCache(capacity_tokens=4 * BT, block_tokens=BT)
    a, b = toks(0, 4 * BT + 1), toks(10_000, 4 * BT + 1)
    c.serve(a)
    assert c.serve(a) == 4 * BT
    c.serve(b)  # 4 new blocks push all of a's out
    assert c.snapshot()["blocks"] == 4 and c.snapshot()["evicted_blocks"] == 4
    assert c.serve(a) == 0
    assert c.serve(b) == 0  # a's reinsertion evicted b in turn


def test_hit_refreshes_lru_order():
    c = PrefixCache(capacity_tokens=3 * BT, block_tokens=BT)
    x, y, z, w = (toks(k * 1000, BT + 1) for k in range(4))  # one full block each
    for p in (x, y, z):
        c.serve(p)
    assert c.serve(x) == BT  # x is now the most recent; y the least
    c.serve(w)  # evicts exactly one block: y
    assert c.serve(x) == BT and c.serve(z) == BT and c.serve(w) == BT
    assert c.serve(y) == 0


def test_a_prompt_longer_than_the_cache_keeps_its_beginning():
    c = PrefixCache(capacity_tokens=4 * BT, block_tokens=BT)
    long = toks(0, 10 * BT + 1)
    c.serve(long)
    # deepest blocks go first, so the first 4 blocks stay reachable
    assert c.serve(long) == 4 * BT


def test_models_do_not_share_prefixes():
    c = PrefixCache(capacity_tokens=4096, block_tokens=BT)
    c.serve(toks(0, 50), "gpt-4o")
    assert c.serve(toks(0, 50), "gpt-4o-mini") == 0
    assert c.serve(toks(0, 50), "gpt-4o") == 48


def _flat(parts, counter):
    out = []
    for p in parts:
        out += counter.pieces(p) if isinstance(p, str) else [p]
    return out


def _shared_blocks(a, b, counter, bt):
    """Leading full blocks two prompts share, from plain token lists (the reference)."""
    fa, fb = _flat(a, counter), _flat(b, counter)
    n = 0
    while len(fa) >= (n + 1) * bt and len(fb) >= (n + 1) * bt and fa[n * bt:(n + 1) * bt] == fb[n * bt:(n + 1) * bt]:
        n += 1
    return n


def test_prompt_blocks_match_a_plain_token_reference():
    counter = TokenCounter()
    assert all(len(counter.pieces("x" * n)) == counter.count("x" * n) for n in range(40))
    role = ("role", "user")
    pairs = []
    for n in range(0, 70, 3):
        head = "s" * n
        pairs += [
            ([("role", "system"), head, role, "question one"], [("role", "system"), head, role, "question two"]),
            ([head + "abcdefgh", role], [head + "abcdefgh", ("role", "system")]),
            ([head, "abcd", "efgh"], [head + "abcd", "efgh"]),  # split differently: different tokens
            ([role, head, "tail" * 9], [role, head, "tail" * 9]),
        ]
    for bt in (1, 2, 4, 16):
        for a, b in pairs:
            ha = PrefixCache.block_hashes(prompt_blocks(a, counter, block_tokens=bt)[0])
            hb = PrefixCache.block_hashes(prompt_blocks(b, counter, block_tokens=bt)[0])
            shared = next((i for i, (x, y) in enumerate(zip(ha, hb)) if x != y), min(len(ha), len(hb)))
            assert shared == _shared_blocks(a, b, counter, bt), (bt, a, b)
            assert len(ha) == len(_flat(a, counter)) // bt
            assert prompt_blocks(a, counter, block_tokens=bt)[1] == len(_flat(a, counter))


def test_prompt_parts_follow_server_order_and_media_content():
    counter = TokenCounter()
    img = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    other = {"type": "image_url", "image_url": {"url": "data:image/png;base64,BBBB"}}

    def blocks(part):
        body = {"messages": [{"role": "user", "content": [part, {"type": "text", "text": "q" * 200}]}]}
        return prompt_blocks(prompt_parts(body), counter)[0]

    assert blocks(img) == blocks(dict(img)) and blocks(img)[0] != blocks(other)[0]
    chat = prompt_parts({"messages": [{"role": "system", "content": "S" * 80}, {"role": "user", "content": "u"}]})
    assert chat == prompt_parts({"instructions": "S" * 80, "input": "u"})  # instructions become the system message


def test_prefill_engine_is_fifo_and_shared():
    e = PrefillEngine(tokens_per_second=1000)
    waits = [e.reserve(100, now=0.0) for _ in range(3)]
    assert waits == pytest.approx([0.1, 0.2, 0.3])
    assert e.reserve(0, now=0.0) == pytest.approx(0.3)  # nothing to compute, still behind the queue
    assert e.reserve(100, now=5.0) == pytest.approx(0.1)
    assert e.busy_s == pytest.approx(0.4)


def test_config_knobs_validate_and_come_from_the_command_line():
    cfg = SimulatorConfig()
    assert (cfg.prefix_cache_tokens, cfg.prefix_block_tokens, cfg.prefill_tokens_per_second) == (0, 16, None)
    for bad in ({"prefix_cache_tokens": -1}, {"prefix_block_tokens": 0}, {"prefill_tokens_per_second": -5}):
        with pytest.raises(ValueError):
            SimulatorConfig(**bad)
    _, cli = parse_args(["--prefix-cache-tokens", "65536", "--prefix-block-tokens", "32",
                         "--prefill-tokens-per-second", "5000"])
    assert (cli.prefix_cache_tokens, cli.prefix_block_tokens, cli.prefill_tokens_per_second) == (65536, 32, 5000.0)


# -- end to end ----------------------------------------------------------------------------------

SYSTEM = "You label product reviews as positive, negative or neutral. " * 40  # ~600 tokens


def _chat(row: str, system: str = SYSTEM, **kw) -> dict:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": system},
                                                 {"role": "user", "content": row}]}
    body.update(kw)
    return body


def test_chat_reports_cached_tokens_of_a_shared_prefix():
    with make_sim(prefix_cache_tokens=100_000) as sim:
        url = sim.base_url + "/chat/completions"
        status, _, first = post(url, _chat("review 1: great", prompt_cache_key="labels"))
        assert status == 200 and first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        status, _, body = post(url, _chat("review 2: awful", prompt_cache_key="labels", id_slot=0,
                                          cache_prompt=True))
        assert status == 200, body
        u = assert_strict(ChatCompletion, body).usage
        cached = u.prompt_tokens_details.cached_tokens
        assert cached % 16 == 0 and len(SYSTEM) // 4 - 16 <= cached < u.prompt_tokens
        with sdk(sim) as client:  # the SDK sends prompt_cache_key and carries llama.cpp's fields
            r = client.chat.completions.create(**_chat("review 3"), prompt_cache_key="labels",
                                               extra_body={"id_slot": 0, "cache_prompt": True})
        assert r.usage.prompt_tokens_details.cached_tokens == cached
        s = sim.stats()
        assert s["cached_tokens"] == 2 * cached and s["input_tokens"] == s["prompt_tokens"]
        assert s["cached_token_share"] == pytest.approx(2 * cached / s["input_tokens"], abs=1e-4)
        assert s["prompt_cache_key_requests"] == 3 and s["distinct_prompt_cache_keys"] == 1
        assert s["prefix_cache"]["hit_requests"] == 2


def test_responses_report_cached_tokens_of_a_shared_prefix():
    with make_sim(prefix_cache_tokens=100_000) as sim, sdk(sim) as client:
        url = sim.base_url + "/responses"
        body = {"model": "gpt-4o-mini", "instructions": SYSTEM, "input": "review 1", "prompt_cache_key": "k"}
        status, _, first = post(url, body)
        assert status == 200 and first["usage"]["input_tokens_details"]["cached_tokens"] == 0
        status, _, second = post(url, dict(body, input="review 2"))
        u = assert_strict(Response, second, WIRE_ONLY_KEYS).usage
        assert u.input_tokens_details.cached_tokens >= len(SYSTEM) // 4 - 16
        assert u.input_tokens_details.cached_tokens < u.input_tokens
        r = client.responses.create(model="gpt-4o-mini", instructions=SYSTEM, input="review 3")
        assert r.usage.input_tokens_details.cached_tokens == u.input_tokens_details.cached_tokens


def test_after_eviction_a_prefix_reports_zero():
    with make_sim(prefix_cache_tokens=1024) as sim, sdk(sim) as client:
        def cached(system: str, row: str) -> int:
            r = client.chat.completions.create(**_chat(row, system))
            return r.usage.prompt_tokens_details.cached_tokens

        a, b = "alpha " * 500, "bravo " * 800  # ~750 and ~1200 tokens: b alone fills the cache
        assert cached(a, "1") == 0 and cached(a, "2") > 600
        assert cached(b, "1") == 0
        assert cached(a, "3") == 0
        assert sim.stats()["prefix_cache"]["evicted_blocks"] > 0


def test_off_by_default_keeps_the_old_usage():
    with make_sim() as sim, sdk(sim) as client:
        for row in ("1", "2"):
            r = client.chat.completions.create(**_chat(row), prompt_cache_key="k")
        assert r.usage.prompt_tokens_details.cached_tokens == 0
        s = sim.stats()
        assert s["cached_tokens"] == 0 and s["input_tokens"] == s["prompt_tokens"] > 0
        assert "prefix_cache" not in s and "prefill_busy_s" not in s


def test_cache_knobs_over_the_admin_route_and_reset():
    with make_sim() as sim, sdk(sim) as client:
        root = sim.base_url.removesuffix("/v1")
        status, _, cfg = post(root + "/_sim/config", {"prefix_cache_tokens": 50_000, "prefix_block_tokens": 32})
        assert status == 200 and cfg["prefix_cache_tokens"] == 50_000
        for row in ("1", "2"):
            r = client.chat.completions.create(**_chat(row))
        assert r.usage.prompt_tokens_details.cached_tokens % 32 == 0 and r.usage.prompt_tokens_details.cached_tokens
        sim.reset()  # empties the cache with the counters
        r = client.chat.completions.create(**_chat("3"))
        assert r.usage.prompt_tokens_details.cached_tokens == 0


def test_batch_output_lines_carry_cached_tokens():
    lines = [{"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": _chat(f"row {i}")}
             for i in range(3)]
    with make_sim(prefix_cache_tokens=100_000) as sim, sdk(sim) as client:
        root = sim.base_url.removesuffix("/v1")
        assert post(root + "/_sim/batches", {"validate_s": 0.01, "process_s": 0.01})[0] == 200
        f = client.files.create(file=("in.jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode()),
                                purpose="batch")
        b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        deadline = time.monotonic() + 5
        while b.status != "completed" and time.monotonic() < deadline:
            time.sleep(0.02)
            b = client.batches.retrieve(b.id)
        assert isinstance(b, Batch) and b.status == "completed"
        out = [json.loads(x) for x in client.files.content(b.output_file_id).text.splitlines()]
        per_line = sorted(o["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] for o in out)
        assert per_line[0] == 0 and per_line[1] == per_line[2] > 500  # lines run in file order: the first pays
        assert b.usage.input_tokens_details.cached_tokens == sum(per_line)


def test_a_cached_prefix_answers_faster_with_a_prefill_engine():
    long_system = "Context paragraph for the labelling task. " * 1500  # ~16k tokens: 0.8 s of prefill
    with make_sim(prefix_cache_tokens=100_000, prefill_tokens_per_second=20_000) as sim, sdk(sim) as client:
        def timed(row: str) -> tuple[float, int]:
            t = time.perf_counter()
            r = client.chat.completions.create(**_chat(row, long_system))
            return time.perf_counter() - t, r.usage.prompt_tokens_details.cached_tokens

        uncached_s, c1 = timed("row 1")
        cached_s, c2 = timed("row 2")
        assert c1 == 0 and c2 > 15_000
        assert uncached_s > 0.5  # the prefill alone is 0.8 s
        assert uncached_s > 2 * cached_s
        assert sim.stats()["prefill_busy_s"] == pytest.approx(0.8, rel=0.1)
