"""Run requests through admission, the provider and the retry policy, one row at a time.

Per request: (cache seam) -> rate limiter -> adaptive concurrency -> provider
-> retry policy -> result. Failures of one row become data; failures of the
service trip the breaker and stop the job with one message.

A batch of rows (``send_many``) costs no task per row: a fixed pool of sender tasks sends them
(``runtime.senders``, a mixin of the runtime).

A failed attempt is either the service's limit, the service's trouble or the row's: each
signal has its own reaction (``_react``), so a few bad answers cost their rows a retry, not
the job its throughput (issue 15: 10% of bad answers cost 80% when every 429 paused everyone
and every 429 or timeout cut the in-flight bound).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import random
from typing import Any

from inferframe.errors import RowFailed, ServiceError
from inferframe.observe.stats import RunStats
from inferframe.providers.interface import Outcome, Request, Transport, Usage, routed
from inferframe.runtime.batch import BatchRunner
from inferframe.runtime.budget import Budget
from inferframe.runtime.cache import CacheReader, cache_key, cache_keys, open_cache
from inferframe.runtime.clock import REAL, Clock
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.coordinator import SharedLimits
from inferframe.runtime.outcomes import AttemptOutcomes
from inferframe.runtime.scheduler import PrefixScheduler
from inferframe.runtime.senders import FIRST_SENDERS, LaneHold, SenderPool, SendRow
from inferframe.runtime.types import Result

__all__ = ["InferenceRuntime", "RowFailed", "RuntimeConfig", "ServiceError"]


class InferenceRuntime(AttemptOutcomes, SenderPool):
    """Send many requests to one provider within its limits; one instance per job and model.

    Parameters:
        provider: sends one request and reports an Outcome.
        config: limits, retries, budget, cache policy and price.
        model: the model name (for messages).
        stats: the counters this runtime updates.
        limits: the shared limits of this endpoint+model (from a Coordinator); own ones when None.
        clock: where time comes from (a FakeClock in tests).
        store_url: the PostgreSQL cache store's URL behind ``config.cache_store`` (None: the SQLite file).

    Example:
        >>> import asyncio
        >>> from inferframe.providers.interface import MockProvider, Outcome, Request
        >>> rt = InferenceRuntime(MockProvider(lambda r: Outcome(value="ok")), RuntimeConfig(cache_policy="off"), model="m")
        >>> asyncio.run(rt.run_one(Request("chat", {"q": 1}))).value
        'ok'
    """

    def __init__(self, provider: Transport, config: RuntimeConfig, *, model: str | None, stats: RunStats | None = None,
                 seed: int | None = None, limits: SharedLimits | None = None, clock: Clock = REAL,
                 store_url: str | None = None) -> None:
        self.provider = provider
        self.config = config
        self.model = model
        self.stats = stats or RunStats()
        self.clock = clock
        shared = limits or SharedLimits.for_config(config, clock)
        self.limiter, self.slots, self.breaker = shared.limiter, shared.slots, shared.breaker
        # The in-flight bound over time and why it moved, for last_run() and the report (a cluster's has none).
        self.stats.concurrency = getattr(self.slots, "history", self.stats.concurrency)
        self._count_sends = hasattr(self.slots, "started")
        # A limiter that can admit without waiting (``RateLimiter.admit_now``; a cluster's leases always await).
        self._admit_now = getattr(self.limiter, "admit_now", None)
        self.rng = random.Random(seed)
        self._store_url = store_url
        self.cache = None if config.cache_policy == "off" else open_cache(config.cache_dir, store_url)
        # Asked on every row: read the policy once.
        self._reads = self.cache is not None and config.cache_policy.reads
        self._writes = self.cache is not None and config.cache_policy.writes
        self.identity = provider.cache_identity
        self._in_flight: dict[str, asyncio.Future] = {}
        # Made on first use: a llama.cpp server is asked for its slots then (False: rows go in arrival order).
        self._scheduler: PrefixScheduler | bool | None = None if config.prefix_order else False
        self._scheduler_made: asyncio.Future | None = None
        # The senders (``send_many``): rows ready to go, a fixed pool of tasks that send them, and the senders
        # waiting for a row. At most ``max_concurrency`` senders: the in-flight bound admits fewer.
        self._ready: collections.deque[SendRow] = collections.deque()
        self._senders = 0
        self._pool = max(1, config.max_concurrency)
        # Senders allowed now: above FIRST_SENDERS the pool doubles once a round trip while answers keep pace
        # (``SenderPool._paced``). ``_levels``: per pool size, [answers, latency summed, latencies summed].
        self._grown = min(self._pool, FIRST_SENDERS)
        self._growing = self._pool > self._grown
        self._levels: dict[int, list] = {}
        self._level_at = 0.0  # when the pool took its present size
        self._surplus = 0  # senders to end: the pool went back to a smaller size
        self._idle: list[asyncio.Future] = []
        self._tasks: set[asyncio.Task] = set()  # the senders
        self._retrying: dict[asyncio.Task, SendRow] = {}  # rows waiting out a delay before their next attempt
        self._batches = 0  # send_many calls waiting for their rows
        # Rows can run out of budget: asked twice per attempt, so known once.
        self._budgeted = config.max_cost is not None or config.max_tokens_budget is not None
        # A cap: each request's worst case is reserved before it is sent (``runtime.budget``).
        self._budget = Budget(config, model, self.stats, getattr(shared, "grants", None)) if self._budgeted else None
        # A batch's rows were handed to the scheduler in this pass of the loop (``batch_turn``).
        self._fresh = False
        self._started: asyncio.Event | None = None
        # The AI stage's OpenTelemetry recorder (``observe.otel.StageTrace``; None: the job records nothing):
        # every answered attempt is handed to it.
        self.tracing = None
        # Requests that waited for the rate limiter (or a 429's pause) before they went, and the seconds they waited.
        self.limit_waits = 0
        self.limit_wait_s = 0.0

    async def run_one(self, request: Request) -> Result:
        """Run one row to a final result (value or error); raises only when the job must stop.

        A cached answer skips the rate limiter and the provider; an identical request already in
        flight is shared instead of sent again.
        """
        return await self._run_keyed(request, cache_key(self.identity, request.endpoint, request.body,
                                                         self.config.prompt_version))

    def _cached(self, hit: tuple) -> Result:
        self.stats.cache_hits += 1
        self.stats.rows_done += 1
        self.breaker.row(True, None, "")
        return Result.cached(hit)

    def from_cache(self, requests: list[Request | None], rows: bool = True) -> tuple[list[Result | None], list[str | None]]:
        """Answer a batch from the cache with one query: (results, keys) per row, no task, no await.

        A result is None where the cache has no answer (or the policy does not read, or the
        request is None); every request's key is returned for sending the rest. ``rows=False``:
        the requests are parts of rows that the caller counts. The query runs
        on the loop, as the per-row lookups did: in a worker thread it measured no faster on
        2 CPUs, with a higher peak RSS.

        Example:
            >>> import tempfile
            >>> from inferframe.providers.interface import MockProvider, Outcome, Request
            >>> rt = InferenceRuntime(MockProvider(lambda r: Outcome(value="new")),
            ...                       RuntimeConfig(cache_dir=tempfile.mkdtemp()), model="m")
            >>> rt.cache.put(cache_key(rt.identity, "chat", {"q": 1}), "old", 5, 2)
            >>> batch = [Request("chat", {"q": 1}), Request("chat", {"q": 2}), None]
            >>> results, keys = rt.from_cache(batch)
            >>> [r and r.value for r in results], rt.stats.cache_hits
            (['old', None, None], 1)
        """
        keys = cache_keys(self.identity, requests, self.config.prompt_version)
        hits = self.cached_answers(keys, rows)
        return [h and Result.cached(h) for h in hits], keys

    def cached_answers(self, keys: list[str | None], rows: bool = True) -> list[tuple | None]:
        """The stored (value, input tokens, output tokens, finish reason) of each key, in one query; counts the hits.

        None where the cache has no answer, the key is None, or the policy does not read.
        ``rows=False``: the keys are parts of rows that the caller counts.

        Example:
            >>> import tempfile
            >>> from inferframe.providers.interface import MockProvider, Outcome
            >>> rt = InferenceRuntime(MockProvider(lambda r: Outcome(value="new")),
            ...                       RuntimeConfig(cache_dir=tempfile.mkdtemp()), model="m")
            >>> rt.cache.put("k1", "old", 5, 2)
            >>> rt.cached_answers(["k1", "k2", None]), rt.stats.cache_hits, rt.stats.rows_done
            ([('old', 5, 2, None), None, None], 1, 1)
        """
        wanted = [k for k in keys if k is not None] if self._reads else []
        if not wanted:
            return [None] * len(keys)
        hits = self._cache_reader.get_many(wanted)
        if len(hits) != len(keys):
            it = iter(hits)
            hits = [k and next(it) for k in keys]  # None where the key is None
        found = len(hits) - hits.count(None)
        if found:
            self.stats.cache_hits += found
            self.stats.rows_done += found * rows
            self.breaker.rows_ok(found)
        return hits

    @functools.cached_property
    def _cache_reader(self) -> CacheReader:
        # One per runtime (a job's call): it reads on from where this job's answers are stored.
        return self.cache.reader()

    async def batch_turn(self) -> None:
        """Wait until the rows handed to ``send_many`` in this pass of the loop were offered to the senders.

        An operator awaits it before it prepares another batch. The executor hands the loop a window
        of batches at once (33 of 128 rows with the default prefix window), and asyncio runs ready
        work in order: without this wait every batch's keys and bodies were made before the prefix
        scheduler released any row, and no request left until then.
        """
        while self._fresh:
            if self._started is None or self._started.is_set():
                self._started = asyncio.Event()
            await self._started.wait()

    def _offer(self) -> None:
        if not self._fresh:
            self._fresh = True
            # Called after the scheduler's pump (asked for when the rows arrived): the rows it released are with
            # the senders, which run before the batches waiting in ``batch_turn``.
            asyncio.get_running_loop().call_soon(self._offered)

    def _offered(self) -> None:
        self._fresh = False
        if self._started is not None:
            self._started.set()

    async def _run_keyed(self, request: Request, key: str) -> Result:
        if self._reads:
            # Looked up again as the row starts: an identical request may have finished meanwhile.
            hit = self.cache.recheck(key)  # no round trip to a shared store: this process's answers
            if hit is not None:
                return self._cached(hit)
        shared = self._in_flight.get(key)
        if shared is not None and not shared.done():
            self.stats.deduped += 1
            result = await asyncio.shield(shared.shared())
            self.stats.rows_done += 1
            return dataclasses.replace(result, usage=Usage(), cost=0.0, attempts=0)  # paid once, by the first row
        row = self._in_flight[key] = SendRow(self, request, key, None, 0)
        try:
            result = await self._send(request, key)
        except BaseException as e:
            self._row_failed(row, e)
            raise
        self._row_done(row, result)
        return result

    async def send_uncached(self, request: Request) -> Result:
        """Send one request past the cache and the in-flight sharing; raises only when the job must stop.

        For a request that packs many rows (embedding inputs): its answer is cached per row by the
        caller, so a rerun that groups the rows differently still finds them. It counts tokens, cost,
        requests and retries, but no rows: the caller counts its rows when it assembles them.
        """
        return await self._send(request, None, rows=False)

    async def _scheduled(self, request: Request) -> tuple[Request, int | None]:
        """Wait for the row's turn in the prefix order: the request to send (with the server's cache
        hints) and the scheduler's lane it holds (None: not ordered)."""
        sched = self._scheduler
        if sched is None:
            made = self._lanes_known()
            # Known already (send_many asked first): no wait, so this batch's rows reach the scheduler in
            # the loop's pass that started them, and the first ones go out before later batches arrive.
            lanes = made.result() if made.done() else await asyncio.shield(made)
            if self._scheduler is None:
                self._scheduler = PrefixScheduler(lanes, pinned=True) if lanes else PrefixScheduler(1)
            sched = self._scheduler
        if sched is False:
            return request, None
        text = request.prompt  # kept beside the body when the request was built: the body is not read
        if text is None:
            return request, None
        turn = await sched.turn(text)
        return self._routed(request, turn), turn.lane

    def _routed(self, request: Request, turn) -> Request:
        """The request of a row the prefix scheduler released, with the server's cache hints for its turn."""
        sched = self._scheduler
        if not (sched.pinned or turn.group):  # no slot and no prefix worth caching: no hint to add
            return request
        body = routed(self.provider, request.body, turn.lane if sched.pinned else None, turn.group)
        return request if body is request.body else request.with_body(body)

    async def _send(self, request: Request, key: str | None, rows: bool = True) -> Result:
        # Parts of rows packed into one request (embeddings) are not ordered by prefix.
        request, lane = await self._scheduled(request) if rows else (request, None)
        if lane is None:
            return await self._attempts(request, key, rows, None)
        # The lane is held until the row has its place in flight (one stream), or until the server
        # answered it (a llama.cpp slot holds one request at a time).
        hold = LaneHold(self._scheduler, lane)
        try:
            return await self._attempts(request, key, rows, hold)
        finally:
            hold.release()

    async def _attempts(self, request: Request, key: str | None, rows: bool, hold: "LaneHold | None") -> Result:
        attempt = 0
        while True:
            result, attempt, delay = await self._try(request, key, rows, hold, attempt)
            if result is not None:
                return result
            self.stats.retries += 1
            self.stats.retrying += 1  # the progress line says why nothing is in flight
            try:
                await self.clock.sleep(delay)
            finally:
                self.stats.retrying -= 1

    async def _try(self, request: Request, key: str | None, rows: bool, hold: "LaneHold | None",
                   attempt: int) -> tuple[Result | None, int, float]:
        """One attempt of a request that had ``attempt`` before: (its final result, or None to retry after the
        delay; the attempts now; the delay)."""
        limiter, clock = self.limiter, self.clock
        if self.breaker.tripped:
            self._check_breaker()
        # Waits while the answers in flight may leave room; not run when its worst case cannot fit.
        if self._budgeted and not await self._budget.admit(request, wait_all=self.config.on_error == "raise"):
            return self._not_run(attempt, rows), attempt, 0.0
        self._show_pause()
        est = request.est_tokens  # a property (made on first read): read once per attempt
        ticket = self._admit_now(est) if self._admit_now is not None else None
        waited = ticket is None
        if waited:
            began = clock.monotonic()
            ticket = await limiter.acquire(est)
            self._waited(began)
            self._check_breaker()
            if self._ready and not self._idle:  # the wait may have raised the bound (a cluster worker's first
                self._top_up()  # lease tells its share; its bound was 1): senders for the rows waiting, now
        attempt += 1
        slots = self.slots
        slots.size(limiter.requests_per_second())  # the bound follows the limit (Little's law)
        # A place without a coroutine when one is free (issue 36). A retry goes before the rows waiting for
        # their first attempt: they all wait here at once.
        if attempt > 1 or not slots.enter_now():
            await (slots.ahead() if attempt > 1 else slots).__aenter__()
            waited = True
        try:
            # Only a row that waited can find things changed since its checks above (nothing else ran).
            # A pause that began while this row waited for its slot holds it too: rows admitted before
            # a spent budget was seen would otherwise all go out into it (with no known rate, every row is).
            if waited and limiter.paused_until > clock.monotonic():
                began = clock.monotonic()
                await self._sit_out_pause()
                self._waited(began)
                if self.breaker.tripped:
                    limiter.release(est, None, ticket)  # its ticket was never used
                    self._check_breaker()
            # Checked again with a slot held: rows queued behind the cap must not all slip through.
            spent = self._budgeted and not await self._budget.admit(request, wait_all=self.config.on_error == "raise")
        except BaseException:
            slots.leave()
            raise
        if spent:
            slots.leave()
            limiter.release(est, None, ticket)
            return self._not_run(attempt - 1, rows), attempt - 1, 0.0
        if self._budgeted:
            self._budget.reserve(request)  # released in ``_sent``: no await since ``admit`` said it fits
        started = self._start(ticket, hold)
        try:
            outcome = await self.provider.send(request)
        finally:
            self._sent(hold, request)
        return self._answered(outcome, key, rows, attempt, est, ticket, started, request)

    def _waited(self, began: float) -> None:
        """A request waited for the limits since ``began`` (only rows that could not go at once come here)."""
        self.limit_waits += 1
        self.limit_wait_s += self.clock.monotonic() - began

    def _go_now(self, request: Request, hold: "LaneHold | None") -> tuple[int, Any, float] | None:
        """A first attempt's admission when nothing has to wait: (tokens, ticket, start) with its place held and
        the request counted as sent; None: ``_try`` takes it (a limit, a pause, the bound or the budget).

        The senders' path: the request is then sent from the sender's own coroutine, with no ``_try`` between
        them (each await of a request passes through every coroutine above it: issue 36).
        """
        if self._admit_now is None or self.breaker.tripped or (self._budgeted and self._budget.fits(request) is not True):
            return None
        slots = self.slots
        slots.size(self.limiter.requests_per_second())  # the bound follows the limit (Little's law)
        if not slots.enter_now():
            return None
        est = request.est_tokens
        ticket = self._admit_now(est)  # None while paused, limited or another row waits first
        if ticket is None:
            slots.leave()
            return None
        if self._budgeted:
            self._budget.reserve(request)  # released in ``_sent``
        return est, ticket, self._start(ticket, hold)

    def _start(self, ticket: Any, hold: "LaneHold | None") -> float:
        """The request leaves: its lane is free for the next row of one stream, it counts as sent and in flight."""
        if hold is not None and not hold.pinned:
            hold.release()
        self.stats.in_flight += 1
        self.stats.requests += 1
        started = ticket.sent_at = self.clock.monotonic()
        if self._count_sends:  # the capacity finder: its floor, its windows, what the answer proves (``load``)
            ticket.load = self.slots.started(started)
            self._count_sends = ticket.load is not False
        return started

    def _sent(self, hold: "LaneHold | None", request: Request | None = None) -> None:
        """A request is answered (or failed): its place, lane and budget reservation are free."""
        if self._budgeted and request is not None:
            self._budget.release(request)  # its actual cost is charged next (``_finish``), with no await between
        self.stats.in_flight -= 1
        if hold is not None:
            hold.release()
        self.slots.leave()

    async def run_many(self, requests: list[Request | None]) -> list[Result | None]:
        """Run requests concurrently (None entries, e.g. null inputs, stay None); order is kept.

        The cache answers what it can for the whole batch in one query (``from_cache``); only the
        other rows become tasks.
        """
        results, keys = self.from_cache(requests)
        todo = [i for i, r in enumerate(requests) if r is not None and results[i] is None]
        if todo:
            sent = await self.send_many([requests[i] for i in todo], [keys[i] for i in todo])
            for i, r in zip(todo, sent):
                results[i] = r
        return results

    async def run_batch_api(self, requests: list[Request | None], rows: bool = True) -> list[Result | None]:
        """Answer requests through the provider's Batch API (see runtime.batch); order is kept.

        ``rows=False``: the requests are parts of rows (embedding chunks) that the caller counts.
        """
        policy = self.config.cache_policy
        results, keys = self.from_cache(requests, rows)
        todo: dict[str, list[int]] = {}
        endpoint = None
        for i, r in enumerate(requests):
            if r is not None and results[i] is None:
                endpoint = r.endpoint
                todo.setdefault(keys[i], []).append(i)  # identical rows share one line of the batch
        if todo and self._budgeted:  # a cap holds here too: rows whose worst case would pass it are not sent
            go = await self._budget.admit_batch([requests[idx[0]] for idx in todo.values()], BATCH_DISCOUNT)
            for (key, idxs), sent in zip(list(todo.items()), go):
                if not sent:
                    for i in idxs:
                        results[i] = self._not_run(0, rows)
                    del todo[key]
        if not todo:
            return results
        ledger = self.cache if self.cache is not None else open_cache(self.config.cache_dir, self._store_url)
        runner = BatchRunner(self.provider, ledger, poll_interval=self.config.batch_poll_interval,
                             rounds=self.config.retry.max_attempts, store_answers=policy.writes, clock=self.clock)
        self.stats.in_flight += len(todo)
        span = self.tracing.batch(endpoint, len(todo)) if self.tracing is not None else None
        outcomes = None
        try:
            outcomes = await runner.run(endpoint, [(k, requests[idx[0]].body) for k, idx in todo.items()])
        finally:
            self.stats.in_flight -= len(todo)
            if span is not None:
                self.tracing.batch_ended(span, outcomes)
            if self._budgeted:
                self._budget.release_batch([requests[idx[0]] for idx in todo.values()], BATCH_DISCOUNT)
        self.stats.requests += len(todo)
        for key, idxs in todo.items():
            saved_before = self.stats.cache_saved
            first = self._finish(outcomes[key], 1, rows)
            self.stats.cost -= first.cost * (1 - BATCH_DISCOUNT)  # _finish counted the synchronous price
            # ...and the prompt cache's saving at it: at half the price the same tokens save half.
            self.stats.cache_saved -= (self.stats.cache_saved - saved_before) * (1 - BATCH_DISCOUNT)
            first.cost *= BATCH_DISCOUNT
            for j, i in enumerate(idxs):
                if j:
                    self.stats.deduped += 1
                    self.stats.rows_done += rows
                results[i] = first if j == 0 else dataclasses.replace(first, usage=Usage(), cost=0.0)
        return results

    async def aclose(self) -> None:
        tasks = [*self._tasks, *self._retrying]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.provider.aclose()


BATCH_DISCOUNT = 0.5  # the Batch API costs half the synchronous price
