"""Issue 32 items 2 and 3: a provider plugin implements only the protocols it can; a request keeps its prompt and bound.

A minimal plugin (a transport plus ``RequestFormat``) runs ``prompt()`` end to end; what it lacks
(repair, a Batch API, label scores, building requests at all) is a PlanError when the call is
built, before any request. The runtime's readers (the limiter's estimate, the prefix scheduler,
the cost estimate) read the prompt and the output bound kept beside the body, never the body.
"""

from __future__ import annotations

import asyncio
import warnings

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import classify_text, prompt
from inferframe.providers import interface, openai_format
from inferframe.providers.interface import (
    BaseTransport, BatchAPI, Capabilities, Outcome, RepairFormat, Request, RequestFormat, Transport,
    supports,
)
from inferframe.providers.registry import REGISTRY


class EchoTransport(BaseTransport):
    """A plugin that can only build plain bodies and answer them: ``RequestFormat`` and a transport, nothing else.

    It declares a Batch API and log-probabilities it does not implement: neither is offered.
    """

    capabilities = Capabilities(default_endpoint="chat", batch_api=True, logprobs="top")
    sent: list = []

    def __init__(self, spec, *, base_url=None, api_key=None, capabilities=None):
        self.name, self.service, self.cache_identity = spec.name, "the echo plugin", "echo"

    @classmethod
    def request_body(cls, endpoint, model, parts, system, options, format_fields, media=None, max_output_tokens=None):
        return {"model": model, "text": "".join(str(v) for v, _, _ in parts), "system": system, **options,
                "max_tokens": max_output_tokens}

    @classmethod
    def prompt_text(cls, endpoint, body):
        return f"{body['system'] or ''}|{body['text']}"

    async def send(self, request: Request) -> Outcome:
        EchoTransport.sent.append(request)
        return Outcome(value=f"{request.prompt} <= {request.max_output_tokens}")


class SendOnly(BaseTransport):
    """A transport with no wire format: it cannot be asked anything."""

    def __init__(self, spec, **_):
        self.name = spec.name

    async def send(self, request):  # pragma: no cover - never reached: planning refuses it
        raise AssertionError("a request was sent")


@pytest.fixture
def plugins():
    EchoTransport.sent = []
    REGISTRY.names()  # the entry points first, so these stay after them
    REGISTRY.register("echo_plugin", EchoTransport)
    REGISTRY.register("send_only_plugin", SendOnly)
    yield
    for name in ("echo_plugin", "send_only_plugin", "legacy_plugin"):
        REGISTRY._providers.pop(name, None)


def test_the_protocols_say_what_each_provider_implements():
    from inferframe.providers.local import LocalProvider
    from inferframe.providers.openai import HostedOpenAIProvider, OpenAIProvider

    assert supports(EchoTransport, RequestFormat) and supports(EchoTransport, Transport)
    assert not supports(EchoTransport, RepairFormat) and not supports(EchoTransport, BatchAPI)
    assert supports(HostedOpenAIProvider, BatchAPI) and supports(OpenAIProvider, RepairFormat)
    assert supports(LocalProvider, interface.Tokenizer) and supports(LocalProvider, interface.PrefixRouting)
    assert not supports(OpenAIProvider, interface.PrefixRouting)  # a generic server: one shared cache
    # A provider that keeps no model catalog gets the neutral answers, not an AttributeError.
    caps = Capabilities(context_tokens=1234, vision=None)
    assert interface.context_size(EchoTransport, "m", caps) == 1234 and interface.reads_images(EchoTransport, "m", caps) is None
    assert interface.format_fields(EchoTransport, caps, "chat", "R", {"type": "string"}, None) == {}
    assert interface.embedding_size(EchoTransport, "m") is None and not interface.knows_model(EchoTransport, "m")


def test_a_minimal_plugin_runs_prompt(plugins):
    df = ifr.from_pydict({"t": ["a", "b"]})
    out = df.with_column("out", prompt(col("t"), provider="echo_plugin", model="e", system_message="S",
                                       max_tokens=9, cache=False)).collect().to_pydict()
    assert out["out"] == ["S|a <= 9", "S|b <= 9"]
    assert sorted(r.prompt for r in EchoTransport.sent) == ["S|a", "S|b"]
    assert all(r.est_tokens > 9 for r in EchoTransport.sent)  # the estimate holds the bound


@pytest.mark.parametrize("build, missing", [
    (lambda: prompt(col("t"), provider="echo_plugin", model="e", return_format=["x", "y"], repair=True), "RepairFormat"),
    (lambda: prompt(col("t"), provider="echo_plugin", model="e", batch=True), "Batch API"),
    (lambda: classify_text(col("t"), ["x", "y"], provider="echo_plugin", model="e", method="score"),
     "no log-probabilities"),
    (lambda: prompt(col("t"), provider="send_only_plugin", model="e"), "RequestFormat"),
])
def test_what_a_plugin_lacks_is_a_plan_error_before_any_request(plugins, build, missing):
    with pytest.raises(PlanError, match=missing):
        build()
    assert EchoTransport.sent == []


def test_the_old_base_still_works_and_warns(plugins):
    with pytest.warns(DeprecationWarning, match="BaseTransport"):
        class Legacy(interface.Provider):
            def __init__(self, spec, **_):
                self.name = spec.name

            @classmethod
            def request_body(cls, endpoint, model, parts, system, options, format_fields, media=None):
                return {"text": "".join(str(v) for v, _, _ in parts)}

            @classmethod
            def prompt_text(cls, endpoint, body):
                return body["text"]

            async def send(self, request):
                return Outcome(value=request.prompt.upper())

    REGISTRY.register("legacy_plugin", Legacy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        out = ifr.from_pydict({"t": ["a"]}).with_column(
            "out", prompt(col("t"), provider="legacy_plugin", model="e", cache=False)).collect().to_pydict()
    assert out["out"] == ["A"]


# --- item 3: the prompt and its bound beside the body ------------------------------------------------


@pytest.fixture
def body_unread(monkeypatch):
    """After the requests are built, reading their prompt or bound out of a body fails the test."""
    def refuse(*_a, **_k):
        raise AssertionError("the body was read back")

    def arm():
        for name in ("prompt_text", "estimate_tokens"):
            monkeypatch.setattr(openai_format, name, refuse)
        from inferframe.providers.openai import OpenAIProvider

        monkeypatch.setattr(OpenAIProvider, "prompt_text", classmethod(refuse))
    return arm


def _config(max_tokens=7, system="Shared rules. " * 30):
    from inferframe.ai.config import AICallConfig
    from inferframe.providers.spec import ProviderSpec
    from inferframe.runtime.config import RuntimeConfig

    return AICallConfig("chat", ProviderSpec("lm_studio"), "m", system, (),
                        RuntimeConfig(cache_policy="off", max_concurrency=2, price=(1.0, 2.0, 0.1)), 1, "p",
                        max_output_tokens=max_tokens)


def test_the_limiter_and_the_scheduler_read_the_fields_not_the_body(body_unread):
    from inferframe.ai.requests import build_request
    from inferframe.providers.interface import MockProvider
    from inferframe.providers.tokens import count_text
    from inferframe.runtime.engine import InferenceRuntime

    config = _config()
    texts = ["q2", "q1", "q2 again"]
    requests = [build_request(config, [t]) for t in texts]
    assert [r.max_output_tokens for r in requests] == [7] * 3
    assert all(r.prompt.endswith("user\x1f" + t) for r, t in zip(requests, texts))
    body_unread()
    seen = []
    provider = MockProvider(lambda r: seen.append(r) or Outcome(value="ok"), name="lm_studio")
    rt = InferenceRuntime(provider, config.runtime, model="m")
    results = asyncio.run(rt.run_many(requests))
    assert [r.value for r in results] == ["ok"] * 3
    # The limiter reserved the estimate made from the kept prompt and bound.
    assert [r.est_tokens for r in seen] == [count_text(r.prompt, "m") + 4 + 7 for r in seen]
    assert sorted(r.prompt for r in seen) == sorted(r.prompt for r in requests)


def test_the_cost_estimate_reads_the_fields_not_the_body(body_unread, monkeypatch):
    from inferframe.ai import requests as ai_requests

    config = _config(max_tokens=10)
    built = []
    real = ai_requests.build_request
    monkeypatch.setattr(ai_requests, "build_request", lambda *a, **k: built.append(1) or real(*a, **k))
    # The wire format is asked for each prompt once, when its request is built; the body is not read after.
    calls = []
    real_prompt = openai_format.prompt_text
    from inferframe.providers.openai import OpenAIProvider

    monkeypatch.setattr(OpenAIProvider, "prompt_text",
                        classmethod(lambda cls, endpoint, body: calls.append(1) or real_prompt(body)))
    for name in ("estimate_tokens",):
        monkeypatch.setattr(openai_format, name, lambda *a, **k: (_ for _ in ()).throw(AssertionError("read back")))
    est = ai_requests.estimate_call(config, [(f"question {i}",) for i in range(4)])
    assert len(calls) == len(built) == 4
    assert est["rows"] == 4 and est["max_output_tokens"] == 40 and est["cached_tokens"] > 0
