"""Run requests through a provider's Batch API: half the price, answers within 24 hours.

The provider writes its own lines (custom id = the request's cache key) and files; this module
splits them within the provider's declared limits, submits, polls with backoff, joins the answers
back on their keys (their order is not guaranteed), and submits the failed or expired requests
again, up to ``rounds`` times. Every submitted batch is recorded in a ledger next to the response
cache, so a new process resumes polling it instead of paying for it twice; every answer goes to
the response cache as it is read.

Example:
    >>> split([b"a" * 10, b"b" * 10, b"c"], max_requests=2, max_bytes=100)
    [[0, 1], [2]]
"""

from __future__ import annotations

import hashlib

from inferframe.errors import ErrorKind
from inferframe.providers.interface import Outcome, Transport
from inferframe.runtime.cache import ResponseCache
from inferframe.runtime.clock import REAL, Clock


def split(lines: list[bytes], max_requests: int, max_bytes: int) -> list[list[int]]:
    """Indexes of ``lines`` cut into chunks within a Batch API's limits."""
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
        provider: a provider whose capabilities include ``batch_api``.
        ledger: the response cache whose database also records submitted batches.
        poll_interval: first wait between polls, doubled up to ``max_poll`` seconds.
        rounds: how many times failed or expired requests are submitted again.
        store_answers: also keep every answer in the response cache (off with cache="off"/"read_only").
        clock: where time comes from (a FakeClock in tests).
    """

    def __init__(self, provider: Transport, ledger: ResponseCache, *, poll_interval: float = 1.0, max_poll: float = 60.0,
                 rounds: int = 3, store_answers: bool = True, clock: Clock = REAL) -> None:
        self.store_answers = store_answers
        self.provider = provider
        self.ledger = ledger
        self.poll_interval = poll_interval
        self.max_poll = max_poll
        self.rounds = rounds
        self.clock = clock
        self.submitted = 0

    async def run(self, endpoint: str, items: list[tuple[str, dict]]) -> dict[str, Outcome]:
        """Answers for every (key, body); failures after the last round are returned as failed Outcomes."""
        caps = self.provider.capabilities
        pending = dict(items)
        results: dict[str, Outcome] = {}
        for _ in range(self.rounds):
            if not pending:
                break
            keys = list(pending)
            lines = self.provider.batch_lines(endpoint, [(k, pending[k]) for k in keys])
            for chunk in split(lines, caps.batch_max_requests, caps.batch_max_bytes):
                chunk_keys = [keys[i] for i in chunk]
                outcomes = await self._run_chunk(endpoint, chunk_keys, b"".join(lines[i] for i in chunk))
                for key in chunk_keys:
                    outcome = outcomes.get(key) or Outcome(error_kind=ErrorKind.SERVER, message="missing from the batch output")
                    results[key] = outcome
                    if outcome.ok or not outcome.error_kind.retryable:
                        pending.pop(key, None)
        return results

    async def _run_chunk(self, endpoint: str, keys: list[str], data: bytes) -> dict[str, Outcome]:
        chunk = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()
        batch_id = self.ledger.pending_batch(chunk)
        if batch_id is None:
            batch_id = await self.provider.submit_batch(endpoint, f"inferframe-{chunk[:12]}.jsonl", data)
            self.ledger.record_batch(batch_id, chunk, endpoint)  # before polling: a crash now resumes here
            self.submitted += 1
        state = await self._wait(batch_id)
        outcomes: dict[str, Outcome] = {}
        for key, outcome in await self.provider.batch_results(endpoint, state):
            outcomes[key] = outcome
            if outcome.ok and self.store_answers:
                usage = outcome.usage
                self.ledger.put(key, outcome.value, usage.input_tokens if usage else 0, usage.output_tokens if usage else 0,
                                outcome.finish_reason)
        if state.failure is not None and not outcomes:
            outcomes = {k: Outcome(error_kind=ErrorKind.BAD_REQUEST, message=f"batch {batch_id} failed validation: {state.failure}")
                        for k in keys}
        self.ledger.batch_collected(batch_id)
        return outcomes

    async def _wait(self, batch_id: str):
        delay = self.poll_interval
        while True:
            state = await self.provider.poll_batch(batch_id)
            if state.done:
                return state
            await self.clock.sleep(delay)
            delay = min(self.max_poll, delay * 2)
