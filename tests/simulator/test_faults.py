"""Fault injection: probabilities (seeded, reproducible), each fault's shape, rules, latency."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import openai
import pytest
from openai.types.chat import ChatCompletion

from .helpers import assert_error_shape, assert_strict, chat_body, make_sim, post, sdk

PROBS = {
    "server_error": 0.1,
    "overloaded": 0.1,
    "connection_reset": 0.05,
    "timeout": 0.05,
    "malformed": 0.1,
    "refusal": 0.1,
    "length": 0.1,
}
CFG = dict(
    p_500=PROBS["server_error"], p_503=PROBS["overloaded"], p_connection_reset=PROBS["connection_reset"],
    p_timeout=PROBS["timeout"], p_malformed=PROBS["malformed"], p_refusal=PROBS["refusal"],
    p_length=PROBS["length"], timeout_hang_s=30, seed=1234,
)
N = 1000


async def _classify_all(base_url: str, bodies: list, timeout: float = 3.0) -> list:
    # Hung requests hang 30 s; 3 s tells them apart from answers slowed by a loaded machine (1 s did not).
    out: list = [None] * len(bodies)
    sem = asyncio.Semaphore(200)
    t = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(timeout=t) as session:
        async def one(i: int) -> None:
            async with sem:
                out[i] = await _classify(session, base_url + "/chat/completions", bodies[i])

        await asyncio.gather(*(one(i) for i in range(len(bodies))))
    return out


async def _classify(session: aiohttp.ClientSession, url: str, body: dict) -> str:
    try:
        async with session.post(url, json=body) as resp:
            raw = await resp.read()
            status = resp.status
            headers = resp.headers
    except asyncio.TimeoutError:
        return "timeout"
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, aiohttp.ClientPayloadError):
        return "connection_reset"
    if status == 500:
        return "server_error"
    if status == 503:
        return "overloaded"
    assert status == 200, (status, raw)
    assert headers["Content-Type"].startswith("application/json")
    try:
        data = json.loads(raw)
    except ValueError:
        return "malformed"
    msg = data["choices"][0]["message"]
    if msg["refusal"] is not None:
        assert msg["content"] is None
        return "refusal"
    if data["choices"][0]["finish_reason"] == "length":
        return "length"
    return "ok"


def test_fault_rates_match_probabilities_and_server_counters():
    bodies = [chat_body(f"row {i}: some text to answer at length") for i in range(N)]
    with make_sim(**CFG) as sim:
        t = time.perf_counter()
        outcomes = asyncio.run(_classify_all(sim.base_url, bodies))
        assert time.perf_counter() - t < 10
        counts = {k: outcomes.count(k) for k in [*PROBS, "ok"]}
        for kind, p in PROBS.items():
            expected = N * p
            sd = (N * p * (1 - p)) ** 0.5
            assert abs(counts[kind] - expected) < 5 * sd, (kind, counts)
        assert abs(counts["ok"] - N * 0.4) < 5 * (N * 0.24) ** 0.5, counts
        time.sleep(0.05)
        s = sim.stats()
        assert s["faults"] == {k: v for k, v in counts.items() if k in PROBS and v}
        assert s["faults_injected"] == N - counts["ok"]
        assert s["no_response"] == counts["connection_reset"] + counts["timeout"]
        assert s["in_flight"] == 0  # hung 'timeout' handlers were cancelled when the client gave up
        assert s["duplicate_requests"] == 0 and s["total_requests"] == N

        # same seed + same request sequence -> identical outcomes, whatever the interleaving
        sim.reset()
        again = asyncio.run(_classify_all(sim.base_url, bodies))
        assert again == outcomes

        # another seed -> different outcomes
        sim.reset()
        sim.configure(seed=99)
        other = asyncio.run(_classify_all(sim.base_url, bodies[:200]))
        assert other != outcomes[:200]


def test_retries_of_same_body_draw_fresh_faults():
    with make_sim(p_500=0.5, seed=3) as sim:
        url = sim.base_url + "/chat/completions"
        statuses = [post(url, chat_body("same body"))[0] for _ in range(30)]
        assert set(statuses) == {200, 500}
        assert sim.stats()["duplicate_requests"] == 29
        sim.reset()
        assert [post(url, chat_body("same body"))[0] for _ in range(30)] == statuses


def test_server_error_bodies():
    with make_sim(p_500=1.0) as sim:
        status, _, body = post(sim.base_url + "/chat/completions", chat_body())
        assert status == 500
        assert_error_shape(body, "server_error", None)
    with make_sim(p_503=1.0) as sim:
        with pytest.raises(openai.InternalServerError) as ei:
            sdk(sim).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
        assert ei.value.status_code == 503


def test_refusal_shape_chat():
    with make_sim(p_refusal=1.0) as sim:
        status, _, body = post(sim.base_url + "/chat/completions", chat_body("anything"))
        assert status == 200
        obj = assert_strict(ChatCompletion, body)
        msg = obj.choices[0].message
        assert msg.content is None and msg.refusal == sim.config.refusal_text
        assert obj.choices[0].finish_reason == "stop"
        r = sdk(sim).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
        assert r.choices[0].message.refusal and r.choices[0].message.content is None


def test_length_fault_chat_and_responses():
    with make_sim(p_length=1.0) as sim:
        c = sdk(sim)
        r = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a b c d e f g h"}])
        assert r.choices[0].finish_reason == "length"
        assert len(r.choices[0].message.content) < len("sim answer: a b c d e f g h")
        rr = c.responses.create(model="gpt-4o-mini", input="a b c d e f g h")
        assert rr.status == "incomplete" and rr.incomplete_details.reason == "max_output_tokens"


def test_text_faults_do_not_apply_to_embeddings():
    with make_sim(p_refusal=0.5, p_length=0.5) as sim:
        r = sdk(sim).embeddings.create(model="text-embedding-3-small", input=[f"t{i}" for i in range(5)])
        assert len(r.data) == 5
        assert sim.stats()["faults"] == {}


def test_fault_endpoints_filter():
    with make_sim(p_500=1.0, fault_endpoints=("responses",)) as sim:
        assert post(sim.base_url + "/chat/completions", chat_body())[0] == 200
        assert post(sim.base_url + "/responses", {"model": "gpt-4o-mini", "input": "x"})[0] == 500


@pytest.mark.parametrize(
    "kind,exc",
    [("connection_reset", openai.APIConnectionError), ("timeout", openai.APITimeoutError)],
)
def test_no_response_faults_with_sdk(kind, exc):
    with make_sim(fail_rules=[{"match": "ROW7", "kind": kind}], timeout_hang_s=30) as sim:
        c = sdk(sim, timeout=0.3)
        with pytest.raises(exc):
            c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "ROW7"}])
        ok = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "ROW8"}])
        assert ok.choices[0].message.content == "sim answer: ROW8"
        time.sleep(0.05)
        s = sim.stats()
        assert s["no_response"] == 1 and s["in_flight"] == 0 and s["by_status"] == {"200": 1}


def test_malformed_body_breaks_sdk_parsing():
    with make_sim(fail_rules=[{"match": "ROW7", "kind": "malformed"}]) as sim:
        status, h, body = post(sim.base_url + "/chat/completions", chat_body("ROW7"))
        assert status == 200 and isinstance(body, str) and body.startswith("{")
        with pytest.raises(ValueError):
            json.loads(body)
        with pytest.raises(Exception):
            sdk(sim).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "ROW7"}])


def test_fail_rule_times_then_success():
    with make_sim(fail_rules=[{"match": "flaky", "status": 503, "times": 2}]) as sim:
        url = sim.base_url + "/chat/completions"
        assert [post(url, chat_body("flaky row"))[0] for _ in range(3)] == [503, 503, 200]
        assert post(url, chat_body("another flaky row"))[0] == 503  # each distinct body fails twice
        s = sim.stats()
        assert s["duplicate_requests"] == 2 and s["max_requests_per_hash"] == 3 and s["rule_hits"] == 3


def test_fail_rule_custom_message_and_code(sim):
    sim.configure(fail_rules=[{"match": "bad", "status": 400, "message": "row is bad", "code": "bad_row"}])
    status, _, body = post(sim.base_url + "/responses", {"model": "gpt-4o-mini", "input": "a bad row"})
    assert status == 400
    err = assert_error_shape(body, "invalid_request_error", "bad_row")
    assert err["message"] == "row is bad"


def test_constant_latency_and_concurrency():
    with make_sim(latency_ms=200) as sim:
        t = time.perf_counter()
        assert post(sim.base_url + "/chat/completions", chat_body())[0] == 200
        assert time.perf_counter() - t >= 0.2

        async def many() -> float:
            async with aiohttp.ClientSession() as s:
                t0 = time.perf_counter()
                rs = await asyncio.gather(*(s.post(sim.base_url + "/chat/completions", json=chat_body(str(i)))
                                            for i in range(50)))
                assert [r.status for r in rs] == [200] * 50
                for r in rs:
                    r.release()
                return time.perf_counter() - t0

        assert asyncio.run(many()) < 1.5  # 50 x 200 ms concurrently, not 10 s
        assert sim.stats()["max_in_flight"] >= 25


def test_uniform_latency_bounds():
    with make_sim(latency_dist="uniform", latency_lo_ms=30, latency_hi_ms=60) as sim:
        for i in range(3):
            t = time.perf_counter()
            post(sim.base_url + "/chat/completions", chat_body(str(i)))
            assert 0.03 <= time.perf_counter() - t < 0.5
