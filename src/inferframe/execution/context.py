"""Per-run execution context: cancellation, the shared event loop, stage threads."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import sys
import threading
from typing import Any, Callable


class Cancelled(Exception):
    """Raised inside a stage when the run is being stopped."""


class EventLoopThread:
    """One asyncio loop in a daemon thread, shared by every async UDF of a run.

    Async user code always runs on this loop, so clients built in ``__init__``
    and used in methods see one running loop, never a new one per batch.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="inferframe-event-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro) -> cf.Future:
        """Run ``coro`` on the loop; a concurrent Future for its result that cancels the task when cancelled.

        Like ``asyncio.run_coroutine_threadsafe``, except that an error the task raises after its
        caller cancelled the Future (the job already stopped with its own error) is retrieved here,
        not logged at garbage collection as "Task exception was never retrieved".
        """
        result: cf.Future = cf.Future()

        def finish(task: asyncio.Task) -> None:
            if task.cancelled():
                result.cancel()
                return
            error = task.exception()
            if not result.set_running_or_notify_cancel():
                return
            if error is not None:
                result.set_exception(error)
            else:
                result.set_result(task.result())

        def cancel_task(task: asyncio.Task) -> None:
            if result.cancelled() and not self.loop.is_closed():
                self.loop.call_soon_threadsafe(task.cancel)

        def start() -> None:
            if result.cancelled():
                coro.close()
                return
            task = self.loop.create_task(coro)
            task.add_done_callback(finish)
            result.add_done_callback(lambda _: cancel_task(task))

        self.loop.call_soon_threadsafe(start)
        return result

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run a plain callable on the loop thread (e.g. a constructor that needs a running loop)."""

        async def run():
            return fn()

        return self.submit(run()).result()

    def close(self) -> None:
        if self.loop.is_closed():
            return

        async def shutdown():
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.submit(shutdown()).result(timeout=5)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


class ExecContext:
    """State shared by every operator of one run.

    Parameters:
        morsel_size: target rows per batch for row-wise work.
        services: what the runner shares with the operators of this run (the coordinator of shared
            limits, the counters); opaque to the executor, handed to classes that ask for it.
    """

    def __init__(self, morsel_size: int = 8192, services: Any = None) -> None:
        self.stop = threading.Event()
        self.morsel_size = morsel_size
        self.services = services
        self._loop: EventLoopThread | None = None
        self._lock = threading.Lock()
        self._closers: list[Callable[[], None]] = []
        self._threads: list[threading.Thread] = []
        self.shared: dict[Any, Any] = {}

    @property
    def event_loop(self) -> EventLoopThread:
        with self._lock:
            if self._loop is None:
                self._loop = EventLoopThread()
            return self._loop

    def on_close(self, fn: Callable[[], None]) -> None:
        with self._lock:
            self._closers.append(fn)

    def start_thread(self, target: Callable[[], None], name: str) -> threading.Thread:
        t = threading.Thread(target=target, name=name, daemon=True)
        with self._lock:
            self._threads.append(t)
        t.start()
        return t

    def check(self) -> None:
        if self.stop.is_set():
            raise Cancelled()

    def close(self) -> None:
        """Stop every stage, join threads, release pools and the loop. Safe to call twice."""
        self.stop.set()
        if sys.is_finalizing():  # a stream left unread at exit: no thread runs again; waiting held the exit 10 s
            return
        with self._lock:
            closers, self._closers = self._closers[::-1], []
            threads, self._threads = self._threads, []
        # Release pools and the loop first so stage threads blocked on them wake up.
        for fn in closers:
            try:
                fn()
            except Exception:
                pass
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        for t in threads:
            if t is not threading.current_thread():
                t.join(timeout=10)
