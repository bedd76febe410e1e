"""POST /v1/chat/completions -> ``chat.completion`` objects (non-streaming).

Supports messages (text, image and file parts), max_tokens /
max_completion_tokens (finish_reason 'length' on truncation), n, stop,
response_format text / json_object / json_schema (a JSON document generated
from the schema), refusal and length faults.  ``stream=true`` is rejected
with a 400 by the pipeline.

Example:
    >>> import openai
    >>> from inferframe.simulator import Simulator
    >>> with Simulator() as sim:
    ...     client = openai.OpenAI(base_url=sim.base_url, api_key="x", max_retries=0)
    ...     c = client.chat.completions.create(model="gpt-4o-mini",
    ...         messages=[{"role": "user", "content": "hi"}], max_tokens=5)
    >>> c.choices[0].message.content, c.choices[0].finish_reason
    ('sim answer: hi', 'stop')
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from ..errors import invalid_request
from ..pipeline import Prepared, inference_handler
from ..prompts import chat_messages, type_name
from ._validate import bad_value, int_param, missing, reject_unknown

__all__ = ["ChatCompletions", "register"]

KNOWN_PARAMS = frozenset(
    "messages model audio frequency_penalty function_call functions logit_bias logprobs max_completion_tokens "
    "max_tokens metadata modalities moderation n parallel_tool_calls prediction presence_penalty prompt_cache_key "
    "prompt_cache_options prompt_cache_retention reasoning_effort response_format safety_identifier seed "
    "service_tier stop store stream stream_options temperature tool_choice tools top_logprobs top_p user "
    "verbosity web_search_options".split()
) | {"id_slot", "cache_prompt"}  # llama.cpp server's prompt-cache fields: one body serves both servers
_FINGERPRINT = "fp_sim0000001"


def _response_format(rf: Any) -> tuple[str, Any]:
    if rf is None:
        return "text", None
    if not isinstance(rf, dict):
        raise invalid_request(
            f"Invalid type for 'response_format': expected an object, but got {type_name(rf)} instead.",
            param="response_format",
            code="invalid_type",
        )
    t = rf.get("type")
    if t == "text" or t == "json_object":
        return t, None
    if t == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, dict):
            raise missing("response_format.json_schema")
        if not js.get("name"):
            raise missing("response_format.json_schema.name")
        return "json_schema", js.get("schema") or {}
    if t is None:
        raise missing("response_format.type")
    raise bad_value("response_format.type", t, ("json_object", "json_schema", "text"))


def _stop(stop: Any) -> list | None:
    if stop is None:
        return None
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if len(stop) > 4:
            raise invalid_request(
                f"Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with "
                f"length {len(stop)} instead.",
                param="stop",
                code="array_above_max_length",
            )
        return stop
    raise invalid_request(
        "Invalid type for 'stop': expected one of a string or array of strings.", param="stop", code="invalid_type"
    )


class ChatCompletions:
    """Endpoint object for the pipeline (see :mod:`..pipeline`)."""

    name = "chat.completions"
    path = "/v1/chat/completions"
    text_faults = True
    prefix_cached = True

    def prepare(self, st: Any, body: dict) -> Prepared:
        if st.cfg.reject_unknown_params:
            reject_unknown(body, KNOWN_PARAMS, "chat")
        model = st.check_model(body, "text", self.path)
        if "messages" not in body:
            raise missing("messages")
        ex = chat_messages(body["messages"])
        max_out = int_param(body, "max_completion_tokens", minimum=1)
        if max_out is None:
            max_out = int_param(body, "max_tokens", minimum=1)
        n = int_param(body, "n", minimum=1, maximum=128, default=1)
        fmt, schema = _response_format(body.get("response_format"))
        stop = _stop(body.get("stop"))
        prompt_tokens = st.counter.count(ex.text, model) + ex.extra_tokens + 3 * ex.n_messages + 3
        cost = prompt_tokens + (max_out or 0) * n
        return Prepared(model, body, ex.text, ex.user_text, prompt_tokens, max_out, cost, fmt, schema, n, stop)

    def render(self, st: Any, prep: Prepared, result: Any) -> dict:
        if result.refusal is not None:
            finish = "stop"
        else:
            finish = "length" if result.truncated else "stop"
        message = {"role": "assistant", "content": result.text, "refusal": result.refusal, "annotations": []}
        if prep.n == 1:
            choices = [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}]
        else:
            choices = [
                {"index": i, "message": dict(message), "logprobs": None, "finish_reason": finish}
                for i in range(prep.n)
            ]
        completion = result.tokens * prep.n
        return {
            "id": st.next_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": prep.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prep.prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prep.prompt_tokens + completion,
                "prompt_tokens_details": {"cached_tokens": prep.cached_tokens, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": _FINGERPRINT,
        }


def register(app: web.Application, state: Any) -> None:
    """Add POST /v1/chat/completions."""
    ep = ChatCompletions()
    app.router.add_post(ep.path, inference_handler(state, ep))
