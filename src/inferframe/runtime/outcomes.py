"""What an answered attempt does (a mixin of the runtime): it teaches the rate limiter, the in-flight
bound and the breaker what the service said, reacts to a failure as its kind says (``_react``), and
becomes the row's result with its cost, or a retry after a delay."""

from __future__ import annotations

from typing import Any

from inferframe.errors import BudgetExceededError, ErrorKind, RowFailed, ServiceError
from inferframe.providers.interface import Outcome, Request, Usage
from inferframe.runtime.breaker import refused
from inferframe.runtime.budget import cap_text
from inferframe.runtime.pricing import cost_of
from inferframe.runtime.types import Result, RowError

__all__ = ["AttemptOutcomes"]


class AttemptOutcomes:
    """The runtime's handling of answers and failures; ``InferenceRuntime`` holds the state it reads."""

    def _check_breaker(self) -> None:
        if self.breaker.tripped:
            reason, service = self.breaker.reason, self.provider.service
            # As on Ctrl-C: what was answered is in the cache, and a rerun does not pay for it again.
            kept = (" Rows answered before the stop are kept in the response cache: run the same job again once "
                    "this is fixed, and they are not sent again.") if self._writes else ""
            raise ServiceError((reason if service in reason else f"{service}: {reason}") + kept)

    def _answered(self, outcome: Outcome, key: str | None, rows: bool, attempt: int, est: int, ticket: Any,
                  started: float, request: Request) -> tuple[Result | None, int, float]:
        """What one answered attempt teaches the limits, and the row's result (None: retry after the delay).

        ``request``: what was sent (its answer cap, which the breaker's advice on timeouts names; its span).
        """
        limiter = self.limiter
        latency = self.clock.monotonic() - started
        if self.tracing is not None:  # None unless a job records OpenTelemetry traces or metrics (observe.otel)
            self.tracing.answered(request, outcome, attempt, latency)
        cap = request.max_output_tokens
        self.stats.add_latency(latency)
        # A refusal before any success keeps the limiter probing one request at a time: if it recurs, the
        # job stops after a few requests instead of a whole in-flight bound of them (``Breaker``).
        probe_refused = (self.config.stop_on_recurring and not self.breaker.any_success
                         and refused(outcome.error_kind, outcome.status))
        limiter.release(est, outcome.limits, ticket, refused=probe_refused)
        usage = outcome.usage
        if usage is not None:
            limiter.correct(est, usage.input_tokens + usage.output_tokens)
        self.breaker.attempt(outcome.error_kind, outcome.message, self.provider.service, cap)
        if outcome.error_kind is None:
            self.slots.on_success(latency, limiter.requests_per_second(), started, ticket.load)
            if key is not None and self._writes:
                usage = outcome.usage or Usage()
                self.cache.put(key, outcome.value, usage.input_tokens, usage.output_tokens, outcome.finish_reason)
            return self._finish(outcome, attempt, rows), attempt, 0.0
        kind = outcome.error_kind
        wait = self._react(kind, outcome, est)
        self._check_breaker()
        if not self.config.retry.should_retry(kind, attempt):
            result = self._finish(outcome, attempt, rows, counted=not request.part_of_refused)
            self._check_breaker()  # this row may have tripped it (the same refusal again): the job stops now
            return result, attempt, 0.0
        return None, attempt, self.config.retry.delay(attempt, wait, self.rng, self.slots.failing)

    def _react(self, kind: ErrorKind, outcome: Outcome, tokens: int) -> float | None:
        """Let a failed attempt move the job's limits as its kind says; returns the row's Retry-After.

        Which signal drives which reaction, and why:

        * A 429 that shows the rate budget spent (its headers: nothing left, or a storm of 429s
          where there are no headers; ``RateLimiter.on_429``) pauses admission for every row for
          its Retry-After and cuts the in-flight bound: every other row would get a 429 too.
        * Any other 429 (budget left, or alone without headers) is isolated: only its row waits
          for its Retry-After; the bound takes one cut per episode of them (``on_rate_limited``).
          A proxy, a replica or a concurrency cap refuses one request; stopping every row for it
          is what cost the throughput.
        * 5xx, reset connections, timeouts and malformed bodies retry their row after a backoff
          and leave the bound alone unless they persist (a high failure share of the recent
          answers: ``AdaptiveLimit.on_fault``): one such answer says nothing about load. The
          backoff doubles with each attempt only while they persist (``RetryPolicy.delay``).
        * Auth, quota and unreachable trip the breaker (the job stops with one ServiceError), as
          does every recent row failing after its retries; other kinds (bad request, schema...)
          are the row's own: no retry, nothing moves.
        """
        if kind == ErrorKind.RATE_LIMIT:
            self.stats.rate_limited += 1
            wait = outcome.retry_after if outcome.retry_after is not None else 1.0
            spent = self.limiter.on_429(outcome.limits, wait, tokens)
            if spent:
                self.stats.pauses += 1
                self.stats.pause_for(wait)
            self.slots.on_rate_limited(spent)
            return wait
        if kind.retryable:
            self.slots.on_fault()
        return outcome.retry_after

    def _show_pause(self) -> None:
        left = self.limiter.paused_until - self.clock.monotonic()
        if left > 0:  # paused by another row, runtime or (Ray) worker: the progress line tells why rows wait
            self.stats.pause_for(left)

    async def _sit_out_pause(self) -> None:
        while True:
            left = self.limiter.paused_until - self.clock.monotonic()
            if left <= 1e-6:  # over: a float's rounding leaves a few ulps where now + left == now, and sleeps no time
                return
            self.stats.pause_for(left)
            await self.clock.sleep(left)

    def _not_run(self, attempts: int, rows: bool = True) -> Result:
        if self.config.on_error == "raise":
            raise BudgetExceededError(self._budget.reached())
        if rows:
            self.stats.not_run += 1
            self.stats.rows_done += 1
        return Result(error=RowError(ErrorKind.BUDGET, f"not run: its worst case (prompt and max_tokens) would pass "
                                     f"the job's {cap_text(self.stats.budget)}; it runs on the next start", None,
                                     attempts), attempts=attempts)

    def _finish(self, outcome: Outcome, attempts: int, rows: bool = True, counted: bool = True) -> Result:
        """The row's result, counted in the stats and (``counted``: not a refused pack's part) by the breaker."""
        usage = outcome.usage or Usage()
        price, cached = self.config.price, usage.cached_tokens
        cost = cost_of(price, usage.input_tokens, usage.output_tokens, cached)
        # The prompt cache's saving: its tokens at the full input rate, less what they cost.
        saved = cost_of(price, cached, 0) - cost_of(price, cached, 0, cached) if cached else 0.0
        self.stats.add_usage(usage.input_tokens, usage.output_tokens, cost, cached, saved)
        if outcome.ok:
            self.stats.rows_done += rows
            self.breaker.row(True, None, "")
            return Result(value=outcome.value, usage=usage, cost=cost, attempts=attempts,
                          finish_reason=outcome.finish_reason)
        err = RowError(outcome.error_kind or ErrorKind.UNKNOWN, outcome.message, outcome.status, attempts, outcome.raw)
        self.stats.rows_done += rows
        self.stats.errors += rows
        if counted:  # a refused pack's part repeats the pack's refusal: it neither adds to nor breaks the streak
            self.breaker.row(False, outcome.error_kind, outcome.message, outcome.status, self.config.stop_on_recurring)
        if self.config.on_error == "raise":
            raise RowFailed.of(err.as_dict())  # the shape every AI function raises (see RowFailed)
        return Result(value=None, error=err, usage=usage, cost=cost, attempts=attempts)
