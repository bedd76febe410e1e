"""A job's ``max_cost`` / ``max_tokens_budget`` as a cap: each request's worst case is reserved before it is sent.

A request's worst case is its estimated prompt tokens plus its ``max_tokens`` (a request that sets
none: the model's output limit, ``pricing.max_output_of``; an embedding answers no tokens), at the
model's price. It is reserved before the request leaves and released when the answer arrives, which
is then charged at its actual cost. A request is sent only while what was spent, what requests in
flight hold and its own worst case stay within the cap; one that would pass it waits for the
requests in flight to be answered, and is not sent (its row gets the ``budget`` error kind) once it
would pass the cap with nothing in flight. Without a price a request costs nothing here: ``max_cost``
then never holds a row back.

The budget is one AI call's. In one process this runtime holds all of it; on Ray and Spark each
worker reserves against what the job's coordinator granted it (``grants``), and the coordinator never
grants more than the cap in all (``runners.ray_limits.budget_grants``), so the workers together stay
within it.

Example:
    >>> from inferframe.observe.stats import RunStats
    >>> from inferframe.providers.interface import Request
    >>> b = Budget(RuntimeConfig(max_cost=0.001, price=(1.0, 2.0)), "m", RunStats(label="p"))
    >>> r = Request("chat", {}, 300, max_output_tokens=200)      # 100 prompt tokens + 200: $0.0005 at most
    >>> b.fits(r), b.reserve(r), b.fits(r), b.reserve(r), b.fits(r)
    (True, None, True, None, None)
    >>> b.release(r); b.stats.cost = 0.0009; b.release(r); b.fits(r)   # answered; $0.0009 spent: it never fits
    False
"""

from __future__ import annotations

import asyncio
from typing import Any

from inferframe.observe.budget_note import cap_text, go_on, spent_text
from inferframe.observe.stats import RunStats
from inferframe.providers.interface import Request
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.pricing import cost_of, max_output_of


class Budget:
    """The cap of one runtime: reserve a request's worst case, release it when answered, say when a row cannot go.

    Parameters:
        config: the call's ``max_cost``, ``max_tokens_budget`` and price.
        model: the model (its output limit is a request's worst case when it sets no max_tokens).
        stats: the counters that hold what was spent (the runtime charges them); the cap is recorded
            in ``stats.budget`` for the end-of-job warning.
        grants: a cluster's coordinator, which grants each worker its part of the caps (None: all of it is here).
    """

    def __init__(self, config: RuntimeConfig, model: str | None, stats: RunStats, grants: Any = None) -> None:
        self.max_cost, self.max_tokens, self.price = config.max_cost, config.max_tokens_budget, config.price
        self.grants = grants
        # What this runtime may reserve up to: the caps, or on a cluster what the coordinator granted so far.
        self.allowed_cost = 0.0 if grants is not None else (config.max_cost or 0.0)
        self.allowed_tokens = 0 if grants is not None else (config.max_tokens_budget or 0)
        self._granted_all = False  # the coordinator gave less than asked: the caps are granted out
        self._asking = asyncio.Lock()  # one grant request at a time: rows that wait together ask once
        self.output_cap = max_output_of(model)
        self.stats = stats
        self.reserved_cost = 0.0
        self.reserved_tokens = 0
        self.held = 0  # requests holding a reservation (in flight)
        self._freed: asyncio.Event | None = None  # set when a reservation is released (rows wait for room)
        stats.budget = {"max_cost": self.max_cost, "max_tokens_budget": self.max_tokens}

    def worst_case(self, request: Request) -> tuple[float, int]:
        """(dollars, tokens) the request may cost at most: its prompt estimate and its output bound.

        Example:
            >>> from inferframe.observe.stats import RunStats
            >>> b = Budget(RuntimeConfig(max_cost=1.0, price=(1.0, 2.0)), "gpt-4o", RunStats())
            >>> b.worst_case(Request("chat", {}, 12)), b.worst_case(Request("chat", {}, 15, max_output_tokens=5))
            ((0.03278, 16396), (2e-05, 15))
        """
        bound = request.max_output_tokens
        out = bound if bound is not None else (0 if request.endpoint == "embeddings" else self.output_cap)
        prompt = max(0, request.est_tokens - (bound or 0))
        cost = cost_of(self.price, prompt, out) if self.max_cost is not None else 0.0
        return cost, prompt + out

    def fits(self, request: Request) -> bool | None:
        """True: the request may go now; None: not yet (answers in flight, or a grant, may make room); False: never."""
        cost, tokens = self.worst_case(request)
        short_cost, short_tokens = self._short(cost, tokens)
        stats = self.stats
        if (self.max_cost is not None and self.price is not None and stats.cost + cost > self.max_cost) or (
                self.max_tokens is not None and stats.input_tokens + stats.output_tokens + tokens > self.max_tokens):
            return self._refused(cost, tokens, request)
        return None if short_cost > 0 or short_tokens > 0 else True

    def _short(self, cost: float, tokens: int) -> tuple[float, int]:
        """How much more than this runtime may reserve a request of this worst case needs (0: none)."""
        stats = self.stats
        short_cost = stats.cost + self.reserved_cost + cost - self.allowed_cost \
            if self.max_cost is not None and self.price is not None else 0.0
        short_tokens = stats.input_tokens + stats.output_tokens + self.reserved_tokens + tokens - self.allowed_tokens \
            if self.max_tokens is not None else 0
        return short_cost, short_tokens

    async def _grown(self, request: Request) -> bool:
        """Ask the coordinator for what the request lacks (and a few requests more); True: it fits now."""
        async with self._asking:
            if self._granted_all or self.fits(request) is not None:
                return self.fits(request) is True
            cost, tokens = self.worst_case(request)
            short_cost, short_tokens = self._short(cost, tokens)
            want_cost, want_tokens = max(0.0, short_cost) + 3 * cost, max(0, short_tokens) + 3 * tokens
            got_cost, got_tokens = await self.grants.take(self.stats.label, self.max_cost, self.max_tokens,
                                                          want_cost, want_tokens)
            self.allowed_cost += got_cost
            self.allowed_tokens += got_tokens
            if (self.max_cost is not None and got_cost < want_cost) or (
                    self.max_tokens is not None and got_tokens < want_tokens):
                self._granted_all = True
            return self.fits(request) is True

    def _refused(self, cost: float, tokens: int, request: Request) -> bool:
        # What the end-of-job message quotes: one request's worst case, and why it is so large.
        self.stats.budget.update(worst_cost=cost, worst_tokens=tokens,
                                 unbounded=self.output_cap if request.max_output_tokens is None else None)
        return False

    async def admit(self, request: Request, *, wait_all: bool = False) -> bool:
        """Wait until the request fits (True) or never will (False); ``wait_all``: say False only with nothing in flight.

        ``wait_all`` is for ``on_error="raise"``: the job stops at this row, after the answers in flight
        are in (paid for, they are kept).
        """
        while True:
            fit = self.fits(request)
            if fit or (fit is False and not (wait_all and self.held)):
                return bool(fit)
            if fit is None and self.grants is not None and await self._grown(request):
                return True
            if not self.held:  # nothing in flight here, and the coordinator has nothing more to give
                self._refused(*self.worst_case(request), request)
                return False
            if self._freed is None:
                self._freed = asyncio.Event()
            await self._freed.wait()

    def reserve(self, request: Request) -> None:
        """Hold the request's worst case until ``release`` (call it after ``fits`` said True, with no await between)."""
        cost, tokens = self.worst_case(request)
        self.reserved_cost += cost
        self.reserved_tokens += tokens
        self.held += 1

    def release(self, request: Request) -> None:
        """The request was answered (or failed): give its reservation back; the runtime charges what it cost."""
        cost, tokens = self.worst_case(request)
        self.reserved_cost = max(0.0, self.reserved_cost - cost)
        self.reserved_tokens = max(0, self.reserved_tokens - tokens)
        self.held = max(0, self.held - 1)
        if not self.held:  # nothing in flight: no float residue may hold a row back for good
            self.reserved_cost, self.reserved_tokens = 0.0, 0
        freed, self._freed = self._freed, None
        if freed is not None:
            freed.set()

    async def admit_batch(self, requests: list[Request], discount: float) -> list[bool]:
        """Which of a Batch API's requests may go: each's worst case at the batch price is reserved, in order,
        while it fits the cap; the rest are not run. Give the reservations back with :meth:`release_batch`.

        A batch is submitted whole, so what the rows may cost is held before it leaves, as for a request.

        Example:
            >>> import asyncio
            >>> from inferframe.observe.stats import RunStats
            >>> b = Budget(RuntimeConfig(max_cost=0.001, price=(1.0, 2.0)), "m", RunStats(label="p"))
            >>> asyncio.run(b.admit_batch([Request("chat", {}, 300, max_output_tokens=200)] * 5, 0.5))
            [True, True, True, True, False]
        """
        worst = [self.worst_case(r) for r in requests]
        worst = [(cost * discount, tokens) for cost, tokens in worst]
        if self.grants is not None and not self._granted_all:  # a cluster: ask the coordinator for the batch at once
            async with self._asking:
                short_cost, short_tokens = self._short(sum(c for c, _ in worst), sum(t for _, t in worst))
                if short_cost > 0 or short_tokens > 0:
                    got_cost, got_tokens = await self.grants.take(self.stats.label, self.max_cost, self.max_tokens,
                                                                  max(0.0, short_cost), max(0, short_tokens))
                    self.allowed_cost += got_cost
                    self.allowed_tokens += got_tokens
        admitted = []
        for request, (cost, tokens) in zip(requests, worst):
            short_cost, short_tokens = self._short(cost, tokens)
            fits = short_cost <= 1e-12 and short_tokens <= 0
            if fits:
                self.reserved_cost += cost
                self.reserved_tokens += tokens
            else:
                self._refused(cost, tokens, request)
            admitted.append(fits)
        return admitted

    def release_batch(self, requests: list[Request], discount: float) -> None:
        """The batch of ``requests`` (those :meth:`admit_batch` admitted) was answered or failed: their
        reservations go, as :meth:`release` gives back one request's; the runtime charges what it cost."""
        for request in requests:
            cost, tokens = self.worst_case(request)
            self.reserved_cost = max(0.0, self.reserved_cost - cost * discount)
            self.reserved_tokens = max(0, self.reserved_tokens - tokens)

    def reached(self) -> str:
        """The message of a row held back under ``on_error="raise"``: what was spent, and how to go on."""
        b, s = self.stats.budget, self.stats
        return (f"{s.label or 'an AI call'}: {cap_text(b)} reached: {spent_text(s.as_dict())}; the job stopped, and rows "
                f"not answered yet were not run. {go_on(s.as_dict())}")
