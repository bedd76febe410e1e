"""Unit tests of the pure helpers: durations, tokens, config, limiter, latency, schema generation."""

from __future__ import annotations

import json
import statistics

import pytest

from inferframe.simulator import FailRule, SimulatorConfig
from inferframe.simulator.faults import FaultPicker, LatencyModel, draws
from inferframe.simulator.ratelimit import RateLimiter, format_duration
from inferframe.simulator.schema_gen import SchemaError, generate
from inferframe.simulator.tokens import TokenCounter

from .jsonschema_lite import validate


@pytest.mark.parametrize(
    "seconds,text",
    [(0, "0s"), (0.02, "20ms"), (0.0001, "1ms"), (1, "1s"), (1.5, "1.5s"), (59.56, "59.56s"), (60, "1m0s"),
     (360, "6m0s"), (3725, "1h2m5s"), (0.9999, "1s")],
)
def test_format_duration_like_openai(seconds, text):
    assert format_duration(seconds) == text


def test_token_estimate_and_truncate():
    c = TokenCounter("estimate")
    assert c.count("") == 0 and c.count("abcd") == 2 and c.count("hello world") == 3
    for n in range(1, 20):
        t = c.truncate("x" * 200, n)
        assert c.count(t) <= n
        assert c.count("x" * 200) > n
    assert c.truncate("abc", 0) == ""


def test_tiktoken_tokenizer_falls_back_or_counts():
    c = TokenCounter("tiktoken")
    n = c.count("hello world", "gpt-4o-mini")
    assert n in (2, 3)  # 2 with the real encoding, 3 with the offline fallback estimate
    assert c.count(c.truncate("word " * 50, 5, "gpt-4o-mini"), "gpt-4o-mini") <= 5


def test_config_validation_and_roundtrip():
    with pytest.raises(ValueError):
        SimulatorConfig(p_500=1.5)
    with pytest.raises(ValueError):
        SimulatorConfig(rpm=0)
    with pytest.raises(ValueError):
        SimulatorConfig(latency_lo_ms=10, latency_hi_ms=5)
    with pytest.raises(ValueError):
        SimulatorConfig().updated(nope=1)
    with pytest.raises(ValueError):
        FailRule(match="x", kind="explode")
    cfg = SimulatorConfig(rpm=5, fail_rules=[{"match": "A", "status": 429, "times": 1}], models=["m1"])
    assert isinstance(cfg.fail_rules[0], FailRule) and cfg.models == ("m1",)
    again = SimulatorConfig.from_dict(json.loads(json.dumps(cfg.to_json_dict())))
    assert again == cfg
    with pytest.raises(ValueError):
        SimulatorConfig(responder=lambda b: "x").to_json_dict()


def test_rate_limiter_with_fake_clock():
    rl = RateLimiter(rpm=60, tpm=600, burst_s=60)
    t = 1000.0
    for i in range(60):
        d = rl.acquire("m", 5, t)
        assert d.allowed
    d = rl.acquire("m", 5, t)
    assert not d.allowed and d.reason == "requests" and d.retry_after_s == pytest.approx(1.0)
    d = rl.acquire("m", 5, t + 1.0)  # one request refilled after 1 s
    assert d.allowed and d.headers["x-ratelimit-remaining-requests"] == "0"
    assert d.headers["x-ratelimit-reset-requests"] == "1m0s"
    rl2 = RateLimiter(rpm=None, tpm=600)
    assert rl2.acquire("m", 600, t).allowed
    d = rl2.acquire("m", 10, t)
    assert not d.allowed and d.reason == "tokens" and d.retry_after_s == pytest.approx(1.0)
    assert rl2.acquire("m", 700, t + 100).reason == "too_large"
    assert "x-ratelimit-limit-requests" not in d.headers


def test_fault_picker_frequencies():
    fp = FaultPicker(SimulatorConfig(p_500=0.2, p_refusal=0.3))
    picks = [fp.pick(draws(b"k", i.to_bytes(4, "little"), 0)[0]) for i in range(20000)]
    assert picks.count("server_error") / 20000 == pytest.approx(0.2, abs=0.015)
    assert picks.count("refusal") / 20000 == pytest.approx(0.3, abs=0.015)
    assert picks.count(None) / 20000 == pytest.approx(0.5, abs=0.015)
    assert not FaultPicker(SimulatorConfig()).active


def test_draws_depend_on_seed_body_and_attempt():
    a = draws(b"seed", b"h" * 16, 0)
    assert a == draws(b"seed", b"h" * 16, 0)
    assert a != draws(b"seed", b"h" * 16, 1) and a != draws(b"other", b"h" * 16, 0)
    assert all(0 <= u < 1 for u in a)


def test_latency_distributions():
    us = [(i + 0.5) / 2000 for i in range(2000)]
    logn = LatencyModel(SimulatorConfig(latency_dist="lognormal", latency_ms=100, latency_sigma=0.5))
    xs = [logn.sample(u) for u in us]
    assert statistics.median(xs) == pytest.approx(0.1, rel=0.02)
    assert max(xs) > 0.3 and min(xs) > 0
    uni = LatencyModel(SimulatorConfig(latency_dist="uniform", latency_lo_ms=10, latency_hi_ms=30))
    ys = [uni.sample(u) for u in us]
    assert min(ys) >= 0.01 and max(ys) <= 0.03 and statistics.mean(ys) == pytest.approx(0.02, rel=0.01)
    assert LatencyModel(SimulatorConfig()).zero
    assert not LatencyModel(SimulatorConfig(latency_per_output_token_ms=1)).zero


COMPLEX_SCHEMA = {
    "type": "object",
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 3, "maxLength": 12},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name", "children"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "when": {"type": "string", "format": "date-time"},
        "email": {"type": "string", "format": "email"},
        "kind": {"enum": ["a", "b", "c"]},
        "version": {"const": 2},
        "score": {"type": "number", "minimum": -5, "exclusiveMaximum": 5},
        "count": {"type": "integer", "minimum": 10, "maximum": 20, "multipleOf": 5},
        "maybe": {"type": ["string", "null"]},
        "choice": {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"type": "boolean"}},
                                                     "required": ["x"], "additionalProperties": False}]},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 2,
                 "maxItems": 2},
        "many": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 3}, "minItems": 3,
                 "uniqueItems": True},
        "tree": {"$ref": "#/$defs/node"},
        "merged": {"allOf": [{"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]},
                             {"properties": {"q": {"type": "integer"}}, "required": ["q"]}]},
        "free": {},
    },
    "required": ["id", "when", "email", "kind", "version", "score", "count", "maybe", "choice", "pair", "many",
                 "tree", "merged", "free"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("seed", range(40))
def test_schema_generation_conforms(seed):
    value = generate(COMPLEX_SCHEMA, seed)
    validate(value, COMPLEX_SCHEMA)
    assert value["version"] == 2 and value["count"] in (10, 15, 20)
    assert generate(COMPLEX_SCHEMA, seed) == value


def test_schema_generation_varies_and_errors():
    values = {json.dumps(generate(COMPLEX_SCHEMA, s), sort_keys=True) for s in range(10)}
    assert len(values) > 5
    with pytest.raises(SchemaError):
        generate({"$ref": "#/$defs/missing"}, 0)
    with pytest.raises(SchemaError):
        generate({"type": "integer", "minimum": 5, "maximum": 1}, 0)
    assert generate({"type": "array", "items": {"type": "string"}, "maxItems": 0}, 0) == []


def test_quantized_limits_tell_the_minute_and_enforce_the_second():
    rl = RateLimiter(rpm=1200, tpm=60_000, mode="quantized")
    allowed = [rl.acquire("m", 10, 0.0) for _ in range(21)]
    assert sum(d.allowed for d in allowed) == 20  # one second of 1,200 RPM
    refused = allowed[-1]
    assert refused.reason == "requests" and refused.retry_after_s == pytest.approx(0.05)
    assert refused.headers["x-ratelimit-remaining-requests"] == "1180"  # the minute seems open
    assert refused.headers["x-ratelimit-reset-requests"] == "1s"  # 20 spent of the minute, 20/s
    assert rl.acquire("m", 10, 0.05).allowed  # one more after 50 ms
    tokens = RateLimiter(rpm=None, tpm=60_000, mode="quantized")
    assert tokens.acquire("m", 1000, 0.0).allowed and not tokens.acquire("m", 10, 0.0).allowed


def test_rate_limit_headers_can_be_left_out():
    d = RateLimiter(rpm=60, tpm=600, headers="no_reset").acquire("m", 5, 0.0)
    assert "x-ratelimit-remaining-requests" in d.headers and not any("reset" in k for k in d.headers)
    assert RateLimiter(rpm=60, tpm=600, headers="none").acquire("m", 5, 0.0).headers == {}
    with pytest.raises(ValueError):
        SimulatorConfig(ratelimit_headers="some")
    assert SimulatorConfig(rpm=60, ratelimit_mode="quantized", ratelimit_quantum_s=0.5).ratelimit_quantum_s == 0.5
