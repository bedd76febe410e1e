"""Files and Batch API: official SDK round trips, lifecycle, expiry, cancel, validation failures."""

from __future__ import annotations

import json
import time

import openai
import pytest
from openai.types import Batch, BatchError, BatchRequestCounts, FileDeleted, FileObject
from openai.types.chat import ChatCompletion
from openai.types.create_embedding_response import CreateEmbeddingResponse

from .helpers import post


def _sim_batches(sim, **settings):
    status, _, body = post(sim.base_url.rstrip("/").removesuffix("/v1") + "/_sim/batches", settings)
    assert status == 200, body
    return body


def _jsonl(lines):
    return ("\n".join(json.dumps(x) for x in lines) + "\n").encode()


def _chat_lines(n, url="/v1/chat/completions"):
    return [{"custom_id": f"req-{i}", "method": "POST", "url": url,
             "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"hello {i}"}]}}
            for i in range(n)]


def _wait(client, bid, until=("completed", "failed", "expired", "cancelled"), timeout=5.0):
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        b = client.batches.retrieve(bid)
        if not seen or seen[-1] != b.status:
            seen.append(b.status)
        if b.status in until:
            return b, seen
        time.sleep(0.01)
    raise AssertionError(f"batch {bid} stuck in {seen}")


def _lines(client, fid):
    if fid is None:
        return []
    return [json.loads(x) for x in client.files.content(fid).text.splitlines() if x.strip()]


@pytest.fixture
def fast(sim):
    _sim_batches(sim, validate_s=0.05, process_s=0.1)
    return sim


def test_files_crud(fast, client):
    data = _jsonl(_chat_lines(2))
    f = client.files.create(file=("in.jsonl", data), purpose="batch")
    assert isinstance(f, FileObject)
    assert f.id.startswith("file-") and f.object == "file" and f.bytes == len(data)
    assert f.filename == "in.jsonl" and f.purpose == "batch" and f.status == "processed"
    assert client.files.retrieve(f.id).id == f.id
    assert client.files.content(f.id).content == data
    assert f.id in [x.id for x in client.files.list()]
    assert [x.id for x in client.files.list(purpose="batch_output")] == []
    d = client.files.delete(f.id)
    assert isinstance(d, FileDeleted) and d.deleted and d.id == f.id
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(f.id)
    with pytest.raises(openai.BadRequestError):
        client.files.create(file=("x.jsonl", b"{}"), purpose="nonsense")  # type: ignore[arg-type]


def test_chat_batch_completes(fast, client):
    reqs = _chat_lines(20)
    reqs[3]["body"]["model"] = "gpt-4o-mini"
    reqs[5]["body"] = {"model": "gpt-4o-mini", "messages": "not a list"}  # endpoint rejects this body
    f = client.files.create(file=("in.jsonl", _jsonl(reqs)), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h",
                              metadata={"job": "t1"})
    assert isinstance(b, Batch) and b.status == "validating" and b.id.startswith("batch_")
    assert b.metadata == {"job": "t1"} and b.expires_at == b.created_at + 86400
    b, seen = _wait(client, b.id)
    assert b.status == "completed", (b, seen)
    assert seen[0] == "validating" and seen[-1] == "completed"
    assert isinstance(b.request_counts, BatchRequestCounts)
    assert (b.request_counts.total, b.request_counts.completed, b.request_counts.failed) == (20, 19, 1)
    assert b.model == "gpt-4o-mini" and b.completed_at and b.in_progress_at and b.finalizing_at
    assert b.usage is not None and b.usage.input_tokens > 0 and b.usage.output_tokens > 0
    out, err = _lines(client, b.output_file_id), _lines(client, b.error_file_id)
    assert client.files.retrieve(b.output_file_id).purpose == "batch_output"
    ids = [x["custom_id"] for x in out + err]
    assert sorted(ids) == sorted(r["custom_id"] for r in reqs)  # each exactly once
    assert [x["custom_id"] for x in out] != sorted((x["custom_id"] for x in out), key=lambda c: int(c[4:]))
    for x in out:
        assert x["id"].startswith("batch_req_") and x["error"] is None
        assert x["response"]["status_code"] == 200 and x["response"]["request_id"]
        ChatCompletion.model_validate(x["response"]["body"])
    assert [x["custom_id"] for x in err] == ["req-5"]
    assert err[0]["response"]["status_code"] == 400 and "error" in err[0]["response"]["body"]
    _, _, snap = post(fast.base_url.rstrip("/").removesuffix("/v1") + "/_sim/stats", None, method="GET")
    assert snap["files_uploaded"] == 1 and snap["batches_created"] == 1 and snap["batch_requests"] == 20


def test_embeddings_batch_and_fail_ids(fast, client):
    _sim_batches(fast, fail_custom_ids=["e1"])
    reqs = [{"custom_id": f"e{i}", "method": "POST", "url": "/v1/embeddings",
             "body": {"model": "text-embedding-3-small", "input": f"text {i}"}} for i in range(4)]
    f = client.files.create(file=("e.jsonl", _jsonl(reqs)), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/embeddings", completion_window="24h")
    b, _ = _wait(client, b.id)
    assert b.status == "completed" and b.request_counts.failed == 1
    out, err = _lines(client, b.output_file_id), _lines(client, b.error_file_id)
    for x in out:
        CreateEmbeddingResponse.model_validate(x["response"]["body"])
    assert [x["custom_id"] for x in err] == ["e1"] and err[0]["response"]["status_code"] == 400


def test_expiry_splits_requests(sim, client):
    _sim_batches(sim, validate_s=0.3, process_s=0.05, expire_fraction=0.5)
    reqs = _chat_lines(10)
    f = client.files.create(file=("in.jsonl", _jsonl(reqs)), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    _sim_batches(sim, expire_ids=[b.id])
    b, _ = _wait(client, b.id)
    assert b.status == "expired" and b.expired_at
    out, err = _lines(client, b.output_file_id), _lines(client, b.error_file_id)
    assert len(out) == 5 and len(err) == 5
    assert sorted(x["custom_id"] for x in out + err) == sorted(r["custom_id"] for r in reqs)
    for x in err:
        assert x["response"] is None and x["error"]["code"] == "batch_expired"
    assert (b.request_counts.completed, b.request_counts.failed) == (5, 5)


def test_cancel(sim, client):
    _sim_batches(sim, validate_s=0.05, process_s=2.0)
    f = client.files.create(file=("in.jsonl", _jsonl(_chat_lines(40))), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    _wait(client, b.id, until=("in_progress",))
    c = client.batches.cancel(b.id)
    assert isinstance(c, Batch) and c.status == "cancelling" and c.cancelling_at
    b, _ = _wait(client, b.id)
    assert b.status == "cancelled" and b.cancelled_at
    out, err = _lines(client, b.output_file_id), _lines(client, b.error_file_id)
    assert len(out) + len(err) == 40 and len(err) > 0
    assert all(x["error"]["code"] == "batch_cancelled" for x in err)
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(b.id)


def test_validation_failures(fast, client):
    lines = _chat_lines(3)
    lines[1]["url"] = "/v1/embeddings"
    data = _jsonl(lines) + b"{not json\n"
    f = client.files.create(file=("bad.jsonl", data), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    b, _ = _wait(client, b.id)
    assert b.status == "failed" and b.failed_at and b.output_file_id is None
    assert all(isinstance(e, BatchError) for e in b.errors.data)
    assert {(e.code, e.line) for e in b.errors.data} == {("mismatched_endpoint", 2), ("invalid_json_line", 4)}

    _sim_batches(fast, max_requests=2)
    f = client.files.create(file=("big.jsonl", _jsonl(_chat_lines(3))), purpose="batch")
    b, _ = _wait(client, client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                               completion_window="24h").id)
    assert b.status == "failed" and [e.code for e in b.errors.data] == ["too_many_tasks"]

    _sim_batches(fast, max_requests=50_000, max_file_bytes=10)
    b, _ = _wait(client, client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                               completion_window="24h").id)
    assert b.status == "failed" and [e.code for e in b.errors.data] == ["file_too_large"]

    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.BadRequestError):
        client.batches.create(input_file_id=f.id, endpoint="/v1/completions", completion_window="24h")
    ids = [x.id for x in client.batches.list()]
    assert len(ids) == 3 and all(isinstance(x, Batch) for x in client.batches.list())
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")
