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
import random
import time
from types import MappingProxyType
from typing import Any, Optional

from aiohttp import web

from ..errors import SimError, invalid_request
from ..jsonio import dumps, loads
from ..pipeline import check_auth, execute, json_response, simple_handler

__all__ = ["register", "DEFAULTS", "FILE_PURPOSES", "BATCH_ENDPOINTS"]

#: Module-level defaults for the /_sim/batches controls (copied into each simulator at register time).
DEFAULTS: MappingProxyType[str, Any] = MappingProxyType({
    "validate_s": 0.05,
    "process_s": 0.1,
    "expire_ids": [],
    "expire_fraction": 0.5,
    "fail_custom_ids": [],
    "max_requests": 50_000,
    "max_file_bytes": 200 * 1024 * 1024,
})

FILE_PURPOSES = ("assistants", "assistants_output", "batch", "batch_output", "fine-tune",
                 "fine-tune-results", "vision", "user_data", "evals")
BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings")
_TERMINAL = ("failed", "completed", "expired", "cancelled")
_COUNTERS = ("files_uploaded", "batches_created", "batch_requests")


class _Store:
    def __init__(self) -> None:
        self.files: dict[str, dict] = {}
        self.content: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.settings: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULTS.items()}


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


def register(app: web.Application, state: Any) -> None:
    """Add the /v1/files, /v1/batches and /_sim/batches routes."""
    store = _Store()
    state.files_batches = store
    _install_counters(state.stats)

    def add_file(data: bytes, filename: str, purpose: str) -> dict:
        fid = state.next_id("file-")
        obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
               "filename": filename, "purpose": purpose, "status": "processed", "expires_at": None,
               "status_details": None}
        store.files[fid] = obj
        store.content[fid] = data
        return obj

    # -- files ---------------------------------------------------------------------------------

    async def upload(request: web.Request) -> dict:
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
        state.stats.files_uploaded += 1
        return add_file(data, f.filename or "upload", purpose)

    def list_files(request: web.Request) -> dict:
        purpose = request.query.get("purpose")
        items = [f for f in store.files.values() if purpose is None or f["purpose"] == purpose]
        items.sort(key=lambda f: f["created_at"], reverse=request.query.get("order", "desc") != "asc")
        return _page(items, request, 10_000)

    def get_file(request: web.Request) -> dict:
        fid = request.match_info["file_id"]
        if fid not in store.files:
            raise _not_found_file(fid)
        return store.files[fid]

    def delete_file(request: web.Request) -> dict:
        fid = request.match_info["file_id"]
        if fid not in store.files:
            raise _not_found_file(fid)
        del store.files[fid]
        store.content.pop(fid, None)
        return {"id": fid, "object": "file", "deleted": True}

    async def file_content(request: web.Request) -> web.Response:
        fid = request.match_info["file_id"]
        state.stats.request("files")
        try:
            check_auth(state, request)
            if fid not in store.files:
                raise _not_found_file(fid)
        except SimError as e:
            state.stats.status(e.status)
            return web.Response(body=e.body(), status=e.status, content_type="application/json")
        state.stats.status(200)
        return web.Response(body=store.content[fid], content_type="application/octet-stream")

    # -- batches -------------------------------------------------------------------------------

    async def create_batch(request: web.Request) -> dict:
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
        if fid not in store.files:
            raise SimError(404, f"No such File object: {fid}", "invalid_request_error", "input_file_id", None)
        if store.files[fid]["purpose"] != "batch":
            raise invalid_request(f"File {fid} has purpose '{store.files[fid]['purpose']}'; expected 'batch'.",
                                  param="input_file_id", code="invalid_file_purpose")
        now = int(time.time())
        bid = state.next_id("batch_")
        batch = {
            "id": bid, "object": "batch", "endpoint": endpoint, "errors": None, "input_file_id": fid,
            "completion_window": "24h", "status": "validating", "output_file_id": None, "error_file_id": None,
            "created_at": now, "in_progress_at": None, "expires_at": now + 86400, "finalizing_at": None,
            "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
            "cancelled_at": None, "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": metadata, "model": None,
        }
        store.batches[bid] = batch
        state.stats.batches_created += 1
        store.tasks[bid] = asyncio.get_running_loop().create_task(_run(bid))
        return dict(batch)

    def list_batches(request: web.Request) -> dict:
        items = sorted(store.batches.values(), key=lambda b: b["created_at"], reverse=True)
        return _page(items, request, 20)

    def get_batch(request: web.Request) -> dict:
        bid = request.match_info["batch_id"]
        if bid not in store.batches:
            raise _not_found_batch(bid)
        return store.batches[bid]

    def cancel_batch(request: web.Request) -> dict:
        bid = request.match_info["batch_id"]
        b = store.batches.get(bid)
        if b is None:
            raise _not_found_batch(bid)
        if b["status"] in _TERMINAL:
            raise SimError(409, f"Cannot cancel a batch with status '{b['status']}'.", "invalid_request_error",
                           None, None)
        if b["status"] != "cancelling":
            b["status"] = "cancelling"
            b["cancelling_at"] = int(time.time())
        return b

    # -- the batch worker ----------------------------------------------------------------------

    def validate(batch: dict) -> tuple[list[dict], list[dict], Optional[str]]:
        """(requests, errors, model) for the batch's input file."""
        s = store.settings
        data = store.content.get(batch["input_file_id"])
        errs: list[dict] = []
        if data is None:
            return [], [{"code": "file_not_found", "line": None, "param": None,
                         "message": f"Input file {batch['input_file_id']} was deleted."}], None
        if len(data) > s["max_file_bytes"]:
            return [], [{"code": "file_too_large", "line": None, "param": None,
                         "message": f"The input file is {len(data)} bytes; the maximum is "
                                    f"{s['max_file_bytes']} bytes."}], None
        lines = [ln for ln in data.decode("utf-8", "replace").splitlines()]
        reqs: list[dict] = []
        seen: set = set()
        model = None
        for no, ln in enumerate(lines, 1):
            if not ln.strip():
                continue
            try:
                item = loads(ln)
            except ValueError:
                errs.append({"code": "invalid_json_line", "line": no, "param": None,
                             "message": "This line is not parseable as valid JSON."})
                continue
            if not isinstance(item, dict):
                errs.append({"code": "invalid_json_line", "line": no, "param": None,
                             "message": "Each line must be a JSON object."})
                continue
            bad = False
            for key in ("custom_id", "method", "url", "body"):
                if key not in item:
                    errs.append({"code": "missing_required_parameter", "line": no, "param": key,
                                 "message": f"Missing required parameter: '{key}'."})
                    bad = True
            if bad:
                continue
            if item["method"] != "POST":
                errs.append({"code": "invalid_method", "line": no, "param": "method",
                             "message": f"Invalid method '{item['method']}'; only POST is supported."})
                continue
            if item["url"] != batch["endpoint"]:
                errs.append({"code": "mismatched_endpoint", "line": no, "param": "url",
                             "message": f"The url '{item['url']}' does not match the batch endpoint "
                                        f"'{batch['endpoint']}'."})
                continue
            if not isinstance(item["body"], dict):
                errs.append({"code": "invalid_request", "line": no, "param": "body",
                             "message": "The request body must be a JSON object."})
                continue
            cid = item["custom_id"]
            if cid in seen:
                errs.append({"code": "duplicate_custom_id", "line": no, "param": "custom_id",
                             "message": f"The custom_id '{cid}' is not unique within the batch."})
                continue
            seen.add(cid)
            m = item["body"].get("model")
            if model is None:
                model = m
            elif m != model:
                errs.append({"code": "mismatched_model", "line": no, "param": "body.model",
                             "message": f"The model '{m}' does not match the batch's model '{model}'; a batch "
                                        "may only use one model."})
                continue
            reqs.append(item)
        if not reqs and not errs:
            errs.append({"code": "empty_file", "line": None, "param": None,
                         "message": "The batch input file is empty."})
        if len(reqs) > s["max_requests"]:
            errs.append({"code": "too_many_tasks", "line": None, "param": None,
                         "message": f"The batch has {len(reqs)} requests; the maximum is {s['max_requests']}."})
        return reqs, errs, model

    def finish(batch: dict, ok: list, bad: list, usage: dict, status: str) -> None:
        now = int(time.time())
        rng = random.Random(batch["id"])
        rng.shuffle(ok)
        rng.shuffle(bad)
        stem = batch["id"]
        if ok:
            batch["output_file_id"] = add_file(b"".join(dumps(x) + b"\n" for x in ok),
                                               f"{stem}_output.jsonl", "batch_output")["id"]
        if bad:
            batch["error_file_id"] = add_file(b"".join(dumps(x) + b"\n" for x in bad),
                                              f"{stem}_error.jsonl", "batch_output")["id"]
        batch["usage"] = {
            "input_tokens": usage["in"], "output_tokens": usage["out"], "total_tokens": usage["in"] + usage["out"],
            "input_tokens_details": {"cached_tokens": usage["cached"]},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        batch["status"] = status
        batch[{"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[status]] = now

    async def _run(bid: str) -> None:
        batch = store.batches[bid]
        try:
            await _run_inner(batch)
        except Exception as exc:  # never leave a batch hanging on a simulator bug
            batch["status"] = "failed"
            batch["failed_at"] = int(time.time())
            batch["errors"] = {"object": "list", "data": [
                {"code": "server_error", "line": None, "param": None, "message": f"{type(exc).__name__}: {exc}"}]}
        finally:
            store.tasks.pop(bid, None)

    async def _run_inner(batch: dict) -> None:
        s = store.settings
        await asyncio.sleep(float(s["validate_s"]))
        if batch["status"] == "cancelling":
            batch["status"] = "cancelled"
            batch["cancelled_at"] = int(time.time())
            return
        reqs, errs, model = validate(batch)
        batch["model"] = model
        if errs:
            batch["status"] = "failed"
            batch["failed_at"] = int(time.time())
            batch["errors"] = {"object": "list", "data": errs}
            return
        total = len(reqs)
        counts = {"total": total, "completed": 0, "failed": 0}
        batch["request_counts"] = counts
        batch["status"] = "in_progress"
        batch["in_progress_at"] = int(time.time())
        expire = batch["id"] in s["expire_ids"]
        stop_at = int(total * float(s["expire_fraction"])) if expire else total
        fail_ids = set(s["fail_custom_ids"])
        per = float(s["process_s"]) / max(1, total)
        ok: list[dict] = []
        bad: list[dict] = []
        usage = {"in": 0, "out": 0, "cached": 0}
        t0 = time.monotonic()
        ended = "completed"
        for i, item in enumerate(reqs):
            if batch["status"] == "cancelling" or i >= stop_at:
                ended = "cancelled" if batch["status"] == "cancelling" else "expired"
                code = "batch_cancelled" if ended == "cancelled" else "batch_expired"
                msg = ("This request was not executed because the batch was cancelled." if ended == "cancelled"
                       else "This request could not be executed before the completion window expired.")
                for rest in reqs[i:]:
                    bad.append({"id": state.next_id("batch_req_"), "custom_id": rest["custom_id"],
                                "response": None, "error": {"code": code, "message": msg}})
                counts["failed"] += total - i
                break
            cid = item["custom_id"]
            if cid in fail_ids:
                status, out = 400, {"error": {"message": f"Simulated failure for custom_id '{cid}' (fail_custom_ids).",
                                              "type": "invalid_request_error", "param": None, "code": None}}
            else:
                status, out = await execute(state, batch["endpoint"], item["body"])
            line = {"id": state.next_id("batch_req_"), "custom_id": cid,
                    "response": {"status_code": status, "request_id": state.next_id("req_"), "body": out},
                    "error": None}
            state.stats.batch_requests += 1
            if status == 200:
                u = out.get("usage") or {}
                usage["in"] += int(u.get("prompt_tokens", u.get("input_tokens", 0)) or 0)
                usage["out"] += int(u.get("completion_tokens", u.get("output_tokens", 0)) or 0)
                details = u.get("prompt_tokens_details") or u.get("input_tokens_details") or {}
                usage["cached"] += int(details.get("cached_tokens", 0) or 0)
                ok.append(line)
                counts["completed"] += 1
            else:
                bad.append(line)
                counts["failed"] += 1
            wait = t0 + per * (i + 1) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            else:
                await asyncio.sleep(0)
        if ended == "completed":
            batch["status"] = "finalizing"
            batch["finalizing_at"] = int(time.time())
            await asyncio.sleep(min(0.05, float(s["process_s"]) / 10))
            if batch["status"] == "cancelling":  # too late to cancel: finish anyway, as cancelled
                ended = "cancelled"
        finish(batch, ok, bad, usage, ended)

    # -- /_sim/batches -------------------------------------------------------------------------

    async def sim_get(request: web.Request) -> web.Response:
        return json_response(_sim_view(state, store))

    async def sim_post(request: web.Request) -> web.Response:
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
        store.settings.update(changes)
        return json_response(_sim_view(state, store))

    app.router.add_post("/v1/files", simple_handler(state, "files", upload))
    app.router.add_get("/v1/files", simple_handler(state, "files", list_files))
    app.router.add_get("/v1/files/{file_id}/content", file_content)
    app.router.add_get("/v1/files/{file_id}", simple_handler(state, "files", get_file))
    app.router.add_delete("/v1/files/{file_id}", simple_handler(state, "files", delete_file))
    app.router.add_post("/v1/batches", simple_handler(state, "batches", create_batch))
    app.router.add_get("/v1/batches", simple_handler(state, "batches", list_batches))
    app.router.add_get("/v1/batches/{batch_id}", simple_handler(state, "batches", get_batch))
    app.router.add_post("/v1/batches/{batch_id}/cancel", simple_handler(state, "batches", cancel_batch))
    app.router.add_get("/_sim/batches", sim_get)
    app.router.add_post("/_sim/batches", sim_post)


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
