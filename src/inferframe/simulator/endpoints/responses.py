"""POST /v1/responses -> ``response`` objects (non-streaming, stateless).

The body has every field of the SDK's ``Response`` model that the API sends,
plus the wire-only keys the live API also returns (``store``, ``billing``,
``frequency_penalty``, ``presence_penalty``); see ``WIRE_ONLY_KEYS``.

Accepts ``input`` as a string or a list of items (messages whose content is a
string or input_text / input_image / input_file parts, plus function-call
items), ``instructions``, ``max_output_tokens`` (status 'incomplete' with
incomplete_details.reason 'max_output_tokens' on truncation) and
``text.format`` text / json_object / json_schema.  Refusal faults produce a
``refusal`` content part.

Example:
    >>> import openai
    >>> from inferframe.simulator import Simulator
    >>> with Simulator() as sim:
    ...     client = openai.OpenAI(base_url=sim.base_url, api_key="x", max_retries=0)
    ...     r = client.responses.create(model="gpt-4o-mini", input="hi", instructions="be brief")
    >>> r.status, r.output_text
    ('completed', 'sim answer: hi')
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from ..errors import invalid_request
from ..pipeline import Prepared, inference_handler
from ..prompts import responses_input, type_name
from ._validate import bad_value, int_param, missing, reject_unknown

__all__ = ["Responses", "register", "WIRE_ONLY_KEYS"]

KNOWN_PARAMS = frozenset(
    "access_programs background background_options context_management conversation image include input "
    "instructions max_output_tokens max_tool_calls metadata model moderation parallel_tool_calls "
    "previous_response_id prompt prompt_cache_key prompt_cache_options prompt_cache_retention reasoning "
    "safety_identifier service_tier store stream stream_options temperature text tool_choice tools top_logprobs "
    "top_p truncation user".split()
) | {"id_slot", "cache_prompt"}  # llama.cpp server's prompt-cache fields: one body serves both servers
_TEXT_FORMAT = (("type", "text"),)  # a fresh dict per response: dict(_TEXT_FORMAT)
#: Top-level keys the live API returns that the SDK's Response model does not declare.
WIRE_ONLY_KEYS = frozenset({"store", "billing", "frequency_penalty", "presence_penalty"})


def _text_format(text: Any) -> tuple[str, Any, dict]:
    if text is None:
        return "text", None, dict(_TEXT_FORMAT)
    if not isinstance(text, dict):
        raise invalid_request(
            f"Invalid type for 'text': expected an object, but got {type_name(text)} instead.",
            param="text",
            code="invalid_type",
        )
    fmt = text.get("format")
    if fmt is None:
        return "text", None, dict(_TEXT_FORMAT)
    if not isinstance(fmt, dict):
        raise invalid_request(
            f"Invalid type for 'text.format': expected an object, but got {type_name(fmt)} instead.",
            param="text.format",
            code="invalid_type",
        )
    t = fmt.get("type")
    if t == "text" or t == "json_object":
        return t, None, {"type": t}
    if t == "json_schema":
        if not fmt.get("name"):
            raise missing("text.format.name")
        if "schema" not in fmt:
            raise missing("text.format.schema")
        echo = {
            "type": "json_schema",
            "name": fmt["name"],
            "schema": fmt["schema"],
            "strict": fmt.get("strict", False),
        }
        if fmt.get("description") is not None:
            echo["description"] = fmt["description"]
        return "json_schema", fmt["schema"], echo
    if t is None:
        raise missing("text.format.type")
    raise bad_value("text.format.type", t, ("text", "json_object", "json_schema"))


class Responses:
    """Endpoint object for the pipeline (see :mod:`..pipeline`)."""

    name = "responses"
    path = "/v1/responses"
    text_faults = True
    prefix_cached = True

    def prepare(self, st: Any, body: dict) -> Prepared:
        if st.cfg.reject_unknown_params:
            reject_unknown(body, KNOWN_PARAMS, "responses")
        model = st.check_model(body, "text", self.path)
        ex = responses_input(body.get("input"), body.get("instructions"))
        max_out = int_param(body, "max_output_tokens", minimum=16)
        fmt, schema, echo = _text_format(body.get("text"))
        prompt_tokens = st.counter.count(ex.text, model) + ex.extra_tokens + 3 * ex.n_messages + 3
        cost = prompt_tokens + (max_out or 0)
        return Prepared(model, body, ex.text, ex.user_text, prompt_tokens, max_out, cost, fmt, schema, 1, None, echo)

    def render(self, st: Any, prep: Prepared, result: Any) -> dict:
        body = prep.body
        incomplete = result.truncated
        if result.refusal is not None:
            part = {"type": "refusal", "refusal": result.refusal}
        else:
            part = {"type": "output_text", "text": result.text, "annotations": [], "logprobs": []}
        now = int(time.time())
        reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else {}
        usage_out = result.tokens
        return {
            "id": st.next_id("resp_"),
            "object": "response",
            "created_at": now,
            "status": "incomplete" if incomplete else "completed",
            "background": False,
            "billing": {"payer": "developer"},
            "completed_at": None if incomplete else now,
            "error": None,
            "frequency_penalty": 0.0,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": body.get("max_tool_calls"),
            "model": prep.model,
            "output": [
                {
                    "id": st.next_id("msg_"),
                    "type": "message",
                    "status": "incomplete" if incomplete else "completed",
                    "content": [part],
                    "role": "assistant",
                }
            ],
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "presence_penalty": 0.0,
            "previous_response_id": body.get("previous_response_id"),
            "prompt_cache_key": body.get("prompt_cache_key"),
            "prompt_cache_retention": body.get("prompt_cache_retention"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "safety_identifier": body.get("safety_identifier"),
            "service_tier": "default",
            "store": body.get("store", True),  # sent by the API, not in the SDK model
            "temperature": body.get("temperature", 1.0),
            "text": {"format": prep.extra, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_logprobs": body.get("top_logprobs", 0),
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation", "disabled"),
            "usage": {
                "input_tokens": prep.prompt_tokens,
                "input_tokens_details": {"cached_tokens": prep.cached_tokens, "cache_write_tokens": 0},
                "output_tokens": usage_out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prep.prompt_tokens + usage_out,
            },
            "user": body.get("user"),
            "metadata": body.get("metadata") or {},
        }


def register(app: web.Application, state: Any) -> None:
    """Add POST /v1/responses."""
    ep = Responses()
    app.router.add_post(ep.path, inference_handler(state, ep))
