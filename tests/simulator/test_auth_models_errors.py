"""API key checks, model listing, unknown models and URLs, error classes in the SDK."""

from __future__ import annotations

import openai
import pytest
from openai.types import Model

from .helpers import assert_error_shape, assert_strict, chat_body, make_sim, post, sdk


def test_api_key_required():
    with make_sim(require_api_key="sk-secret") as sim:
        with pytest.raises(openai.AuthenticationError) as ei:
            sdk(sim, api_key="wrong-key-123456").chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]
            )
        assert ei.value.status_code == 401 and ei.value.code == "invalid_api_key"
        status, _, body = post(sim.base_url + "/chat/completions", chat_body(), headers={"Authorization": None})
        assert status == 401
        assert "didn't provide an API key" in assert_error_shape(body, "invalid_request_error", "invalid_api_key")["message"]
        ok = sdk(sim, api_key="sk-secret").chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]
        )
        assert ok.choices[0].message.content == "sim answer: x"
        assert post(sim.base_url + "/models", None, method="GET")[0] == 401
        assert sim.stats()["by_status"]["401"] == 3


def test_models_list_and_get(client, sim):
    models = list(client.models.list())
    assert all(isinstance(m, Model) and m.object == "model" for m in models)
    ids = [m.id for m in models]
    assert "gpt-4o-mini" in ids and "text-embedding-3-small" in ids
    status, _, body = post(sim.base_url + "/models", None, method="GET")
    assert status == 200 and body["object"] == "list" and set(body) == {"object", "data"}
    for m in body["data"]:
        assert_strict(Model, m)
    assert client.models.retrieve("gpt-4o").id == "gpt-4o"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nope")


def test_unknown_model_404(client):
    with pytest.raises(openai.NotFoundError) as ei:
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    assert ei.value.code == "model_not_found"
    assert "gpt-9" in ei.value.message


def test_embedding_model_on_chat_404(sim):
    status, _, body = post(sim.base_url + "/chat/completions", dict(chat_body(), model="text-embedding-3-small"))
    assert status == 404
    assert "not a chat model" in assert_error_shape(body, "invalid_request_error")["message"]


def test_allow_unknown_models():
    with make_sim(allow_unknown_models=True) as sim:
        r = sdk(sim).chat.completions.create(model="my-local-llm", messages=[{"role": "user", "content": "x"}])
        assert r.model == "my-local-llm"


def test_invalid_url(sim):
    status, _, body = post(sim.base_url + "/nothing/here", {})
    assert status == 404
    assert assert_error_shape(body, "invalid_request_error")["message"] == "Invalid URL (POST /v1/nothing/here)"
    status, _, body = post(sim.base_url + "/chat/completions", None, method="GET")
    assert status == 404 and "Invalid URL (GET /v1/chat/completions)" in body["error"]["message"]


@pytest.mark.parametrize(
    "status,exc",
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (403, openai.PermissionDeniedError),
        (404, openai.NotFoundError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
def test_fail_rule_statuses_map_to_sdk_errors(sim, client, status, exc):
    sim.configure(fail_rules=[{"match": "ROW7", "status": status}])
    with pytest.raises(exc) as ei:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "ROW7 text"}])
    assert ei.value.status_code == status
    assert isinstance(ei.value.body, dict) and {"message", "type", "param", "code"} <= set(ei.value.body)
    ok = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "ROW8 text"}])
    assert ok.choices[0].finish_reason == "stop"
    assert sim.stats()["rule_hits"] == 1
