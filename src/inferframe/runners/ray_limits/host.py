"""One actor serving every job of a driver: each job's calls reach an instance of their own in it.

A Ray actor is a worker process: starting one costs a Python start and an import of inferframe
(2.2 s of CPU apiece on a 2-core machine, measured over the Ray tests: 44 jobs started 88). A job
used to start two (its coordinator and its state) and kill them at its end, so a sem_topk of
several rounds, a job each, paid them every round. A host starts once per driver and is kept: a
job is a key in it, its state an instance of the hosted class made on its first call and dropped
by ``end``, so one job never sees another's counters, budgets or keys.

Example (the host's logic in-process; in a job it is a Ray actor):
    >>> import asyncio
    >>> class Counter:
    ...     def __init__(self): self.n = 0
    ...     def add(self, k): self.n += k; return self.n
    >>> host = JobScopes(Counter)
    >>> asyncio.run(host.call("a", "add", 2)), asyncio.run(host.call("a", "add", 3)), asyncio.run(host.call("b", "add", 1))
    (2, 5, 1)
    >>> host.end("a"); host.open_jobs()
    ['b']
"""

from __future__ import annotations

import inspect
import threading
import uuid
from typing import Any

from inferframe.runners.ray_limits.transport import ray_module


class JobScopes:
    """A Ray actor body: per job id, one instance of ``kind`` (made on the job's first call).

    Parameters:
        kind: the class of a job's state (``LimitsActor``, the runner's job state); called with no arguments.
    """

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.jobs: dict[str, Any] = {}

    def ping(self) -> bool:
        """True: the host is up."""
        return True

    async def call(self, job: str, method: str, *args) -> Any:
        """``method(*args)`` on ``job``'s instance (awaited where it is a coroutine)."""
        target = self.jobs.get(job)
        if target is None:  # after a restart too: the job's state starts again empty, as a restarted actor's did
            target = self.jobs[job] = self.kind()
        out = getattr(target, method)(*args)
        return await out if inspect.isawaitable(out) else out

    def end(self, job: str) -> None:
        """Drop ``job``'s instance (its job ended)."""
        self.jobs.pop(job, None)

    def open_jobs(self) -> list[str]:
        """The ids of the jobs with state here (for tests)."""
        return sorted(self.jobs)


_HOSTS: dict[tuple[str, str, str], tuple[Any, str]] = {}  # cache: this driver's hosts, by (Ray session, job id, role)
_HOSTS_LOCK = threading.Lock()


def _key(ray: Any, role: str) -> tuple[str, str, str]:
    # A driver's job ids restart at 1 in every new cluster (ray.shutdown, ray.init): the session tells them apart.
    context = ray.get_runtime_context()
    return context.get_session_name(), context.get_job_id(), role


def driver_host(role: str, kind: type, **options) -> tuple[Any, str]:
    """The driver's ``JobScopes`` host of ``kind`` for ``role``: (handle, name), started on first use.

    Owned by this driver (it ends with it), named ``inferframe-<role>-<id>`` in the driver's namespace so that
    workers can look it up. A host found dead is the caller's to ``forget_host``; the next call starts another.

    Parameters:
        role: what the host is for ("limits", "state"): one host per role and Ray session of the driver.
        kind: the class of a job's state in it.
        options: Ray actor options (restarts, placement, concurrency).
    """
    ray = ray_module()
    key = _key(ray, role)
    with _HOSTS_LOCK:
        found = _HOSTS.get(key)
        if found is None:
            name = f"inferframe-{role}-{uuid.uuid4().hex[:12]}"
            handle = ray.remote(JobScopes).options(name=name, namespace=ray.get_runtime_context().namespace, num_cpus=0,
                                                   **options).remote(kind)
            found = _HOSTS[key] = (handle, name)
        return found


def forget_host(role: str) -> None:
    """Stop using this driver's ``role`` host (it died, or does not answer): the next job starts a new one."""
    ray = ray_module()
    with _HOSTS_LOCK:
        found = _HOSTS.pop(_key(ray, role), None)
    if found is not None:
        try:
            ray.kill(found[0], no_restart=True)
        except Exception:  # already gone
            pass
