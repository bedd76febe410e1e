"""Run requests through the OpenAI Batch API: half the price, answers within 24 hours.

JSONL with one line per request (custom_id = the request's cache key), split at
50,000 requests / 200 MB, uploaded through /v1/files, submitted to
/v1/batches, polled with backoff; output and error files are joined back on
custom_id (their order is not guaranteed). Failed or expired requests are
submitted again, up to ``rounds`` times. Every submitted batch is recorded in a
ledger next to the response cache, so a new process resumes polling it instead
of paying for it twice; every answer goes to the response cache as it is read.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from inferframe.runtime.cache import ResponseCache
from inferframe.runtime.types import RETRYABLE, Outcome

MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
_DONE = {"completed", "failed", "expired", "cancelled"}
_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "embeddings": "/v1/embeddings"}


def jsonl_lines(endpoint: str, items: list[tuple[str, dict]]) -> list[bytes]:
    return [json.dumps({"custom_id": k, "method": "POST", "url": _PATHS[endpoint], "body": b}).encode() + b"\n"
            for k, b in items]


def split(lines: list[bytes], max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> list[list[int]]:
    """Indexes of ``lines`` cut into chunks within the Batch API's limits."""
    chunks: list[list[int]] = [[]]
    size = 0
    for i, line in enumerate(lines):
        if chunks[-1] and (len(chunks[-1]) >= max_requests or size + len(line) > max_bytes):
            chunks.append([])
            size = 0
        chunks[-1].append(i)
        size += len(line)
    return [c for c in chunks if c]


class BatchRunner:
    """Submit, poll and collect batches for one provider.

    Parameters:
        provider: an OpenAI-compatible provider with the files/batches methods.
        ledger: the response cache whose database also records submitted batches.
        poll_interval: first wait between polls, doubled up to ``max_poll`` seconds.
        rounds: how many times failed or expired requests are submitted again.
        store_answers: also keep every answer in the response cache (off with cache="off"/"read_only").
    """

    def __init__(self, provider: Any, ledger: ResponseCache, *, poll_interval: float = 1.0, max_poll: float = 60.0,
                 rounds: int = 3, store_answers: bool = True) -> None:
        self.store_answers = store_answers
        self.provider = provider
        self.ledger = ledger
        self.poll_interval = poll_interval
        self.max_poll = max_poll
        self.rounds = rounds
        self.submitted = 0

    async def run(self, endpoint: str, items: list[tuple[str, dict]]) -> dict[str, Outcome]:
        """Answers for every (key, body); failures after the last round are returned as failed Outcomes."""
        pending = dict(items)
        results: dict[str, Outcome] = {}
        for _ in range(self.rounds):
            if not pending:
                break
            keys = list(pending)
            lines = jsonl_lines(endpoint, [(k, pending[k]) for k in keys])
            for chunk in split(lines):
                chunk_keys = [keys[i] for i in chunk]
                outcomes = await self._run_chunk(endpoint, chunk_keys, b"".join(lines[i] for i in chunk))
                for key in chunk_keys:
                    outcome = outcomes.get(key) or Outcome(error_kind="server", message="missing from the batch output")
                    results[key] = outcome
                    if outcome.ok or outcome.error_kind not in RETRYABLE:
                        pending.pop(key, None)
        return results

    async def _run_chunk(self, endpoint: str, keys: list[str], data: bytes) -> dict[str, Outcome]:
        chunk = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()
        batch_id = self.ledger.pending_batch(chunk)
        if batch_id is None:
            file_id = await self.provider.upload_batch_file(f"inferframe-{chunk[:12]}.jsonl", data)
            batch = await self.provider.create_batch(file_id, endpoint)
            batch_id = batch["id"]
            self.ledger.record_batch(batch_id, chunk, endpoint)  # before polling: a crash now resumes here
            self.submitted += 1
        batch = await self._wait(batch_id)
        outcomes: dict[str, Outcome] = {}
        for file_key in ("output_file_id", "error_file_id"):
            file_id = batch.get(file_key)
            if not file_id:
                continue
            for raw in (await self.provider.file_content(file_id)).splitlines():
                if not raw.strip():
                    continue
                line = json.loads(raw)
                outcome = self.provider.parse_batch_line(endpoint, line)
                outcomes[line["custom_id"]] = outcome
                if outcome.ok and self.store_answers:
                    usage = outcome.usage
                    self.ledger.put(line["custom_id"], outcome.value, usage.input_tokens if usage else 0,
                                    usage.output_tokens if usage else 0)
        if batch.get("status") == "failed" and not outcomes:
            errors = (batch.get("errors") or {}).get("data") or []
            msg = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors[:3]) or "the batch failed"
            outcomes = {k: Outcome(error_kind="bad_request", message=f"batch {batch_id} failed validation: {msg}")
                        for k in keys}
        self.ledger.batch_collected(batch_id)
        return outcomes

    async def _wait(self, batch_id: str) -> dict:
        delay = self.poll_interval
        while True:
            batch = await self.provider.get_batch(batch_id)
            if batch.get("status") in _DONE:
                return batch
            await asyncio.sleep(delay)
            delay = min(self.max_poll, delay * 2)
