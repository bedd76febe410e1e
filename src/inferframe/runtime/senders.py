"""The sender pool of ``InferenceRuntime.send_many``: no task, future or gather per row.

A batch's rows go to the prefix scheduler (or straight to the ready queue); a fixed pool of sender
tasks (no more than the in-flight bound admits) sends what it releases; a retry waits out its delay
off the pool and goes first; the caller awaits one future for the batch (issue 36: a task, a future
and a gather per row were most of the engine's own CPU per request). A row whose identical request
is already on its way waits for that one's answer: a future is made only for such a row.

``SenderPool`` is a mixin of ``runtime.engine.InferenceRuntime``: it uses the runtime's ``_try``
(one attempt through limits, provider and retry policy), its stats, scheduler and cache.

Example:
    >>> import asyncio
    >>> from inferframe.providers.interface import MockProvider, Outcome, Request
    >>> from inferframe.runtime.engine import InferenceRuntime, RuntimeConfig
    >>> rt = InferenceRuntime(MockProvider(lambda r: Outcome(value=r.body["q"])), RuntimeConfig(cache_policy="off"),
    ...                       model="m")
    >>> [r.value for r in asyncio.run(rt.send_many([Request("chat", {"q": i}) for i in range(3)], [None] * 3))]
    [0, 1, 2]
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from inferframe.providers.interface import Request, Usage, prefix_lanes
from inferframe.runtime.scheduler import PrefixScheduler
from inferframe.runtime.types import Result

# The pool starts with up to this many senders, and grows past it only while answers keep pace: a sender
# per row of a 16,384 bound against a server that queues them costs the client CPU and wins nothing (issue 36).
FIRST_SENDERS = 1024
# A larger pool is kept while its answers come back less than this much slower than at half its size:
# at a constant rate (a server at its limit), twice the requests in flight take twice as long (Little's law).
SLOWER = 1.5
# Answers timed at each size before it is judged.
MIN_ANSWERS = 64
# The pool stops growing where this process was on a CPU more than this share of the time: its Python
# threads share one GIL, so the client sets the pace (a zero-latency server on this machine: about 1.0),
# and a trial at twice the size cost 15-20% of a 20,000-row run (bench/prompt_throughput.py --sweep).
BUSY = 0.5


def _cpu_seconds() -> float:
    """CPU seconds of this process, every thread (the GIL's and reqwest's)."""
    return time.process_time()


class SenderPool:
    """``send_many`` and the pool of sender tasks behind it (a mixin of ``InferenceRuntime``)."""

    def _lanes_known(self) -> asyncio.Future:
        """The provider's prefix lanes, asked once (a task made before the rows' tasks, so it runs first)."""
        if self._scheduler_made is None:
            self._scheduler_made = asyncio.ensure_future(prefix_lanes(self.provider))
        return self._scheduler_made

    async def send_many(self, requests: list[Request], keys: list[str | None]) -> list[Result]:
        """Run requests whose cache keys the caller made and looked up (``cached_answers``); order is kept.

        No task per row: each row goes to the prefix scheduler (or straight to the queue), and a fixed
        pool of sender tasks (``_sender``) takes the rows it releases. A row whose identical request is
        already on its way waits for that one's answer (no future unless there is such a row); the
        caller awaits one future for the whole batch.
        """
        if self._scheduler is None:
            made = self._lanes_known()
            lanes = made.result() if made.done() else await asyncio.shield(made)
            if self._scheduler is None:
                self._scheduler = PrefixScheduler(lanes, pinned=True) if lanes else PrefixScheduler(1)
        batch = _Batch(len(requests), asyncio.get_running_loop().create_future())
        if not requests:
            return []
        self._batches += 1
        batch.future.add_done_callback(self._batch_closed)
        sched, in_flight, ready = self._scheduler, self._in_flight, self._ready
        reads = self._reads
        for i, (request, key) in enumerate(zip(requests, keys)):
            if key is not None:
                if reads:
                    hit = self.cache.recheck(key)  # an identical request of an earlier batch may have finished
                    if hit is not None:
                        batch.put(i, self._cached(hit))
                        continue
                owner = in_flight.get(key)
                if owner is not None and not owner.done():
                    self.stats.deduped += 1
                    owner.follow(batch, i)
                    continue
            row = SendRow(self, request, key, batch, i)
            if key is not None:
                in_flight[key] = row
            text = request.prompt if sched is not False else None  # kept beside the body: the body is not read
            if text is None:
                ready.append(row)
                self._wake()
            else:
                sched.put(text, row)  # released to ``SendRow.set_result``
        self._offer()
        try:
            return await batch.future
        except asyncio.CancelledError:
            self._abandon(batch)
            raise

    def _batch_closed(self, _future: asyncio.Future) -> None:
        self._batches -= 1
        if not self._batches:  # no batch waits: the idle senders end (a later batch starts new ones)
            idle, self._idle = self._idle, []
            for f in idle:
                if not f.done():
                    f.set_result(None)
            for task, row in list(self._retrying.items()):
                if row.done():  # a retry nobody waits for (its batch failed or was cancelled)
                    task.cancel()

    def _abandon(self, batch: "_Batch") -> None:
        """The caller is gone (cancelled): its rows not yet sent are dropped, unless another row shares them."""
        batch.dead = True
        for key, row in list(self._in_flight.items()):
            if row.batch is batch and row.done():
                del self._in_flight[key]

    def _wake(self) -> None:
        """A row is ready: an idle sender takes it, or a new one while the pool is not full."""
        idle = self._idle
        while idle:
            f = idle.pop()
            if not f.done():
                f.set_result(None)
                return
        # No more senders than the in-flight bound admits (a cluster's or AIMD's may be far below the pool):
        # the others would each wait there with a future of their own.
        if self._senders < self._sender_bound():
            self._senders += 1
            self._spawn(self._sender())

    def _sender_bound(self) -> int:
        """Senders at most: the pool, or fewer when the in-flight bound admits fewer (the others would wait there).

        A bound sized from known limits (rate x latency) governs at once; otherwise the pool is what has
        grown so far (``_paced``).
        """
        slots = self.slots
        cap = self._pool if getattr(slots, "sized", False) else self._grown
        return min(cap, int(getattr(slots, "limit", cap)))

    def _paced(self, started: float) -> None:
        """One answer of a request sent at ``started`` while the pool may still grow: double it, keep it, or halve it.

        Only answers that come back while the pool is full count: a pool its rows do not fill has
        nothing to gain from more senders. At each size a round's worth of answers is let pass (half
        a round after a doubling: until then the server still answers what the smaller pool sent),
        then ``MIN_ANSWERS`` are timed. The pool then

        * goes back to half its size for good, if the answers came back ``SLOWER`` times as slow as at
          half the size or more (queueing at the server: Little's law);
        * stays, if the process was on a CPU more than ``BUSY`` of the time meanwhile: the client, not
          the server, sets the pace, and twice the senders could not send twice as much;
        * doubles otherwise.
        """
        size = self._grown
        if self.stats.in_flight < size - size // 10 or started < self._level_at:
            return  # the pool is not full (rows come slower than it sends them), or sent at a smaller size
        level = self._levels.get(size)
        if level is None:  # [answers, latency summed, latencies summed, wall and CPU time at the first answer]
            level = self._levels[size] = [0, 0.0, 0, time.monotonic(), _cpu_seconds()]
        level[0] += 1
        half = self._levels.get(size // 2)
        if level[0] <= (size // 2 if half is not None else size):
            return
        now = self.clock.monotonic()
        level[1] += now - started
        level[2] += 1
        if level[2] < MIN_ANSWERS:
            return
        # Queueing at the server is judged first: where answers came back SLOWER times as slow, the half size
        # sends as much, whether or not the client was busy too (judged the other way round, a busy CI machine
        # kept twice the senders the server could use).
        if half is not None and level[1] / level[2] >= SLOWER * half[1] / half[2]:
            self._grown = size // 2  # queueing, not latency: the extra senders only wait (they end, ``_sender``)
            self._growing = False
            if not getattr(self.slots, "sized", False):
                self._surplus = max(0, self._senders - self._grown)
            return
        busy = (_cpu_seconds() - level[4]) / max(1e-9, time.monotonic() - level[3])
        if busy > BUSY:
            self._growing = False  # the client is the bottleneck: more senders would only queue in it
            return
        self._grown = min(self._pool, size * 2)
        self._growing = self._grown < self._pool
        self._level_at = now
        self._top_up()

    def _top_up(self) -> None:
        """Senders for the rows waiting, up to the in-flight bound: it may have grown since they started.

        The first answer tells the limits and sizes the bound from 64 to the rate times the latency;
        one more sender per answer took three round trips to get there (issue 36: 64, 128, 256
        requests in the first seconds at 12,000 RPM and 1 s).
        """
        for _ in range(min(self._sender_bound() - self._senders, len(self._ready))):
            self._senders += 1
            self._spawn(self._sender())

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sender(self) -> None:
        """Send ready rows one after the other, until no batch waits for rows (one of the pool's tasks)."""
        ready = self._ready
        loop = asyncio.get_running_loop()
        try:
            while True:
                if self._surplus:
                    self._surplus -= 1
                    return  # the pool went back to a smaller size (``_paced``)
                if ready:
                    row = ready.popleft()
                    if row.done():  # its batch is gone and nobody shares it
                        if row.turn is not None and row.attempts == 0:
                            self._scheduler.release(row.turn.lane)
                        continue
                    # The row's attempt, inlined: one coroutine less per row (issue 36).
                    request, hold = row.request, None
                    turn = row.turn
                    try:
                        if turn is not None and row.attempts == 0:
                            hold = LaneHold(self._scheduler, turn.lane)
                            # The provider's own code (a plugin's cache hint): what it raises fails the row
                            # below, as a send does; outside this guard the row was never answered (a hang).
                            request = row.request = self._routed(request, turn)
                        go = None if row.attempts else self._go_now(request, hold)
                        if go is None:
                            result, row.attempts, delay = await self._try(request, row.key, True, hold, row.attempts)
                        else:  # sent from here: no coroutine of ``_try`` between this one and the request's
                            est, ticket, started = go
                            try:
                                outcome = await self.provider.send(request)
                            finally:
                                self._sent(hold, request)
                            result, row.attempts, delay = self._answered(outcome, row.key, True, 1, est, ticket,
                                                                         started, request)
                            if self._growing:
                                self._paced(started)
                    except asyncio.CancelledError:  # the runtime is closing: whoever waits for the row is cancelled
                        self._row_failed(row, None)
                        raise
                    except Exception as e:  # the job must stop (a tripped breaker, on_error="raise"): the batch raises
                        self._row_failed(row, e)
                        continue
                    finally:
                        if hold is not None:
                            hold.release()
                    if result is not None:
                        self._row_done(row, result)
                    else:
                        self._retry_later(row, delay)
                    if ready and not self._idle:
                        self._top_up()
                elif not self._batches:
                    return
                else:
                    idle = loop.create_future()
                    self._idle.append(idle)
                    await idle
        finally:
            self._senders -= 1

    def _retry_later(self, row: "SendRow", delay: float) -> None:
        """The row's next attempt after ``delay``, waited out off the pool."""
        self.stats.retries += 1
        self.stats.retrying += 1  # the progress line says why nothing is in flight
        task = asyncio.ensure_future(self._retry_after(row, delay))
        self._retrying[task] = row
        task.add_done_callback(self._retry_ended)

    def _retry_ended(self, task: asyncio.Task) -> None:
        del self._retrying[task]

    async def _retry_after(self, row: "SendRow", delay: float) -> None:
        """A row's next attempt after ``delay``, before the rows waiting for their first (no sender waits for it)."""
        try:
            await self.clock.sleep(delay)
        finally:
            self.stats.retrying -= 1
        self._ready.appendleft(row)
        self._wake()

    def _row_done(self, row: "SendRow", result: Result) -> None:
        if row.key is not None and self._in_flight.get(row.key) is row:
            del self._in_flight[row.key]
        if row.batch is not None:
            row.batch.put(row.index, result)
        if row.followers:
            for batch, i in row.followers:  # paid once, by the first row
                self.stats.rows_done += 1
                batch.put(i, dataclasses.replace(result, usage=Usage(), cost=0.0, attempts=0))
        if row.waiter is not None and not row.waiter.done():
            row.waiter.set_result(result)

    def _row_failed(self, row: "SendRow", error: BaseException | None) -> None:
        """The row raised ``error`` (None: it was cancelled): every batch and sharer waiting for it gets it."""
        if row.key is not None and self._in_flight.get(row.key) is row:
            del self._in_flight[row.key]
        if row.batch is not None:
            row.batch.fail(error)
        for batch, _ in row.followers or ():
            batch.fail(error)
        waiter = row.waiter
        if waiter is not None and not waiter.done():
            if error is None:
                waiter.cancel()
            else:
                waiter.set_exception(error)
                waiter.exception()  # mark retrieved: sharers get it, nobody else must see a warning


class LaneHold:
    """One row's hold on a prefix scheduler's lane, released once."""

    __slots__ = ("scheduler", "lane", "pinned")

    def __init__(self, scheduler: PrefixScheduler, lane: int) -> None:
        self.scheduler, self.lane, self.pinned = scheduler, lane, scheduler.pinned

    def release(self) -> None:
        if self.scheduler is not None:
            self.scheduler.release(self.lane)
            self.scheduler = None


class _Batch:
    """The rows of one ``send_many`` call: their results, and the one future its caller awaits."""

    __slots__ = ("results", "left", "future", "dead")

    def __init__(self, n: int, future: asyncio.Future) -> None:
        self.results: list = [None] * n
        self.left = n
        self.future = future
        self.dead = False  # failed or abandoned: its rows not yet sent are dropped
        if not n:
            future.set_result(self.results)

    def put(self, i: int, result: Result) -> None:
        self.results[i] = result
        self.left -= 1
        if not self.left and not self.future.done():
            self.future.set_result(self.results)

    def fail(self, error: BaseException | None) -> None:
        """The batch raises ``error`` (None: it is cancelled); its rows not yet sent are dropped."""
        self.dead = True
        if not self.future.done():
            if error is None:
                self.future.cancel()
            else:
                self.future.set_exception(error)


class SendRow:
    """One row on its way to a sender: what the prefix scheduler releases (it calls ``set_result``).

    Rows with the same request wait for this one's answer: ``followers`` of ``send_many`` batches, and
    a ``waiter`` future made only when a ``run_one`` call shares it.
    """

    __slots__ = ("runtime", "request", "key", "batch", "index", "turn", "attempts", "followers", "waiter")

    def __init__(self, runtime: SenderPool, request: Request, key: str | None, batch: _Batch | None,
                 index: int) -> None:
        self.runtime, self.request, self.key, self.batch, self.index = runtime, request, key, batch, index
        self.turn = None
        self.attempts = 0
        self.followers: list | None = None
        self.waiter: asyncio.Future | None = None

    def done(self) -> bool:
        """Nobody waits for this row's answer any more (the scheduler and the senders skip it)."""
        batch = self.batch
        return batch is not None and batch.dead and not self.followers and self.waiter is None

    def set_result(self, turn) -> None:
        """The prefix scheduler released the row: it goes to the senders."""
        self.turn = turn
        self.runtime._ready.append(self)
        self.runtime._wake()

    def follow(self, batch: _Batch, i: int) -> None:
        if self.followers is None:
            self.followers = []
        self.followers.append((batch, i))

    def shared(self) -> asyncio.Future:
        if self.waiter is None:
            self.waiter = asyncio.get_running_loop().create_future()
        return self.waiter
