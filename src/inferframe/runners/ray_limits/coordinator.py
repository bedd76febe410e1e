"""The Ray runner's coordinator: the shared limits of every worker of a job, from one named actor."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from inferframe.observe.stats import RunCounters
from inferframe.runners.ray_limits.actor import LimitsActor
from inferframe.runners.ray_limits.budget_grants import BudgetGrants
from inferframe.runners.ray_limits.host import driver_host
from inferframe.runners.ray_limits.limits import LeasedLimiter, shared_breaker, shared_slots
from inferframe.runners.ray_limits.relay import CounterRelay
from inferframe.runners.ray_limits.transport import ActorLink, ray_module
from inferframe.runners.ray_limits.tuning import CALL_TIMEOUT_S, MAX_CALLS_IN_FLIGHT
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.coordinator import SharedLimits


class RayCoordinator:
    """Shared limits for every Ray worker of a job, from one coordinator actor (see ``runners.ray_limits``).

    It satisfies ``runtime.coordinator.Coordinator``; it also relays the workers' counters to the driver.

    Picklable: it travels to the workers as the actor's name and namespace and reconnects there. Each
    unpickled copy hands out one SharedLimits per key (a worker process unpickles it once).

    Parameters:
        name / namespace: the coordinator actor's name and Ray namespace.
        call_timeout_s: the bound on every actor call; past it, ServiceError.
        handle: the actor's handle (the driver's, which keeps the actor alive).
        job: the actor is the driver's ``JobScopes`` host of ``LimitsActor`` (``driver_coordinator``) and this is
            the job's id in it; None: the actor is the job's own ``LimitsActor``.

    Example (needs a running Ray cluster):
        >>> coord = start_coordinator()  # doctest: +SKIP
        >>> limits = coord.limits("openai:https://x/v1|gpt-5", RuntimeConfig(rpm=600))  # doctest: +SKIP
        >>> coord.close()  # doctest: +SKIP
    """

    def __init__(self, name: str, namespace: str | None, *, call_timeout_s: float = CALL_TIMEOUT_S,
                 handle: Any = None, job: str | None = None) -> None:
        self.name, self.namespace, self.call_timeout_s, self.job = name, namespace, call_timeout_s, job
        self._owner = handle is not None
        self._link = ActorLink(name, namespace, call_timeout_s, handle, job)
        self._relay = CounterRelay(self._link)
        self._limits: dict[str, SharedLimits] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"name": self.name, "namespace": self.namespace, "call_timeout_s": self.call_timeout_s, "job": self.job}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["name"], state["namespace"], call_timeout_s=state["call_timeout_s"], job=state["job"])

    @property
    def handle(self) -> Any:
        """The coordinator actor's handle (looked up by name in a worker)."""
        return self._link.handle_now()

    def limits(self, key: str, config: RuntimeConfig, account: str = "") -> SharedLimits:
        """The leased limits of ``key`` in this process (built from ``config`` the first time; no call yet).

        ``account`` (the key's fingerprint) goes with its leases: the cluster's coordinator holds what its workers
        learned, and a later job's starts from it.
        """
        with self._lock:
            found = self._limits.get(key)
            if found is None:
                slots, breaker = shared_slots(config), shared_breaker()
                limiter = LeasedLimiter(self._link, key, config, slots, breaker, account)
                found = self._limits[key] = SharedLimits(limiter, slots, breaker, BudgetGrants(self._link, key))
            return found

    def report_counters(self, source: str, snapshots: list[dict], seq: int | None = None) -> Any:
        """Send ``source``'s counter snapshots (its ``seq``-th report) to the coordinator; returns at once."""
        return self._relay.send(source, snapshots, seq)

    def counter_reports(self) -> dict[str, list[dict]]:
        """Every worker's latest counter snapshots (driver; blocking): merge them with ``RunCounters.merge``."""
        return self._relay.collect()

    def merge_counters(self, counters: RunCounters) -> None:
        """Merge every worker's latest counters into ``counters`` (driver; blocking)."""
        self._relay.merge_into(counters)

    def describe(self, key: str | None = None) -> dict:
        """The actor's view (driver; blocking): calls, and per key the rate, shares, pause and breaker."""
        return self._link.get("describe", key)

    def started(self) -> None:
        """Wait until the actor answers (driver; blocking): up and named before any worker looks it up.

        Its first start spawns a worker process, which a busy node takes seconds for: the start gets its
        own bound, the calls after it the call bound.
        """
        self._link.get("ping", timeout=max(self.call_timeout_s, START_TIMEOUT_S))

    def close(self) -> None:
        """End the job's coordinator (the driver, when the job ends): its state in the driver's host, or its own
        actor; a worker's copy does nothing."""
        if self._owner and self._link.handle is not None and self.job is not None:
            try:
                self._link.handle.end.remote(self.job)  # the host stays for the driver's next job
            except Exception:  # the host is gone: so is the job's state
                pass
            self._link.handle = None
        elif self._owner and self._link.handle is not None:
            try:
                ray_module().kill(self._link.handle, no_restart=True)
            except Exception:  # already gone
                pass
            self._link.handle = None



_ACTOR_CLASS = None  # the Ray actor class, made once per process


START_TIMEOUT_S = 60.0  # the bound on the actor's first start


def _actor_class():
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = ray_module().remote(LimitsActor)
    return _ACTOR_CLASS


def start_coordinator(name: str | None = None, *, call_timeout_s: float = CALL_TIMEOUT_S,
                      wait: bool = True) -> RayCoordinator:
    """Start the job's coordinator actor (on the driver) and return the RayCoordinator to hand to workers.

    The actor is named (workers find it by name), owned by this driver (it ends with it), restarted by
    Ray if it dies (``max_restarts=-1``; with empty state, see the module docstring), and takes no CPU.

    Parameters:
        name: the actor's name (None: a fresh ``inferframe-limits-<id>``).
        call_timeout_s: the bound on every call to it; past it the workers raise ServiceError.
        wait: wait here until the actor answers (False: the caller calls ``coordinator.started()``, so
            that the start of another actor, which also spawns a worker process, overlaps this one's).

    Example (needs a running Ray cluster):
        >>> coord = start_coordinator("inferframe-job-1")  # doctest: +SKIP
        >>> coord.close()  # doctest: +SKIP
    """
    ray = ray_module()
    if not ray.is_initialized():
        ray.init()
    name = name or f"inferframe-limits-{uuid.uuid4().hex[:12]}"
    namespace = ray.get_runtime_context().namespace
    handle = _actor_class().options(name=name, namespace=namespace, max_restarts=-1, max_task_retries=-1,
                                    num_cpus=0, max_concurrency=MAX_CALLS_IN_FLIGHT).remote()
    coordinator = RayCoordinator(name, namespace, call_timeout_s=call_timeout_s, handle=handle)
    if wait:
        coordinator.started()
    return coordinator


def driver_coordinator(job: str, *, call_timeout_s: float = CALL_TIMEOUT_S) -> RayCoordinator:
    """The coordinator of the driver's job ``job``: its own ``LimitsActor`` in the driver's host (``host``),
    which its first job starts and the next ones reuse (no worker process to spawn per job). Not waited for:
    the caller calls ``started()``, which also tells a dead host (``forget_host("limits")`` then)."""
    handle, name = driver_host("limits", LimitsActor, max_restarts=-1, max_task_retries=-1,
                               max_concurrency=MAX_CALLS_IN_FLIGHT)
    return RayCoordinator(name, ray_module().get_runtime_context().namespace, call_timeout_s=call_timeout_s,
                          handle=handle, job=job)
