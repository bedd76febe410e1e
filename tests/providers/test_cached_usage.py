"""Cached-token counts read from the answers' usage: chat completions, responses, Batch API lines, llama.cpp.

Every body here is validated against the official ``openai`` SDK types first, so the field names
are the API's, not a guess.
"""

import asyncio
import json

import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from inferframe.providers.interface import Usage
from inferframe.providers.openai_format import parse_answer, parse_batch_line, parse_chat, parse_responses


def chat_body(prompt_tokens=1300, cached=1152, details=True):
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 7, "total_tokens": prompt_tokens + 7}
    if details:
        usage["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
        usage["completion_tokens_details"] = {"reasoning_tokens": 0}
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-5-mini",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": "positive", "refusal": None}}],
            "usage": usage}


def responses_body(input_tokens=2048, cached=1920):
    return {"id": "resp_1", "object": "response", "created_at": 1_700_000_000, "model": "gpt-5-mini",
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "positive", "annotations": []}]}],
            "usage": {"input_tokens": input_tokens, "output_tokens": 3, "total_tokens": input_tokens + 3,
                      "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def test_the_bodies_are_what_the_sdk_accepts():
    chat = ChatCompletion.model_validate(chat_body())
    assert chat.usage.prompt_tokens_details.cached_tokens == 1152
    resp = Response.model_validate(responses_body())
    assert resp.usage.input_tokens_details.cached_tokens == 1920


def test_chat_completions_cached_tokens_are_read():
    out = parse_chat(chat_body())
    assert out.value == "positive"
    assert out.usage == Usage(input_tokens=1300, output_tokens=7, cached_tokens=1152)


def test_responses_cached_tokens_are_read():
    out = parse_responses(responses_body())
    assert out.value == "positive"
    assert out.usage == Usage(input_tokens=2048, output_tokens=3, cached_tokens=1920)


def test_no_details_or_a_null_count_is_zero_and_a_count_never_exceeds_the_input():
    assert parse_chat(chat_body(details=False)).usage.cached_tokens == 0
    body = chat_body()
    body["usage"]["prompt_tokens_details"] = None  # the SDK allows a null details object
    ChatCompletion.model_validate(body)
    assert parse_chat(body).usage.cached_tokens == 0
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": None}
    assert parse_chat(body).usage.cached_tokens == 0
    assert parse_chat(chat_body(prompt_tokens=100, cached=500)).usage.cached_tokens == 100


def test_llama_cpp_timings_are_read_when_the_usage_has_no_details():
    # As the packaged llama-server answers (measured), minus prompt_tokens_details, as older builds do.
    body = chat_body(prompt_tokens=281, details=False)
    body["timings"] = {"cache_n": 273, "prompt_n": 8, "predicted_n": 4}
    assert parse_chat(body).usage.cached_tokens == 273
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 270}  # the usage field wins when present
    assert parse_chat(body).usage.cached_tokens == 270


def test_parse_answer_and_batch_lines_keep_the_cached_tokens():
    assert parse_answer("chat", 200, chat_body(), {}).usage.cached_tokens == 1152
    assert parse_answer("responses", 200, responses_body(), {}).usage.cached_tokens == 1920
    line = {"id": "batch_req_1", "custom_id": "k1", "error": None,
            "response": {"status_code": 200, "request_id": "r1", "body": chat_body()}}
    key, out = parse_batch_line("chat", json.loads(json.dumps(line)))
    assert key == "k1" and out.usage.cached_tokens == 1152
    line["response"]["body"] = responses_body()
    assert parse_batch_line("responses", line)[1].usage.cached_tokens == 1920


@pytest.mark.timeout(600)
def test_the_local_llama_cpp_server_reports_the_prefix_it_reused():
    """Two rows with a long shared start on one slot: the second reuses it, and Usage counts it."""
    from inferframe.providers.local import LocalProvider
    from inferframe.providers.interface import Request
    from inferframe.providers.spec import ProviderSpec

    shared = "You are a careful classifier of customer reviews. " * 30

    async def go():
        provider = LocalProvider(ProviderSpec("local", options=(("parallel", 1),)))
        try:
            usages = []
            for q in ("The product was great.", "Terrible, broke after a day."):
                body = {"model": "gemma-3-270m", "max_tokens": 2, "temperature": 0,
                        "messages": [{"role": "system", "content": shared}, {"role": "user", "content": q}]}
                out = await provider.send(Request("chat", body))
                assert out.ok, out.message
                usages.append(out.usage)
            return usages
        finally:
            await provider.aclose()

    _, second = asyncio.run(go())
    assert second.input_tokens > 200
    # A slot kept the first prompt (llama.cpp picks the slot most alike): most of the second one's
    # input came from its cache, all but the differing question.
    assert second.input_tokens * 0.8 < second.cached_tokens < second.input_tokens
