"""POST /v1/responses: shape, inputs, instructions, max_output_tokens, json_schema, refusal."""

from __future__ import annotations

import json

import pytest
from openai.types.responses import Response

from inferframe.simulator.endpoints.responses import WIRE_ONLY_KEYS

from .helpers import assert_error_shape, assert_strict, post
from .jsonschema_lite import validate

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


def test_sdk_parses_response(client):
    r = client.responses.create(model="gpt-4o-mini", input="hello", instructions="be brief")
    assert isinstance(r, Response)
    assert r.object == "response" and r.status == "completed" and r.id.startswith("resp_")
    assert r.instructions == "be brief" and r.model == "gpt-4o-mini"
    assert r.output_text == "sim answer: hello"
    msg = r.output[0]
    assert msg.type == "message" and msg.role == "assistant" and msg.status == "completed" and msg.id
    assert msg.content[0].type == "output_text" and msg.content[0].annotations == []
    u = r.usage
    assert u.input_tokens > 0 and u.output_tokens > 0 and u.total_tokens == u.input_tokens + u.output_tokens
    assert u.input_tokens_details.cached_tokens == 0 and u.output_tokens_details.reasoning_tokens == 0
    assert r.parallel_tool_calls is True and r.tool_choice == "auto" and r.tools == []
    assert r.incomplete_details is None and r.error is None


def test_raw_body_matches_sdk_model_exactly(sim):
    status, _, body = post(sim.base_url + "/responses", {"model": "gpt-4o-mini", "input": "hi"})
    assert status == 200
    assert_strict(Response, body, WIRE_ONLY_KEYS)
    assert set(body) - set(Response.model_fields) == WIRE_ONLY_KEYS
    for key in ("status", "usage", "text", "reasoning", "truncation", "store", "metadata"):
        assert key in body
    assert set(body["output"][0]) == {"id", "type", "status", "content", "role"}


def test_list_input_with_parts(client):
    r = client.responses.create(
        model="gpt-4o-mini",
        input=[
            {"role": "developer", "content": "You label images."},
            {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is in"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
                    {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,QUJD"},
                ],
            },
        ],
    )
    assert r.output_text == "sim answer: what is in"
    assert r.usage.input_tokens > 85


def test_max_output_tokens_gives_incomplete(client):
    r = client.responses.create(model="gpt-4o-mini", input="word " * 100, max_output_tokens=16)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens <= 16
    assert r.output[0].status == "incomplete"
    assert r.max_output_tokens == 16


def test_max_output_tokens_minimum(sim):
    status, _, body = post(sim.base_url + "/responses", {"model": "gpt-4o-mini", "input": "x", "max_output_tokens": 5})
    assert status == 400
    assert assert_error_shape(body, "invalid_request_error", "integer_below_min_value")["param"] == "max_output_tokens"


def test_text_format_json_schema(client):
    r = client.responses.create(
        model="gpt-4o-mini",
        input="Paris facts",
        text={"format": {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True}},
    )
    validate(json.loads(r.output_text), SCHEMA)
    assert r.text.format.type == "json_schema" and r.text.format.name == "city"


def test_refusal_content_part(sim, client):
    sim.configure(fail_rules=[{"match": "forbidden", "kind": "refusal"}])
    r = client.responses.create(model="gpt-4o-mini", input="something forbidden")
    part = r.output[0].content[0]
    assert part.type == "refusal" and part.refusal == sim.config.refusal_text
    assert r.output_text == ""
    status, _, body = post(sim.base_url + "/responses", {"model": "gpt-4o-mini", "input": "forbidden again"})
    assert_strict(Response, body, WIRE_ONLY_KEYS)
    assert body["output"][0]["content"] == [{"type": "refusal", "refusal": sim.config.refusal_text}]


@pytest.mark.parametrize(
    "body,param,code",
    [
        ({"model": "gpt-4o-mini", "input": "x", "bogus": 1}, "bogus", "unknown_parameter"),
        ({"model": "gpt-4o-mini", "input": 5}, "input", "invalid_type"),
        ({"model": "gpt-4o-mini", "input": [{"role": "user"}]}, "input[0].content", "missing_required_parameter"),
        ({"model": "gpt-4o-mini", "input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}},
         "text.format.name", "missing_required_parameter"),
        ({"model": "gpt-4o-mini", "input": "x", "stream": True}, "stream", "unsupported_value"),
    ],
)
def test_invalid_requests(sim, body, param, code):
    status, _, resp = post(sim.base_url + "/responses", body)
    assert status == 400
    assert assert_error_shape(resp, "invalid_request_error", code)["param"] == param
