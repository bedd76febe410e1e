"""OpenAI Files and Batch API (in memory), answering batch requests through :func:`pipeline.execute`.

Routes:
    POST   /v1/files                 multipart ``file`` + ``purpose`` -> FileObject (status 'processed')
    GET    /v1/files[?purpose&limit&after&order] -> list of FileObject
    GET    /v1/files/{id}            -> FileObject
    GET    /v1/files/{id}/content    -> the raw bytes
    DELETE /v1/files/{id}            -> {"id", "object": "file", "deleted": true}
    POST   /v1/batches               {input_file_id, endpoint, completion_window: '24h', metadata} -> Batch
    GET    /v1/batches[?limit&after] -> list of Batch (newest first)
    GET    /v1/batches/{id}          -> Batch
    POST   /v1/batches/{id}/cancel   -> Batch ('cancelling', then 'cancelled')
    GET    /_sim/batches             -> the batch controls and counters
    POST   /_sim/batches             {validate_s, process_s, expire_ids, expire_fraction, fail_custom_ids,
                                      max_requests, max_file_bytes} -> the new controls

Lifecycle (time driven, one asyncio task per batch): ``validating`` for ``validate_s`` seconds (bad
JSONL line, wrong url/method, duplicate custom_id, mixed models, > ``max_requests`` lines or a file
> ``max_file_bytes`` -> ``failed`` with ``errors.data[]``), then ``in_progress`` (requests answered
in file order, spread over at least ``process_s`` seconds), ``finalizing``, ``completed``.  A batch
whose id is in ``expire_ids`` (set while it validates) answers only ``expire_fraction`` of its
requests and ends ``expired``; the rest go to the error file with code ``batch_expired``.  Requests
whose custom_id is in ``fail_custom_ids``, or whose body the endpoint rejects, go to the error file
with their 4xx response.  Output lines are shuffled (OpenAI does not keep input order).

Counters (in ``/_sim/stats``): files_uploaded, batches_created, batch_requests (answered requests).

Example:
    >>> import json, time
    >>> line = {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions",
    ...         "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}}
    >>> import openai
    >>> from inferframe.simulator import Simulator
    >>> with Simulator() as sim:
    ...     client = openai.OpenAI(base_url=sim.base_url, api_key="x", max_retries=0)
    ...     f = client.files.create(file=("in.jsonl", json.dumps(line).encode()), purpose="batch")
    ...     b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    ...     while b.status not in ("completed", "failed", "expired", "cancelled"):
    ...         time.sleep(0.05)
    ...         b = client.batches.retrieve(b.id)
    ...     out = json.loads(client.files.content(b.output_file_id).text)
    >>> b.status, out["custom_id"], out["response"]["status_code"]
    ('completed', 'r1', 200)
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from ..errors import SimError, invalid_request
from ..jsonio import loads
from ..pipeline import check_auth, json_response, simple_handler
from .batch_worker import DEFAULTS, BatchStore, run_batch

__all__ = ["register", "DEFAULTS", "FILE_PURPOSES", "BATCH_ENDPOINTS"]

FILE_PURPOSES = ("assistants", "assistants_output", "batch", "batch_output", "fine-tune",
                 "fine-tune-results", "vision", "user_data", "evals")
BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings")
_TERMINAL = ("failed", "completed", "expired", "cancelled")
_COUNTERS = ("files_uploaded", "batches_created", "batch_requests")


def _not_found_file(fid: str) -> SimError:
    return SimError(404, f"No such File object: {fid}", "invalid_request_error", "id", None)


def _not_found_batch(bid: str) -> SimError:
    return SimError(404, f"No batch found with id '{bid}'.", "invalid_request_error", "id", None)


def _page(items: list[dict], request: web.Request, default_limit: int) -> dict:
    q = request.query
    try:
        limit = int(q.get("limit", default_limit))
    except ValueError:
        raise invalid_request("Invalid 'limit': expected an integer.", param="limit", code="invalid_type") from None
    if limit < 1:
        raise invalid_request("Invalid 'limit': must be >= 1.", param="limit", code="integer_below_min_value")
    after = q.get("after")
    if after:
        ids = [it["id"] for it in items]
        items = items[ids.index(after) + 1:] if after in ids else []
    data = items[:limit]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(items) > limit}



class _Api:
    """The route handlers of one simulator, over its store."""

    def __init__(self, state: Any, store: BatchStore) -> None:
        self.state = state
        self.store = store

    # -- files ---------------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> dict:
        if not request.content_type.startswith("multipart/"):
            raise invalid_request("Expected a multipart/form-data body with 'file' and 'purpose'.")
        form = await request.post()
        purpose = form.get("purpose")
        f = form.get("file")
        if purpose is None:
            raise invalid_request("Missing required parameter: 'purpose'.", param="purpose",
                                  code="missing_required_parameter")
        if not isinstance(purpose, str) or purpose not in FILE_PURPOSES:
            raise invalid_request(
                f"'{purpose}' is not one of {list(FILE_PURPOSES)} - 'purpose'", param="purpose",
                code="invalid_value")
        if f is None or isinstance(f, str):
            raise invalid_request("Missing required parameter: 'file'.", param="file",
                                  code="missing_required_parameter")
        data = f.file.read()
        self.state.stats.files_uploaded += 1
        return self.store.add_file(data, f.filename or "upload", purpose)

    def list_files(self, request: web.Request) -> dict:
        purpose = request.query.get("purpose")
        items = [f for f in self.store.files.values() if purpose is None or f["purpose"] == purpose]
        items.sort(key=lambda f: f["created_at"], reverse=request.query.get("order", "desc") != "asc")
        return _page(items, request, 10_000)

    def get_file(self, request: web.Request) -> dict:
        fid = request.match_info["file_id"]
        if fid not in self.store.files:
            raise _not_found_file(fid)
        return self.store.files[fid]

    def delete_file(self, request: web.Request) -> dict:
        fid = request.match_info["file_id"]
        if fid not in self.store.files:
            raise _not_found_file(fid)
        del self.store.files[fid]
        self.store.content.pop(fid, None)
        return {"id": fid, "object": "file", "deleted": True}

    async def file_content(self, request: web.Request) -> web.Response:
        fid = request.match_info["file_id"]
        self.state.stats.request("files")
        try:
            check_auth(self.state, request)
            if fid not in self.store.files:
                raise _not_found_file(fid)
        except SimError as e:
            self.state.stats.status(e.status)
            return web.Response(body=e.body(), status=e.status, content_type="application/json")
        self.state.stats.status(200)
        return web.Response(body=self.store.content[fid], content_type="application/octet-stream")

    # -- batches -------------------------------------------------------------------------------

    async def create_batch(self, request: web.Request) -> dict:
        try:
            body = loads(await request.read())
        except ValueError:
            raise invalid_request("We could not parse the JSON body of your request.") from None
        if not isinstance(body, dict):
            raise invalid_request("Invalid body: expected a JSON object.", code="invalid_type")
        for key in ("input_file_id", "endpoint", "completion_window"):
            if body.get(key) is None:
                raise invalid_request(f"Missing required parameter: '{key}'.", param=key,
                                      code="missing_required_parameter")
        endpoint = body["endpoint"]
        if endpoint not in BATCH_ENDPOINTS:
            raise invalid_request(
                f"Invalid value: '{endpoint}'. Supported values are: {', '.join(repr(e) for e in BATCH_ENDPOINTS)}.",
                param="endpoint", code="invalid_value")
        if body["completion_window"] != "24h":
            raise invalid_request(
                f"Invalid value: '{body['completion_window']}'. Supported values are: '24h'.",
                param="completion_window", code="invalid_value")
        metadata = body.get("metadata")
        if metadata is not None and (not isinstance(metadata, dict) or len(metadata) > 16):
            raise invalid_request("Invalid 'metadata': expected an object with at most 16 keys.",
                                  param="metadata", code="invalid_type")
        fid = body["input_file_id"]
        if fid not in self.store.files:
            raise SimError(404, f"No such File object: {fid}", "invalid_request_error", "input_file_id", None)
        if self.store.files[fid]["purpose"] != "batch":
            raise invalid_request(f"File {fid} has purpose '{self.store.files[fid]['purpose']}'; expected 'batch'.",
                                  param="input_file_id", code="invalid_file_purpose")
        now = int(time.time())
        bid = self.state.next_id("batch_")
        batch = {
            "id": bid, "object": "batch", "endpoint": endpoint, "errors": None, "input_file_id": fid,
            "completion_window": "24h", "status": "validating", "output_file_id": None, "error_file_id": None,
            "created_at": now, "in_progress_at": None, "expires_at": now + 86400, "finalizing_at": None,
            "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
            "cancelled_at": None, "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": metadata, "model": None,
        }
        self.store.batches[bid] = batch
        self.state.stats.batches_created += 1
        self.store.tasks[bid] = asyncio.get_running_loop().create_task(run_batch(self.store, bid))
        return dict(batch)

    def list_batches(self, request: web.Request) -> dict:
        items = sorted(self.store.batches.values(), key=lambda b: b["created_at"], reverse=True)
        return _page(items, request, 20)

    def get_batch(self, request: web.Request) -> dict:
        bid = request.match_info["batch_id"]
        if bid not in self.store.batches:
            raise _not_found_batch(bid)
        return self.store.batches[bid]

    def cancel_batch(self, request: web.Request) -> dict:
        bid = request.match_info["batch_id"]
        b = self.store.batches.get(bid)
        if b is None:
            raise _not_found_batch(bid)
        if b["status"] in _TERMINAL:
            raise SimError(409, f"Cannot cancel a batch with status '{b['status']}'.", "invalid_request_error",
                           None, None)
        if b["status"] != "cancelling":
            b["status"] = "cancelling"
            b["cancelling_at"] = int(time.time())
        return b

    # -- /_sim/batches -------------------------------------------------------------------------

    async def sim_get(self, request: web.Request) -> web.Response:
        return json_response(_sim_view(self.state, self.store))

    async def sim_post(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            changes = loads(raw) if raw else {}
            if not isinstance(changes, dict):
                raise ValueError("expected a JSON object")
            for k, v in changes.items():
                if k not in DEFAULTS:
                    raise ValueError(f"unknown batch setting {k!r}; known: {sorted(DEFAULTS)}")
                if isinstance(DEFAULTS[k], list):
                    if not isinstance(v, list):
                        raise ValueError(f"{k} must be a list")
                elif not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                    raise ValueError(f"{k} must be a non-negative number")
        except ValueError as exc:
            e = invalid_request(str(exc))
            return web.Response(body=e.body(), status=e.status, content_type="application/json")
        self.store.settings.update(changes)
        return json_response(_sim_view(self.state, self.store))


def register(app: web.Application, state: Any) -> None:
    """Add the /v1/files, /v1/batches and /_sim/batches routes."""
    store = BatchStore(state)
    state.files_batches = store
    _install_counters(state.stats)
    api = _Api(state, store)
    app.router.add_post("/v1/files", simple_handler(state, "files", api.upload))
    app.router.add_get("/v1/files", simple_handler(state, "files", api.list_files))
    app.router.add_get("/v1/files/{file_id}/content", api.file_content)
    app.router.add_get("/v1/files/{file_id}", simple_handler(state, "files", api.get_file))
    app.router.add_delete("/v1/files/{file_id}", simple_handler(state, "files", api.delete_file))
    app.router.add_post("/v1/batches", simple_handler(state, "batches", api.create_batch))
    app.router.add_get("/v1/batches", simple_handler(state, "batches", api.list_batches))
    app.router.add_get("/v1/batches/{batch_id}", simple_handler(state, "batches", api.get_batch))
    app.router.add_post("/v1/batches/{batch_id}/cancel", simple_handler(state, "batches", api.cancel_batch))
    app.router.add_get("/_sim/batches", api.sim_get)
    app.router.add_post("/_sim/batches", api.sim_post)



def _sim_view(state: Any, store: _Store) -> dict:
    st = state.stats
    return {"settings": dict(store.settings), "counters": {k: getattr(st, k, 0) for k in _COUNTERS},
            "files": len(store.files), "batches": len(store.batches)}


def _install_counters(stats: Any) -> None:
    """Add the files/batches counters to this Stats instance (zeroed by reset, shown by snapshot)."""
    if getattr(stats, "_fb_installed", False):
        return
    for k in _COUNTERS:
        setattr(stats, k, 0)
    orig_reset, orig_snapshot = stats.reset, stats.snapshot

    def reset() -> None:
        orig_reset()
        for k in _COUNTERS:
            setattr(stats, k, 0)

    def snapshot(include_hashes: bool = False) -> dict:
        out = orig_snapshot(include_hashes)
        for k in _COUNTERS:
            out[k] = getattr(stats, k, 0)
        return out

    stats.reset = reset
    stats.snapshot = snapshot
    stats._fb_installed = True
