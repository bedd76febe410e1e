"""Calls to the coordinator actor: bounded in time, reconnecting by name, failing with one clear error."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from inferframe.errors import ServiceError
from inferframe.runners.ray_limits.tuning import LEASE_WAIT_S


def ray_module():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the install has it
        raise ImportError("The Ray runner needs ray: pip install 'inferframe[ray]'.") from e
    return ray



class ActorLink:
    """The connection to the coordinator actor: bounded calls, reconnection by name, one clear error.

    ``job``: the actor is a ``JobScopes`` host (``ray_limits.host``) and every call goes to this job's state in it.
    """

    def __init__(self, name: str, namespace: str | None, timeout: float, handle: Any = None,
                 job: str | None = None) -> None:
        self.name, self.namespace, self.timeout, self.job = name, namespace, timeout, job
        self.wait_s = min(LEASE_WAIT_S, timeout / 3)
        self.handle = handle

    def send(self, method: str, *args) -> Any:
        """``actor.method.remote(*args)``: the call's ObjectRef at once, unanswered (fire and forget)."""
        return self._remote(self.handle_now(), method, args)

    def _remote(self, handle: Any, method: str, args: tuple) -> Any:
        if self.job is None:
            return getattr(handle, method).remote(*args)
        return handle.call.remote(self.job, method, *args)

    def unreachable(self, why: str) -> ServiceError:
        return ServiceError(
            f"The rate-limit coordinator of this job (Ray actor {self.name!r} in namespace {self.namespace!r}) "
            f"cannot be reached: {why}. It shares the job's rate limits among the workers; the job stops.")

    def _lookup(self) -> Any:
        ray = ray_module()
        try:
            return ray.get_actor(self.name, namespace=self.namespace)
        except ValueError:
            raise self.unreachable("no actor of that name is alive (it died for good, or the job ended)") from None

    def handle_now(self) -> Any:
        """The actor's handle (looked up by name the first time in this process; blocks briefly)."""
        if self.handle is None:
            self.handle = self._lookup()
        return self.handle

    async def call(self, method: str, *args) -> Any:
        """``await actor.method.remote(*args)`` within the timeout; a restart in between is waited for."""
        ray = ray_module()
        deadline = time.monotonic() + self.timeout
        while True:
            if self.handle is None:
                self.handle = await asyncio.to_thread(self._lookup)
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.unreachable(f"no answer within {self.timeout:g} s")
            try:
                return await asyncio.wait_for(self._remote(self.handle, method, args), left)
            except asyncio.TimeoutError:
                raise self.unreachable(f"no answer within {self.timeout:g} s") from None
            except ray.exceptions.ActorDiedError:  # restartable actors are waited for: this one is gone
                raise self.unreachable("the actor died and is not restarted") from None
            except ray.exceptions.RayActorError:  # restarting: try again until the deadline
                await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def get(self, method: str, *args, timeout: float | None = None) -> Any:
        """The blocking form of ``call``, for the driver (never on an event loop); ``timeout`` overrides the bound."""
        ray = ray_module()
        timeout = self.timeout if timeout is None else timeout
        try:
            return ray.get(self._remote(self.handle_now(), method, args), timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise self.unreachable(f"no answer within {timeout:g} s") from None
        except ray.exceptions.RayActorError as e:
            raise self.unreachable(f"{type(e).__name__}") from None

