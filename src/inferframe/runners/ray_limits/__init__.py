"""Rate limits shared by every Ray worker of a job: one coordinator actor leases budget in chunks.

What "shared" means: per endpoint+model key (``AICallConfig.limits_key``: the same key the local
``LocalCoordinator`` uses) the whole cluster has ONE requests/tokens-per-minute budget, ONE 429
pause, ONE bound on requests in flight (``max_concurrency``) and ONE breaker, however many worker
processes run the job. The authoritative state lives in one Ray actor (``LimitsActor``, started by
``start_coordinator`` on the driver); each worker holds a ``LeasedLimiter`` that spends a local
lease and asks the actor for the next chunk before the lease runs out, so the actor is called about
once per chunk, not once per request. The actor runs the very ``RateLimiter`` the local runtime
uses (its buckets, learning from the server's limit hints, Retry-After pauses, first-request probe):
every worker's requests are admitted by it, a chunk at a time.

Chunk size: about ``CHUNK_SECONDS`` (100 ms) of the known rate per worker: ``rate x 0.1 s / workers
leasing``, at least one request (and never more than the bucket holds). At 1,200 RPM and 4 workers a
chunk is one request; at 10,000 requests/s and 100 workers it is 10 requests. With no limit known
(none set, no hints yet) the cluster behaves as one ``RateLimiter``: ONE probe request in the whole
cluster until its answer's hints arrive, then (if the server names no limit) leases of 100 ms of
free admission.

What travels with the next lease call (batched, not one call per event): the newest limit hints,
token corrections (usage beyond the estimate), the worker's in-flight count, and its answers' latencies
for the cluster's one capacity finder (``cluster_capacity``). What goes at once
(its own call): a 429's pause, a tripped breaker, the probe's answer. Only a 429 that shows the
budget spent pauses (its headers say nothing is left, or a storm of them without headers: the
local runtime's rule, ``RateLimiter.on_429``, decided in the worker that got it); an isolated 429
retries its own row after its Retry-After, and goes at once as a fact that the server holds less
than its headers say (``contradicted``: the cluster's burst shrinks, its rate stays). Every reply carries the
paused-until time, the breaker's state and the worker's in-flight share, so a 429 or a trip anywhere
reaches every other worker within about one chunk's time: a worker waiting for budget is answered
at once, a worker with budget left learns it at its next lease (at most one chunk later), and drops
what is left of its lease.

In-flight bound: the actor splits ``max_concurrency`` (or, below it, the server's capacity found by its
one ``CapacityFinder`` from every worker's answers: ``cluster_capacity``) among the workers that lease for the key; each
worker's ``AdaptiveLimit`` ceiling is its share, and capacity moves to another worker only once the
worker that gives it up cannot fill it (it drained below its new share, or its lease lets it send
fewer), so the requests in flight across the cluster never exceed ``max_concurrency`` (with more
workers than ``max_concurrency``, the extra workers wait for a share). A worker silent for ``IDLE_S`` seconds (with nothing in flight: one with
requests in flight checks in every ``IDLE_S / 3``) gives its share back; one whose requests ended (nothing in flight
or asked for ``IDLE_GRACE_S``) gives it back at once, so the next task's worker does not wait ``IDLE_S`` for it.

When the coordinator dies: Ray restarts it (``max_restarts=-1``; calls in flight are retried) with
EMPTY state. Budgets restart conservatively: a user-set rpm/tpm is known again from the config every
lease call carries, with an empty bucket; a learned limit is learned again (one probe request for the
whole cluster, then the hints). Leases the workers already hold are spent as granted; the in-flight
shares are rebuilt from the workers' next calls (until each has called once, about one chunk's time,
the bound is not enforced across workers). If it cannot be reached (killed for good, or no answer
within ``call_timeout_s``, 30 s by default), the worker raises ``ServiceError`` with one message
instead of hanging.

Why hand-written: Ray has no shared (cluster-wide) rate limiter, so the lease protocol is ours.

Example (the actor's logic runs in-process here; in a job it is a Ray actor):
    >>> import asyncio
    >>> actor = LimitsActor()
    >>> cfg = {"rpm": 600, "tpm": None, "max_concurrency": 8}
    >>> async def two_workers():
    ...     a = await actor.lease("openai:https://x/v1|gpt-5", "w1", cfg, 20)
    ...     b = await actor.lease("openai:https://x/v1|gpt-5", "w2", cfg, 20)
    ...     return a["granted"], a["share"], b["granted"], b["share"]
    >>> asyncio.run(two_workers())   # a chunk is one request at 10/s; w1 holds one of its 8 slots until it calls again
    (1, 8, 1, 4)
"""

from inferframe.runners.ray_limits.actor import LimitsActor
from inferframe.runners.ray_limits.coordinator import RayCoordinator, driver_coordinator, start_coordinator
from inferframe.runners.ray_limits.host import JobScopes, driver_host, forget_host
from inferframe.runners.ray_limits.limits import LeasedLimiter, SharedBreaker, SharedSlots, shared_breaker, shared_slots
from inferframe.runners.ray_limits.tuning import (CALL_TIMEOUT_S, CHUNK_SECONDS, IDLE_S, LEASE_WAIT_S, MAX_CALLS_IN_FLIGHT,
                                                  PROBE_TIMEOUT_S)

__all__ = ["CALL_TIMEOUT_S", "CHUNK_SECONDS", "IDLE_S", "LEASE_WAIT_S", "JobScopes", "LimitsActor", "LeasedLimiter",
           "MAX_CALLS_IN_FLIGHT", "PROBE_TIMEOUT_S", "RayCoordinator", "SharedBreaker", "SharedSlots",
           "driver_coordinator", "driver_host", "forget_host", "shared_breaker", "shared_slots",
           "start_coordinator"]
