"""Model-class instances for one run: built lazily, up to ``max_concurrency``, one morsel at a time each.

Also decides which GPUs each worker process may see.

Example:
    >>> gpu_slots(1, 1, ["0", "1"])
    ['1']
"""

from __future__ import annotations

import math
import os
import queue
import shutil
import threading

from inferframe.errors import UDFError, warn_user
from inferframe.execution.context import Cancelled, ExecContext


def _gpu_available() -> bool:
    return bool(shutil.which("nvidia-smi")) or os.path.exists("/dev/nvidia0")


def visible_gpus() -> list[str]:
    """The GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else the devices present."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [g.strip() for g in env.split(",") if g.strip()]
        # CUDA stops at the first invalid id; "-1" is the usual way to hide every GPU.
        out = []
        for g in ids:
            if g.startswith("-"):
                break
            out.append(g)
        return out
    try:
        names = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        names = []
    return [n[6:] for n in names]


def gpu_slots(gpus: float, index: int, visible: list[str]) -> list[str]:
    """The GPUs instance ``index`` gets when each instance asks for ``gpus`` of them.

    Whole GPUs go to instances in turn (instance 0 gets the first ``gpus``, and so on);
    fractions pack several instances onto one GPU. Past the last GPU it wraps around.

    Example:
        >>> gpu_slots(1, 1, ["0", "1"]), gpu_slots(2, 1, ["0", "1", "2", "3"]), gpu_slots(0.5, 1, ["0", "1"])
        (['1'], ['2', '3'], ['0'])
    """
    if not visible or gpus <= 0:
        return []
    if gpus >= 1:
        k = math.ceil(gpus)
        return [visible[(index * k + j) % len(visible)] for j in range(min(k, len(visible)))]
    per_gpu = max(1, int(1 / gpus))
    return [visible[(index // per_gpu) % len(visible)]]


class InstancePool:
    """Up to ``size`` instances of one model class, built lazily, each used by one morsel at a time.

    Worker processes (``use_process=True``) are started side by side, so several
    slow model loads overlap instead of queueing; in-process instances are
    built one at a time, as libraries are not all safe to initialise from
    several threads at once. With ``use_process=True`` and ``gpus`` set, each
    instance's process sees only its own GPUs (``CUDA_VISIBLE_DEVICES``).
    """

    def __init__(self, owner, ctx: ExecContext, *, in_loop: bool) -> None:
        self.owner = owner
        self.ctx = ctx
        self.size = owner.max_concurrency or 1
        self.in_loop = in_loop
        self._free: queue.Queue = queue.Queue()
        self._all: list = []
        self._starting: list = []  # worker processes still running __init__
        self._slots = 0  # instances built or being built
        self._closed = False
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()  # in-process __init__ calls, one at a time
        self._gpus = visible_gpus() if owner.gpus and owner.use_process else []
        ctx.on_close(self.close)
        if owner.gpus and not _gpu_available():
            warn_user(
                f"{owner.cls.__name__} asks for gpus={owner.gpus}, but this machine has no GPU; it runs on the CPU.", RuntimeWarning)
        elif self._gpus and owner.gpus * self.size > len(self._gpus):
            warn_user(
                f"{owner.cls.__name__} asks for gpus={owner.gpus} for each of up to {self.size} instances, "
                f"but only {len(self._gpus)} GPU(s) are visible; instances will share GPUs.", RuntimeWarning)

    def _build(self, index: int):
        if self.owner.use_process:
            from inferframe.execution.process_worker import ProcessInstance

            slots = gpu_slots(self.owner.gpus, index, self._gpus)
            # Keys reach the worker through its environment, from the runner (never through a pickle).
            services = self.ctx.services  # the runner's RunServices, or None for a bare run
            secrets = services.worker_env if services is not None else None
            env = dict(secrets() if secrets is not None else {})
            if slots:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(slots)
            counters = services.counters if services is not None else None
            inst = ProcessInstance(self.owner, env=env, start=False, counters=counters)
            with self._lock:
                self._starting.append(inst)
                closed = self._closed
            try:
                if closed:
                    raise Cancelled()
                inst.start()
            except BaseException:
                inst.close_process()
                raise
            finally:
                with self._lock:
                    self._starting.remove(inst)
            return inst
        with self._build_lock:
            if self.in_loop:
                # Built on the loop thread so clients made in __init__ bind to the loop that runs them.
                return self.ctx.event_loop.call(self._construct)
            return self._construct()

    def _construct(self):
        """Build one instance; a class with ``for_run`` gets the run's services (shared limits, counters)."""
        for_run = getattr(self.owner.cls, "for_run", None)
        if for_run is not None:
            return for_run(self.ctx.services, *self.owner.args, **self.owner.kwargs)
        return self.owner.build()

    def acquire(self):
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            index = self._slots if self._slots < self.size else None
            if index is not None:
                self._slots += 1
        if index is not None:
            try:
                inst = self._build(index)
            except (UDFError, Cancelled):
                raise
            except Exception as e:
                raise UDFError(f"{self.owner.cls.__name__}.__init__ failed: {type(e).__name__}: {e}") from e
            with self._lock:
                closed = self._closed
                if not closed:
                    self._all.append(inst)
            if closed:
                # The run stopped while this one was being built: close() has already gone by.
                close = getattr(inst, "close_process", None)
                if close is not None:
                    close()
                raise Cancelled()
            return inst
        while True:
            try:
                return self._free.get(timeout=0.1)
            except queue.Empty:
                self.ctx.check()

    def pick(self):
        """Round-robin over up to ``size`` shared instances (async code may share one instance).

        Called on the loop thread, so instances are built right there with the loop running.
        """
        with self._lock:
            if len(self._all) < self.size:
                self._slots += 1
                try:
                    self._all.append(self._construct())
                except Exception as e:
                    raise UDFError(f"{self.owner.cls.__name__}.__init__ failed: {type(e).__name__}: {e}") from e
                return self._all[-1]
            self._next = (getattr(self, "_next", -1) + 1) % len(self._all)
            return self._all[self._next]

    def release(self, inst) -> None:
        self._free.put(inst)

    def instances(self) -> list:
        with self._lock:
            return list(self._all)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            starting = list(self._starting)
        for inst in starting:
            inst.close_process()  # its start() then raises Cancelled
        for inst in self.instances():
            close = getattr(inst, "close_process", None)
            if close is not None:
                close()
            aclose = getattr(inst, "aclose", None)
            if self.in_loop and aclose is not None:
                try:
                    self.ctx.event_loop.submit(aclose()).result(timeout=5)
                except Exception:
                    pass


def pool_for(owner, ctx: ExecContext, *, in_loop: bool) -> InstancePool:
    key = ("pool", id(owner))
    with ctx._lock:
        pool = ctx.shared.get(key)
    if pool is None:
        pool = InstancePool(owner, ctx, in_loop=in_loop)
        with ctx._lock:
            pool = ctx.shared.setdefault(key, pool)
    return pool
