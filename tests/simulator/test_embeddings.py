"""POST /v1/embeddings: shape, determinism, unit norm, dims, base64, similarity."""

from __future__ import annotations

import base64
import math
import struct

import openai
import pytest
from openai.types import CreateEmbeddingResponse

from .helpers import assert_error_shape, assert_strict, post


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_sdk_embeddings_default_dims_and_norm(client):
    r = client.embeddings.create(model="text-embedding-3-small", input=["hello world", "second"])
    assert isinstance(r, CreateEmbeddingResponse)
    assert r.object == "list" and r.model == "text-embedding-3-small"
    assert [d.index for d in r.data] == [0, 1] and all(d.object == "embedding" for d in r.data)
    for d in r.data:
        assert len(d.embedding) == 1536
        assert abs(math.sqrt(sum(x * x for x in d.embedding)) - 1) < 1e-4
    assert r.usage.prompt_tokens == r.usage.total_tokens > 0
    large = client.embeddings.create(model="text-embedding-3-large", input="hello world")
    assert len(large.data[0].embedding) == 3072


def test_deterministic_and_distinct(client):
    a = client.embeddings.create(model="text-embedding-3-small", input="the same text").data[0].embedding
    b = client.embeddings.create(model="text-embedding-3-small", input="the same text").data[0].embedding
    c = client.embeddings.create(model="text-embedding-3-small", input="other words").data[0].embedding
    assert a == b
    assert a != c


def test_shared_words_are_more_similar(client):
    texts = ["the cat sat on the mat", "the cat sat on a mat", "quantum chromodynamics lecture notes"]
    v = [d.embedding for d in client.embeddings.create(model="text-embedding-3-small", input=texts).data]
    assert _cos(v[0], v[1]) > _cos(v[0], v[2]) + 0.3


def test_dimensions_param_is_renormalised_prefix(client):
    full = client.embeddings.create(model="text-embedding-3-small", input="abc def").data[0].embedding
    short = client.embeddings.create(model="text-embedding-3-small", input="abc def", dimensions=256).data[0].embedding
    assert len(short) == 256
    assert abs(math.sqrt(sum(x * x for x in short)) - 1) < 1e-4
    n = math.sqrt(sum(x * x for x in full[:256]))
    assert all(abs(s - f / n) < 1e-5 for s, f in zip(short, full[:256]))


def test_float_and_base64_agree(sim):
    url = sim.base_url + "/embeddings"
    _, _, f = post(url, {"model": "text-embedding-3-small", "input": "xyz", "encoding_format": "float"})
    _, _, b = post(url, {"model": "text-embedding-3-small", "input": "xyz", "encoding_format": "base64"})
    assert_strict(CreateEmbeddingResponse, f)
    raw = base64.b64decode(b["data"][0]["embedding"])
    vec = struct.unpack(f"<{len(raw) // 4}f", raw)
    assert len(vec) == 1536
    assert all(abs(x - y) < 1e-6 for x, y in zip(vec, f["data"][0]["embedding"]))
    assert set(f) == {"object", "data", "model", "usage"}
    assert set(f["data"][0]) == {"object", "index", "embedding"}


def test_token_array_inputs(client):
    r = client.embeddings.create(model="text-embedding-3-small", input=[[1, 2, 3], [4, 5]])
    assert len(r.data) == 2 and r.usage.prompt_tokens == 5
    one = client.embeddings.create(model="text-embedding-3-small", input=[1, 2, 3])
    assert one.data[0].embedding == r.data[0].embedding


@pytest.mark.parametrize(
    "body,status",
    [
        ({"model": "text-embedding-3-small", "input": ""}, 400),
        ({"model": "text-embedding-3-small", "input": []}, 400),
        ({"model": "text-embedding-3-small", "input": [1.5]}, 400),
        ({"model": "text-embedding-ada-002", "input": "x", "dimensions": 8}, 400),
        ({"model": "text-embedding-3-small", "input": "x", "dimensions": 5000}, 400),
        ({"model": "text-embedding-3-small", "input": "x", "encoding_format": "int8"}, 400),
        ({"model": "text-embedding-3-small"}, 400),
        ({"model": "gpt-4o-mini", "input": "x"}, 400),
        ({"model": "text-embedding-9", "input": "x"}, 404),
    ],
)
def test_invalid_embedding_requests(sim, body, status):
    got, _, resp = post(sim.base_url + "/embeddings", body)
    assert got == status
    assert_error_shape(resp, "invalid_request_error")


def test_sdk_error_for_bad_dimensions(client):
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="text-embedding-ada-002", input="x", dimensions=8)
