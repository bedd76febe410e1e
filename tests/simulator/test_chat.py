"""POST /v1/chat/completions: shape, usage, max_tokens, stop, n, json_schema, validation."""

from __future__ import annotations

import json

import openai
import pytest
from openai.types.chat import ChatCompletion

from .helpers import assert_error_shape, assert_strict, chat_body, post
from .jsonschema_lite import validate

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {
            "type": "object",
            "properties": {"lang": {"const": "en"}, "n": {"type": "integer"}, "ok": {"type": "boolean"}},
            "required": ["lang", "n", "ok"],
            "additionalProperties": False,
        },
    },
    "required": ["label", "score", "tags", "meta"],
    "additionalProperties": False,
}


def test_sdk_parses_chat_completion(client):
    r = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    assert isinstance(r, ChatCompletion)
    assert r.object == "chat.completion" and r.model == "gpt-4o-mini" and r.id.startswith("chatcmpl-")
    assert len(r.choices) == 1
    ch = r.choices[0]
    assert ch.index == 0 and ch.finish_reason == "stop" and ch.logprobs is None
    assert ch.message.role == "assistant" and ch.message.refusal is None
    assert ch.message.content == "sim answer: hi"
    u = r.usage
    assert u.prompt_tokens > 0 and u.completion_tokens > 0
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_raw_body_matches_sdk_model_exactly(sim):
    status, headers, body = post(sim.base_url + "/chat/completions", chat_body("hello there"))
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert headers["x-request-id"].startswith("req_")
    obj = assert_strict(ChatCompletion, body)
    assert set(body) >= {"id", "object", "created", "model", "choices", "usage"}
    assert set(body["choices"][0]) == {"index", "message", "logprobs", "finish_reason"}
    assert {"role", "content", "refusal"} <= set(body["choices"][0]["message"])
    assert set(body["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert obj.choices[0].message.content == "sim answer: hello there"


def test_answer_is_deterministic_and_truncates_long_input(client):
    long = "x" * 1000
    a = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": long}])
    b = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": long}])
    assert a.choices[0].message.content == b.choices[0].message.content == "sim answer: " + "x" * 200


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_truncates_with_length(client, param):
    r = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "tell me a long story " * 10}], **{param: 3}
    )
    ch = r.choices[0]
    assert ch.finish_reason == "length"
    assert r.usage.completion_tokens <= 3
    assert "sim answer: tell me a long story".startswith(ch.message.content)
    r2 = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "short"}], **{param: 100}
    )
    assert r2.choices[0].finish_reason == "stop"


def test_stop_sequence_cuts_answer(client):
    r = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "one. two. three"}], stop=[". t"]
    )
    assert r.choices[0].message.content == "sim answer: one"
    assert r.choices[0].finish_reason == "stop"


def test_n_choices(client):
    r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "q"}], n=3)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens == 3 * client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "q"}]
    ).usage.completion_tokens


def test_json_schema_output_conforms(client):
    outs = []
    for i in range(20):
        r = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": f"classify review {i}"}],
            response_format={"type": "json_schema", "json_schema": {"name": "review", "schema": SCHEMA, "strict": True}},
        )
        doc = json.loads(r.choices[0].message.content)
        validate(doc, SCHEMA)
        assert 1 <= len(doc["tags"]) <= 2 and doc["meta"]["lang"] == "en"
        outs.append(doc)
    assert len({json.dumps(o, sort_keys=True) for o in outs}) > 1, "values should vary with the input"
    again = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "classify review 0"}],
        response_format={"type": "json_schema", "json_schema": {"name": "review", "schema": SCHEMA, "strict": True}},
    )
    assert json.loads(again.choices[0].message.content) == outs[0]


def test_sdk_parse_helper_with_pydantic_model(client):
    import pydantic

    class Review(pydantic.BaseModel):
        label: str
        score: float
        tags: list[str]

    r = client.chat.completions.parse(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "rate it"}], response_format=Review
    )
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Review) and isinstance(parsed.tags, list)


def test_json_object_mode(client):
    r = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "json please"}],
        response_format={"type": "json_object"},
    )
    assert json.loads(r.choices[0].message.content) == {"answer": "sim answer: json please"}


def test_image_parts_count_tokens(client):
    plain = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "what?"}])
    img = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "what?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
        ]}],
    )
    assert img.usage.prompt_tokens == plain.usage.prompt_tokens + 85
    assert img.choices[0].message.content == "sim answer: what?"


@pytest.mark.parametrize(
    "body,param,code",
    [
        ({"model": "gpt-4o-mini"}, "messages", "missing_required_parameter"),
        (chat_body(max_tokens=0), "max_tokens", "integer_below_min_value"),
        (chat_body(max_tokens="5"), "max_tokens", "invalid_type"),
        (chat_body(stream=True), "stream", "unsupported_value"),
        ({"model": "gpt-4o-mini", "messages": []}, "messages", "empty_array"),
        ({"model": "gpt-4o-mini", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "invalid_value"),
        (chat_body(response_format={"type": "json_schema"}), "response_format.json_schema", "missing_required_parameter"),
        (chat_body(bogus=1), None, None),
    ],
)
def test_invalid_requests_get_400(sim, body, param, code):
    status, _, resp = post(sim.base_url + "/chat/completions", body)
    assert status == 400
    err = assert_error_shape(resp, "invalid_request_error", code)
    assert err["param"] == param


def test_invalid_json_body(sim):
    status, _, resp = post(sim.base_url + "/chat/completions", None, raw=b"{not json")
    assert status == 400
    assert "could not parse the JSON body" in assert_error_shape(resp, "invalid_request_error")["message"]


def test_stream_rejected_through_sdk(client):
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], stream=True)
    assert ei.value.status_code == 400


def test_custom_responder_callable(sim, client):
    sim.configure(responder=lambda body: body["messages"][-1]["content"].upper())
    r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "shout"}])
    assert r.choices[0].message.content == "SHOUT"
    sim.configure(responder=lambda body: {"k": 1})
    r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert json.loads(r.choices[0].message.content) == {"k": 1}


def test_responder_exception_becomes_500(sim, client):
    def boom(body):
        raise RuntimeError("bad responder")

    sim.configure(responder=boom)
    with pytest.raises(openai.InternalServerError) as ei:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert "bad responder" in str(ei.value)


def test_async_responder(sim, client):
    async def respond(body):
        return "async ok"

    sim.configure(responder=respond)
    r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert r.choices[0].message.content == "async ok"


def test_dated_snapshot_model_accepted(client):
    r = client.chat.completions.create(
        model="gpt-4o-mini-2024-07-18", messages=[{"role": "user", "content": "x"}]
    )
    assert r.model == "gpt-4o-mini-2024-07-18"
