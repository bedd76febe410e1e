"""The simulated Batch API's worker: holds the in-memory files and batches, validates a batch's input
file, answers its requests in file order through :func:`pipeline.execute` spread over the configured
time, and writes the shuffled output and error files."""

from __future__ import annotations

import asyncio
import random
import time
from types import MappingProxyType
from typing import Any, Optional

from ..jsonio import dumps, loads
from ..pipeline import execute

__all__ = ["BatchStore", "DEFAULTS", "run_batch", "validate"]

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


class BatchStore:
    """One simulator's files, file contents, batches and their running tasks, and the batch controls."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.files: dict[str, dict] = {}
        self.content: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.settings: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULTS.items()}

    def add_file(self, data: bytes, filename: str, purpose: str) -> dict:
        fid = self.state.next_id("file-")
        obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
               "filename": filename, "purpose": purpose, "status": "processed", "expires_at": None,
               "status_details": None}
        self.files[fid] = obj
        self.content[fid] = data
        return obj


def _error(code: str, line: Optional[int], param: Optional[str], message: str) -> dict:
    return {"code": code, "line": line, "param": param, "message": message}


def _line_errors(item: Any, no: int, batch: dict, seen: set) -> list[dict]:
    """The errors for one parsed input line (none when it is a good request); the model check is the caller's."""
    if not isinstance(item, dict):
        return [_error("invalid_json_line", no, None, "Each line must be a JSON object.")]
    missing = [_error("missing_required_parameter", no, key, f"Missing required parameter: '{key}'.")
               for key in ("custom_id", "method", "url", "body") if key not in item]
    if missing:
        return missing
    if item["method"] != "POST":
        return [_error("invalid_method", no, "method", f"Invalid method '{item['method']}'; only POST is supported.")]
    if item["url"] != batch["endpoint"]:
        return [_error("mismatched_endpoint", no, "url",
                       f"The url '{item['url']}' does not match the batch endpoint '{batch['endpoint']}'.")]
    if not isinstance(item["body"], dict):
        return [_error("invalid_request", no, "body", "The request body must be a JSON object.")]
    if item["custom_id"] in seen:
        return [_error("duplicate_custom_id", no, "custom_id",
                       f"The custom_id '{item['custom_id']}' is not unique within the batch.")]
    return []


def _file_errors(store: BatchStore, batch: dict, data: Optional[bytes]) -> list[dict]:
    if data is None:
        return [_error("file_not_found", None, None, f"Input file {batch['input_file_id']} was deleted.")]
    limit = store.settings["max_file_bytes"]
    if len(data) > limit:
        return [_error("file_too_large", None, None,
                       f"The input file is {len(data)} bytes; the maximum is {limit} bytes.")]
    return []


def validate(store: BatchStore, batch: dict) -> tuple[list[dict], list[dict], Optional[str]]:
    """(requests, errors, model) for the batch's input file."""
    data = store.content.get(batch["input_file_id"])
    errs = _file_errors(store, batch, data)
    if errs:
        return [], errs, None
    reqs: list[dict] = []
    seen: set = set()
    model = None
    for no, ln in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not ln.strip():
            continue
        try:
            item = loads(ln)
        except ValueError:
            errs.append(_error("invalid_json_line", no, None, "This line is not parseable as valid JSON."))
            continue
        line_errs = _line_errors(item, no, batch, seen)
        if line_errs:
            errs.extend(line_errs)
            continue
        seen.add(item["custom_id"])
        m = item["body"].get("model")
        if model is None:
            model = m
        elif m != model:
            errs.append(_error("mismatched_model", no, "body.model",
                               f"The model '{m}' does not match the batch's model '{model}'; a batch "
                               "may only use one model."))
            continue
        reqs.append(item)
    if not reqs and not errs:
        errs.append(_error("empty_file", None, None, "The batch input file is empty."))
    if len(reqs) > store.settings["max_requests"]:
        errs.append(_error("too_many_tasks", None, None, f"The batch has {len(reqs)} requests; the maximum is "
                                                         f"{store.settings['max_requests']}."))
    return reqs, errs, model


def _finish(store: BatchStore, batch: dict, ok: list, bad: list, usage: dict, status: str) -> None:
    now = int(time.time())
    rng = random.Random(batch["id"])
    rng.shuffle(ok)
    rng.shuffle(bad)
    stem = batch["id"]
    if ok:
        batch["output_file_id"] = store.add_file(b"".join(dumps(x) + b"\n" for x in ok),
                                                 f"{stem}_output.jsonl", "batch_output")["id"]
    if bad:
        batch["error_file_id"] = store.add_file(b"".join(dumps(x) + b"\n" for x in bad),
                                                f"{stem}_error.jsonl", "batch_output")["id"]
    batch["usage"] = {
        "input_tokens": usage["in"], "output_tokens": usage["out"], "total_tokens": usage["in"] + usage["out"],
        "input_tokens_details": {"cached_tokens": usage["cached"]},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    batch["status"] = status
    batch[{"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[status]] = now


async def run_batch(store: BatchStore, bid: str) -> None:
    """Take batch ``bid`` through its lifecycle; a simulator bug fails the batch rather than leaving it hanging."""
    batch = store.batches[bid]
    try:
        await _run(store, batch)
    except Exception as exc:  # never leave a batch hanging on a simulator bug
        batch["status"] = "failed"
        batch["failed_at"] = int(time.time())
        batch["errors"] = {"object": "list", "data": [
            _error("server_error", None, None, f"{type(exc).__name__}: {exc}")]}
    finally:
        store.tasks.pop(bid, None)


def _unanswered(store: BatchStore, rest: list[dict], ended: str) -> list[dict]:
    code = "batch_cancelled" if ended == "cancelled" else "batch_expired"
    msg = ("This request was not executed because the batch was cancelled." if ended == "cancelled"
           else "This request could not be executed before the completion window expired.")
    return [{"id": store.state.next_id("batch_req_"), "custom_id": item["custom_id"],
             "response": None, "error": {"code": code, "message": msg}} for item in rest]


async def _answer(store: BatchStore, batch: dict, item: dict, fail_ids: set) -> tuple[int, dict, dict]:
    """(status, output line, response body) for one request."""
    state = store.state
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
    return status, line, out


def _add_usage(usage: dict, out: dict) -> None:
    u = out.get("usage") or {}
    usage["in"] += int(u.get("prompt_tokens", u.get("input_tokens", 0)) or 0)
    usage["out"] += int(u.get("completion_tokens", u.get("output_tokens", 0)) or 0)
    details = u.get("prompt_tokens_details") or u.get("input_tokens_details") or {}
    usage["cached"] += int(details.get("cached_tokens", 0) or 0)


async def _validated(store: BatchStore, batch: dict) -> Optional[list[dict]]:
    """The batch's requests after the validating phase, or None when it was cancelled or failed."""
    await asyncio.sleep(float(store.settings["validate_s"]))
    if batch["status"] == "cancelling":
        batch["status"] = "cancelled"
        batch["cancelled_at"] = int(time.time())
        return None
    reqs, errs, model = validate(store, batch)
    batch["model"] = model
    if errs:
        batch["status"] = "failed"
        batch["failed_at"] = int(time.time())
        batch["errors"] = {"object": "list", "data": errs}
        return None
    return reqs


async def _run(store: BatchStore, batch: dict) -> None:
    s = store.settings
    reqs = await _validated(store, batch)
    if reqs is None:
        return
    total = len(reqs)
    counts = {"total": total, "completed": 0, "failed": 0}
    batch["request_counts"] = counts
    batch["status"] = "in_progress"
    batch["in_progress_at"] = int(time.time())
    stop_at = int(total * float(s["expire_fraction"])) if batch["id"] in s["expire_ids"] else total
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
            bad.extend(_unanswered(store, reqs[i:], ended))
            counts["failed"] += total - i
            break
        status, line, out = await _answer(store, batch, item, fail_ids)
        if status == 200:
            _add_usage(usage, out)
            ok.append(line)
            counts["completed"] += 1
        else:
            bad.append(line)
            counts["failed"] += 1
        # Spread the answers over process_s so callers can watch the batch in progress.
        await asyncio.sleep(max(0.0, t0 + per * (i + 1) - time.monotonic()))
    if ended == "completed":
        batch["status"] = "finalizing"
        batch["finalizing_at"] = int(time.time())
        await asyncio.sleep(min(0.05, float(s["process_s"]) / 10))
        if batch["status"] == "cancelling":  # too late to cancel: finish anyway, as cancelled
            ended = "cancelled"
    _finish(store, batch, ok, bad, usage, ended)
