"""Rate limits: 429 bodies, Retry-After / retry-after-ms, x-ratelimit-* headers, refill, TPM."""

from __future__ import annotations

import re
import time

import openai
import pytest

from .helpers import assert_error_shape, chat_body, make_sim, post, sdk

DURATION = re.compile(r"^(\d+h)?(\d+m)?(\d+(\.\d+)?s|\d+ms)$")
RL_HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
)


def test_rpm_limit_429_with_headers():
    with make_sim(rpm=60, tpm=100_000) as sim:
        url = sim.base_url + "/chat/completions"
        remaining = []
        for i in range(60):
            status, h, _ = post(url, chat_body(f"row {i}"))
            assert status == 200
            for name in RL_HEADERS:
                assert name in h, name
            assert h["x-ratelimit-limit-requests"] == "60" and h["x-ratelimit-limit-tokens"] == "100000"
            assert DURATION.match(h["x-ratelimit-reset-requests"]) and DURATION.match(h["x-ratelimit-reset-tokens"])
            remaining.append(int(h["x-ratelimit-remaining-requests"]))
        assert remaining[0] == 59 and remaining[-1] == 0
        assert remaining == sorted(remaining, reverse=True)
        status, h, body = post(url, chat_body("one too many"))
        assert status == 429
        err = assert_error_shape(body, "requests", "rate_limit_exceeded")
        assert "requests per min (RPM): Limit 60" in err["message"]
        assert 1 <= int(h["retry-after"]) <= 2
        assert 0 < int(h["retry-after-ms"]) <= 1000
        assert h["x-ratelimit-remaining-requests"] == "0"
        for name in RL_HEADERS:
            assert name in h
        s = sim.stats()
        assert s["rate_limited"] == 1 and s["by_status"] == {"200": 60, "429": 1}


def test_bucket_refills_continuously():
    # 600 rpm with a 1 s burst: capacity 10, refills 10/s
    with make_sim(rpm=600, ratelimit_burst_s=1.0) as sim:
        url = sim.base_url + "/chat/completions"
        statuses = [post(url, chat_body(f"r{i}"))[0] for i in range(11)]
        assert statuses[:10] == [200] * 10 and statuses[10] == 429
        _, h, _ = post(url, chat_body("again"))
        wait_ms = int(h["retry-after-ms"])
        assert 0 < wait_ms <= 100
        time.sleep(wait_ms / 1000 + 0.03)
        assert post(url, chat_body("after wait"))[0] == 200


def test_sdk_honours_retry_after_ms():
    with make_sim(rpm=600, ratelimit_burst_s=0.1) as sim:  # capacity 1
        c = sdk(sim, max_retries=0)
        c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}])
        with pytest.raises(openai.RateLimitError) as ei:
            c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "b"}])
        assert ei.value.code == "rate_limit_exceeded"
        assert ei.value.response.headers["retry-after-ms"]
        c2 = sdk(sim, max_retries=3)
        raw = c2.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "c"}]
        )
        assert raw.http_response.status_code == 200
        assert raw.headers["x-ratelimit-limit-requests"] == "600"
        assert raw.parse().choices[0].message.content == "sim answer: c"


def test_tpm_limit_counts_prompt_and_max_tokens():
    with make_sim(tpm=1000) as sim:
        url = sim.base_url + "/chat/completions"
        s1, h1, _ = post(url, chat_body("x", max_tokens=400))
        assert s1 == 200 and "x-ratelimit-limit-requests" not in h1
        used = 1000 - int(h1["x-ratelimit-remaining-tokens"])
        assert used >= 400
        assert post(url, chat_body("y", max_tokens=400))[0] == 200
        s3, h3, body = post(url, chat_body("z", max_tokens=400))
        assert s3 == 429
        assert_error_shape(body, "tokens", "rate_limit_exceeded")
        assert "tokens per min (TPM)" in body["error"]["message"]
        s4, _, body = post(url, chat_body("huge", max_tokens=5000))
        assert s4 == 429 and "Request too large" in body["error"]["message"]


def test_limits_are_per_model():
    with make_sim(rpm=600, ratelimit_burst_s=0.1) as sim:
        url = sim.base_url + "/chat/completions"
        assert post(url, chat_body("a"))[0] == 200
        assert post(url, chat_body("b"))[0] == 429
        assert post(url, dict(chat_body("c"), model="gpt-4o"))[0] == 200
        sim.configure(ratelimit_scope="global")
        assert post(url, chat_body("d"))[0] == 200
        assert post(url, dict(chat_body("e"), model="gpt-4o"))[0] == 429


def test_no_ratelimit_headers_when_unlimited(sim):
    _, h, _ = post(sim.base_url + "/chat/completions", chat_body())
    assert not any(k.startswith("x-ratelimit") for k in h)


def test_reconfigure_limits_at_runtime(sim):
    sim.configure(rpm=600, ratelimit_burst_s=0.1)
    url = sim.base_url + "/chat/completions"
    assert [post(url, chat_body(str(i)))[0] for i in range(2)] == [200, 429]
    sim.configure(rpm=None)
    assert post(url, chat_body("free"))[0] == 200


def test_window_mode_allows_the_whole_window_at_once_then_waits_for_its_end():
    # 600 RPM in windows of 0.5 s: 5 requests per window, all at once; the 6th waits for the window's end.
    with make_sim(rpm=600, ratelimit_mode="window", ratelimit_window_s=0.5) as sim:
        url = sim.base_url + "/chat/completions"
        answers = [post(url, chat_body(f"w{i}")) for i in range(6)]
        assert [a[0] for a in answers] == [200] * 5 + [429]
        assert [int(a[1]["x-ratelimit-remaining-requests"]) for a in answers[:5]] == [4, 3, 2, 1, 0]
        status, h, body = answers[5]
        assert_error_shape(body, "requests", "rate_limit_exceeded")
        wait_ms = int(h["retry-after-ms"])
        assert 0 < wait_ms <= 500 and DURATION.match(h["x-ratelimit-reset-requests"])
        time.sleep(wait_ms / 1000 + 0.03)
        status, h, _ = post(url, chat_body("next window"))
        assert status == 200 and h["x-ratelimit-remaining-requests"] == "4"  # the whole window is back


def test_window_mode_is_a_config_choice():
    from inferframe.simulator import SimulatorConfig

    with pytest.raises(ValueError, match="ratelimit_mode"):
        SimulatorConfig(ratelimit_mode="leaky")
    assert SimulatorConfig(ratelimit_mode="window").ratelimit_window_s == 60.0
