"""The coordinator actor's state: per endpoint+model key, the cluster's RateLimiter, in-flight shares, pause and breaker."""

from __future__ import annotations

import asyncio
import time

from inferframe.providers.interface import LimitHints
from inferframe.runners.ray_limits.budget_grants import BudgetLedger
from inferframe.runners.ray_limits.cluster_capacity import ClusterCapacity
from inferframe.runners.ray_limits.relay import CounterBoard
from inferframe.runners.ray_limits.transport import ray_module
from inferframe.runners.ray_limits.tuning import CHUNK_SECONDS, IDLE_S, LEASE_WAIT_S, PROBE_TIMEOUT_S
from inferframe.runtime.clock import REAL, Clock
from inferframe.runtime.coordinator import learned_earlier
from inferframe.runtime.ratelimit import RateLimiter, Ticket


def _was_restarted() -> bool:
    """True in a Ray actor that Ray restarted after it died."""
    try:
        ray = ray_module()
        return bool(ray.is_initialized() and ray.get_runtime_context().was_current_actor_reconstructed)
    except Exception:  # not in an actor (an in-process LimitsActor)
        return False


class _KeyState:
    """The authoritative limits of one endpoint+model key: the cluster's RateLimiter and its shares."""

    def __init__(self, config: dict, restarted: bool, clock: Clock = REAL) -> None:
        self.limiter = RateLimiter(config.get("rpm"), config.get("tpm"))
        if restarted:  # the server's bucket may be nearly spent: a known rate starts from an empty bucket
            for bucket in (self.limiter.requests, self.limiter.tokens):
                if bucket.rate is not None:
                    bucket.level = 0.0
        self.max_concurrency = max(1, int(config.get("max_concurrency") or 1))
        self.capacity = ClusterCapacity(config, clock)  # the server's capacity, found from every worker's answers
        self.seen: dict[str, float] = {}  # worker -> when it last called
        self.share: dict[str, int] = {}  # worker -> the in-flight share it was told
        self.held: dict[str, int] = {}  # worker -> the most slots it may fill until its next call (see hold)
        self.sent: dict[str, int] = {}  # worker -> requests granted to it in all
        self.held_sum = 0
        self.pruned_at = 0.0
        self.tripped: str | None = None
        self.paused_at: float | None = None  # wall-clock time the cluster heard of its last pause (for tests)
        self.wake = asyncio.Event()  # set (and replaced) by a pause or a trip: waiting lease calls answer at once
        self.probe_since: float | None = None
        self.calls = 0
        self.granted = 0

    def interrupt(self) -> None:
        self.wake.set()
        self.wake = asyncio.Event()

    def paused_for(self, now: float) -> float:
        return max(0.0, self.limiter.paused_until - now)

    def apply(self, report: dict | None, now: float) -> None:
        """Take what one worker reports: hints, token corrections, a pause, a trip, the probe's answer."""
        if not report:
            return
        lim = self.limiter
        hint = report.get("hints")
        if hint is not None:
            values, requests, tokens, age = hint
            lim.observe(LimitHints(*values), Ticket(requests, tokens, now - age))
        if report.get("extra_tokens"):
            lim.correct(0, int(report["extra_tokens"]))
        if report.get("contradicted"):
            lim.contradicted()  # a 429 with budget left in its headers: smaller bursts for the whole cluster
        if report.get("answered"):
            # The workers' answers keep what the key knows fresh: a later job recalls it (``RateLimiter.recall``),
            # where the coordinator's own answer (the probe's) made every job after RECALL_SECONDS probe again.
            lim.heard()
        if report.get("probe_done"):
            lim.release(0, None)  # the probe answered: the other workers' leases go on
            self.probe_since = None
        if report.get("pause_s"):
            lim.pause(float(report["pause_s"]))
            self.paused_at = time.time()
            self.interrupt()
        if report.get("tripped") and self.tripped is None:
            self.tripped = str(report["tripped"])
            self.interrupt()

    def bound(self) -> int:
        """The cluster's in-flight bound: ``max_concurrency``, or the capacity found below it (``cluster_capacity``)."""
        return self.capacity.bound(self.max_concurrency, self.limiter.requests_per_second() is not None)

    def share_for(self, worker: str, now: float) -> int:
        """The in-flight share of ``worker``: the cluster's ``bound()`` split evenly among the workers that lease.

        A share shrinks at once; it grows only into capacity no other worker may still be using
        (``held``), so the requests in flight across the cluster never exceed the bound.
        """
        if now - self.pruned_at > 1.0:  # at most once a second: a lease must not cost O(workers)
            self.pruned_at = now
            for other, seen in list(self.seen.items()):
                if other != worker and now - seen > IDLE_S:
                    self.forget(other)
        self.seen[worker] = now
        bound = self.bound()
        fair = bound // len(self.seen)
        current = self.share.get(worker, 0)
        if current >= fair:
            new = fair
        else:
            others = self.held_sum - self.held.get(worker, 0)
            new = max(current, min(fair, bound - others))
        self.share[worker] = new
        # It may fill the new share once a grant reaches it: held so before this call ends (hold() then tells).
        self._set_held(worker, max(self.held.get(worker, 0), new))
        return new

    def forget(self, worker: str) -> None:
        """``worker`` left (its tasks ended, or it was silent for ``IDLE_S``): its share goes to the others."""
        self._set_held(worker, 0)
        for d in (self.seen, self.share, self.held, self.sent):
            d.pop(worker, None)
        self.capacity.forget(worker)

    def _set_held(self, worker: str, value: int) -> None:
        self.held_sum += value - self.held.get(worker, 0)
        self.held[worker] = value

    def hold(self, worker: str, report: dict, unlimited: bool) -> None:
        """Record the most slots ``worker`` may fill until its next call.

        That is its ceiling (the share it applied, the new one, or what it has in flight above them),
        and, under a counted lease, no more than the requests it can send without another grant: the
        ones in flight, its lease left, and the grants not yet received. An idle worker holds little.
        """
        # An AdaptiveLimit never bounds below one: a worker with a lease and no share yet may still send one.
        top = max(1, self.share.get(worker, 0), int(report.get("applied", 0)), int(report.get("in_flight", 0)))
        if not unlimited and not report.get("unlimited"):
            in_transit = max(0, self.sent.get(worker, 0) - int(report.get("received", 0)))
            top = min(top, int(report.get("possible", 0)) + in_transit)
        self._set_held(worker, top)

    def chunk(self, tokens: int) -> int:
        """Requests in one lease: CHUNK_SECONDS of the known rate split among the workers, at least one."""
        lim = self.limiter
        rate = lim.requests_per_second()
        if rate is None:
            return 1
        n = max(1, int(CHUNK_SECONDS * rate / max(1, len(self.seen))))
        if lim.requests.rate:
            n = min(n, max(1, int(lim.requests.capacity)))
        if lim.tokens.rate and tokens:
            n = min(n, max(1, int(lim.tokens.capacity // tokens)))
        return n



class LimitsActor:
    """The coordinator: per key, the cluster's rate limiter, pause, breaker and in-flight shares.

    Run as a Ray actor by ``start_coordinator`` (async: a lease call waits for budget without
    blocking the others); its methods are plain coroutines, so it also runs in-process.

    Example:
        >>> import asyncio
        >>> actor = LimitsActor()
        >>> actor.report_counters("w1", [{"label": "prompt[m]", "rows_done": 3}])
        >>> actor.counter_reports()
        {'w1': [{'label': 'prompt[m]', 'rows_done': 3}]}
        >>> reply = asyncio.run(actor.lease("k", "w1", {"rpm": None, "tpm": None, "max_concurrency": 4}, 10))
        >>> reply["granted"], reply["probe"]    # nothing known: this worker sends the cluster's one probe
        (1, True)
    """

    def __init__(self, clock: Clock = REAL) -> None:
        self.clock = clock  # the capacity finders' (a virtual clock in tests)
        self.keys: dict[str, _KeyState] = {}
        self.counters = CounterBoard()
        self.budgets = BudgetLedger()  # max_cost/max_tokens_budget: what each call's workers were granted
        self.calls = 0
        self.restarted = _was_restarted()

    def ping(self) -> bool:
        """True: the actor is up."""
        return True

    def _state(self, key: str, config: dict) -> _KeyState:
        st = self.keys.get(key)
        if st is None:  # the first lease's settings win, as with LocalCoordinator
            st = self.keys[key] = _KeyState(config, self.restarted, self.clock)
            # What this process's latest job at the endpoint learned (its limits, or a capacity found): no probe
            # again, no ramp from the start again (a coordinator per job: the Spark driver's, the Ray driver host's).
            finder = st.capacity.finder
            _, known = learned_earlier(key, str(config.get("account", "")), st.limiter, finder)
            if finder is not None and known is not None and finder.floor is None:
                finder.recall(known)
        return st

    async def lease(self, key: str, worker: str, config: dict, tokens: int, report: dict | None = None,
                    wait_s: float = LEASE_WAIT_S) -> dict:
        """Apply ``worker``'s report, then grant it a chunk of requests of ``tokens`` each (0: report only).

        Parameters:
            key: the endpoint+model key.
            worker: the leasing worker's id (one per LeasedLimiter).
            config: ``{"rpm", "tpm", "max_concurrency"}`` of the worker's RuntimeConfig (builds the key's
                state on the first call, and again after a restart).
            tokens: the token estimate of each request of the chunk; 0 asks for nothing.
            report: what the worker learned since its last call (see LeasedLimiter).
            wait_s: the longest this call waits for budget; it then answers with what it has.

        Returns a dict: ``granted`` requests (and ``tokens``, None when no TPM is known), ``ticket``
        (the cluster's counters at the chunk's first request), ``probe``, ``unlimited_for`` (seconds of
        free admission), ``paused_for``, ``tripped``, ``share`` (in-flight ceiling), ``rpm``/``tpm``/
        ``mean_tokens`` (what is known), ``found`` (the share splits a capacity found), ``retry_in`` (ask again after this many seconds).
        """
        self.calls += 1
        st = self._state(key, config)
        st.calls += 1
        lim = st.limiter
        now = time.monotonic()
        report = report or {}
        st.apply(report, now)
        st.capacity.observe(worker, report.get("capacity"))
        if lim.probe_out and st.probe_since is not None and now - st.probe_since > PROBE_TIMEOUT_S:
            lim.probe_lost()  # the probe's worker never answered: the next asker probes
            st.probe_since = None
        leaving = bool(report.get("idle")) and not tokens
        if leaving:  # nothing in flight and no row waiting there: its share is free now, not after IDLE_S
            st.forget(worker)
        share = 0 if leaving else st.share_for(worker, now)
        granted, first, probe, retry_in = 0, None, False, 0.0
        if tokens and st.tripped is None and st.paused_for(now) <= 0:
            if share <= 0:
                retry_in = CHUNK_SECONDS  # no in-flight share free yet: others are draining theirs
            else:
                granted, first, probe = await self._grant(st, st.chunk(tokens), tokens, wait_s)
        now = time.monotonic()
        unlimited = bool(granted and not probe and lim.requests_per_second() is None)
        if not leaving:
            st.seen[worker] = now
            if granted:
                st.granted += granted
                st.sent[worker] = st.sent.get(worker, 0) + granted
            share = st.share.get(worker, 0)  # another call of this worker may have moved it while this one waited
            st.hold(worker, report, unlimited)
        return {
            "granted": granted,
            "tokens": granted * tokens if lim.tokens.rate is not None else None,
            "ticket": (first.requests, first.tokens) if first is not None else (0.0, 0.0),
            "probe": probe,
            "unlimited_for": CHUNK_SECONDS if unlimited else 0.0,
            "paused_for": st.paused_for(now),
            "tripped": st.tripped,
            "share": share,
            "found": st.capacity.found,
            "rpm": lim.requests.rate,
            "tpm": lim.tokens.rate,
            "mean_tokens": lim.mean_tokens,
            "retry_in": retry_in,
        }

    async def _grant(self, st: _KeyState, n: int, tokens: int, wait_s: float) -> tuple[int, Ticket | None, bool]:
        """Admit ``n`` requests through the key's RateLimiter (the local runtime's own admission).

        Stops early, granting nothing, when a pause or a trip interrupts; after ``wait_s`` it grants
        what it has.
        """
        lim = st.limiter
        got: list[Ticket] = []
        probe = []

        async def take() -> None:
            for i in range(n):
                got.append(await lim.acquire(tokens))  # about 9 us each when budget is there
                if i == 0 and lim.probe_out:
                    probe.append(True)  # admitted as the cluster's one probe: nothing more until it answers
                    return
                if i % 256 == 255:
                    await asyncio.sleep(0)  # a large chunk must not hold the other calls up

        wake = st.wake
        taking = asyncio.ensure_future(take())
        waking = asyncio.ensure_future(wake.wait())
        done, _ = await asyncio.wait({taking, waking}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        waking.cancel()
        if taking not in done:
            taking.cancel()
            try:
                await taking
            except asyncio.CancelledError:
                pass
        if wake.is_set():  # a pause or a trip: what was taken before it is dropped, as a local pause drops the bucket
            return 0, None, False
        if probe:
            st.probe_since = time.monotonic()
        return len(got), (got[0] if got else None), bool(probe)

    def grant_budget(self, key: str, max_cost: float | None, max_tokens: int | None, cost: float, tokens: int) -> list:
        """Grant a worker up to (``cost``, ``tokens``) more of the call ``key``'s budget (``budget_grants``)."""
        return self.budgets.grant(key, max_cost, max_tokens, cost, tokens)

    def report_counters(self, source: str, snapshots: list[dict], seq: int | None = None) -> None:
        """Keep ``source``'s latest counter snapshots (cumulative: a later ``seq`` replaces an earlier one)."""
        self.counters.report(source, snapshots, seq)

    def counter_reports(self) -> dict[str, list[dict]]:
        """Every source's latest snapshots, for ``RunCounters.merge`` on the driver."""
        return self.counters.reports()

    def describe(self, key: str | None = None) -> dict:
        """What the actor knows (for tests and benchmarks): calls, and per key its rate, shares and state."""
        now = time.monotonic()
        keys = {}
        for k, st in self.keys.items():
            if key is not None and k != key:
                continue
            lim = st.limiter
            keys[k] = {"rpm": lim.requests.rate, "tpm": lim.tokens.rate, "level": lim.requests.level,
                       "sent": lim.requests.sent, "paused_for": st.paused_for(now), "paused_at": st.paused_at,
                       "tripped": st.tripped, "shares": dict(st.share), "held": dict(st.held), "workers": len(st.seen),
                       "bound": st.bound(), "found": st.capacity.found, "capacity": list(st.capacity.history),
                       "floor": st.capacity.floor,
                       "calls": st.calls, "granted": st.granted}
        return {"calls": self.calls, "restarted": self.restarted, "keys": keys}

