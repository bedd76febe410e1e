"""Counters, duplicate detection, request recording and the /_sim admin routes."""

from __future__ import annotations

from .helpers import assert_error_shape, chat_body, make_sim, post, sdk


def test_counters_by_endpoint_and_status(sim, client):
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}])
    client.responses.create(model="gpt-4o-mini", input="b")
    client.embeddings.create(model="text-embedding-3-small", input="c")
    client.models.list()
    post(sim.base_url + "/chat/completions", {"model": "gpt-4o-mini"})
    s = sim.stats()
    assert s["total_requests"] == 5
    assert s["by_endpoint"] == {"chat.completions": 2, "responses": 1, "embeddings": 1, "models": 1}
    assert s["by_status"] == {"200": 4, "400": 1}
    assert s["prompt_tokens"] > 0 and s["completion_tokens"] > 0
    assert s["duplicate_requests"] == 0 and s["max_requests_per_hash"] == 1
    assert s["in_flight"] == 0


def test_duplicate_detection_and_hashes(sim):
    url = sim.base_url + "/chat/completions"
    post(url, chat_body("one"))
    post(url, chat_body("two"))
    post(url, chat_body("one"))
    s = sim.stats(include_hashes=True)
    assert s["distinct_requests"] == 2 and s["duplicate_requests"] == 1 and s["max_requests_per_hash"] == 2
    assert sorted(s["request_hashes"].values()) == [1, 2]
    sim.reset()
    s = sim.stats()
    assert s["total_requests"] == 0 and s["distinct_requests"] == 0


def test_record_requests_bounded():
    with make_sim(record_requests=True, record_max=3) as sim:
        for i in range(5):
            post(sim.base_url + "/chat/completions", chat_body(f"row {i}"))
        post(sim.base_url + "/responses", None, raw=b"not json")
        recs = sim.requests()
        assert len(recs) == 3
        assert [r["path"] for r in recs] == ["/v1/chat/completions"] * 2 + ["/v1/responses"]
        assert recs[0]["body"]["messages"][0]["content"] == "row 3"
        assert recs[-1]["body"] == "not json"
        assert all(len(r["hash"]) == 32 for r in recs)


def test_admin_http_routes(sim):
    root = sim.url
    status, _, cfg = post(root + "/_sim/config", None, method="GET")
    assert status == 200 and cfg["rpm"] is None and cfg["seed"] == 0
    status, _, cfg = post(root + "/_sim/config", {"rpm": 120, "p_500": 0.25, "fail_rules": [{"match": "X"}]})
    assert status == 200 and cfg["rpm"] == 120 and cfg["p_500"] == 0.25
    assert cfg["fail_rules"][0]["match"] == "X" and cfg["fail_rules"][0]["status"] == 500
    assert sim.config.rpm == 120
    status, _, body = post(root + "/_sim/config", {"not_a_field": 1})
    assert status == 400 and "not_a_field" in assert_error_shape(body)["message"]
    status, _, body = post(root + "/_sim/config", {"p_500": 2})
    assert status == 400
    post(sim.base_url + "/chat/completions", chat_body())
    status, _, stats = post(root + "/_sim/stats?hashes=1", None, method="GET")
    assert status == 200 and stats["total_requests"] == 1 and len(stats["request_hashes"]) == 1
    assert post(root + "/_sim/reset", {})[0] == 200
    assert post(root + "/_sim/stats", None, method="GET")[2]["total_requests"] == 0
    assert post(root + "/_sim/health", None, method="GET")[2] == {"ok": True}
    status, _, body = post(root + "/_sim/requests", None, method="GET")
    assert status == 200 and body["data"] == []


def test_configure_in_process_validates(sim):
    import pytest

    with pytest.raises(ValueError):
        sim.configure(latency_dist="gamma")
    with pytest.raises(ValueError):
        sim.configure(p_500=0.6, p_503=0.6)
    cfg = sim.configure(answer_prefix="A: ")
    assert cfg.answer_prefix == "A: "
    r = sdk(sim).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "q"}])
    assert r.choices[0].message.content == "A: q"


def test_execute_without_http(sim):
    import asyncio

    from inferframe.simulator.pipeline import execute

    status, out = asyncio.run(execute(sim.state, "/v1/chat/completions", {
        "model": "gpt-4o-mini", "messages": [{"role": "user", "content": "bulk"}]}))
    assert status == 200 and out["choices"][0]["message"]["content"] == "sim answer: bulk"
    status, out = asyncio.run(execute(sim.state, "/v1/embeddings", {"model": "nope", "input": "x"}))
    assert status == 404 and out["error"]["code"] == "model_not_found"
    status, out = asyncio.run(execute(sim.state, "/v1/batches", {}))
    assert status == 404
    assert sim.stats()["total_requests"] == 0


def test_per_token_latency_and_completion_counter():
    import time

    with make_sim(latency_per_output_token_ms=20) as sim:
        t = time.perf_counter()
        status, _, body = post(sim.base_url + "/chat/completions", chat_body("x" * 40))
        assert status == 200
        assert time.perf_counter() - t >= 0.02 * body["usage"]["completion_tokens"]
        assert sim.stats()["completion_tokens"] == body["usage"]["completion_tokens"]
