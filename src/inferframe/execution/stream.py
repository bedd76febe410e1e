"""Bounded hand-off between stages: a producer thread feeding a small queue.

Putting one of these between stages lets reading, UDF work and writing overlap
while the queue bound keeps memory flat.
"""

from __future__ import annotations

import queue
from typing import Iterator

import pyarrow as pa

from inferframe.execution.context import Cancelled, ExecContext

_DONE = object()


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def prefetch(source: Iterator[pa.RecordBatch], ctx: ExecContext, maxsize: int = 2, name: str = "stage") -> Iterator[pa.RecordBatch]:
    """Run ``source`` in its own thread, buffering at most ``maxsize`` batches.

    Parameters:
        source: the upstream iterator (runs entirely in the new thread).
        ctx: the run's context; setting ``ctx.stop`` ends the thread promptly.
        maxsize: batches buffered ahead of the consumer.
    """
    q: queue.Queue = queue.Queue(maxsize=maxsize)

    def put(item) -> bool:
        while not ctx.stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for batch in source:
                if not put(batch):
                    break
            else:
                put(_DONE)
        except Cancelled:
            put(_DONE)
        except BaseException as e:  # handed to the consumer, who re-raises it
            put(_Failure(e))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass

    ctx.start_thread(run, f"inferframe-{name}")
    while True:
        try:
            item = q.get(timeout=0.05)
        except queue.Empty:
            if ctx.stop.is_set():
                raise Cancelled()
            continue
        except RuntimeError as e:
            # Ctrl-C that lands inside the queue's Condition.wait (CPython 3.11: between its lock's release and
            # re-acquire) surfaces as "release unlocked lock" with the KeyboardInterrupt as its context: the user
            # pressed Ctrl-C, so that is what is raised (seen once in a full run: exit 1 and the executor's frames).
            if isinstance(e.__context__, KeyboardInterrupt):
                raise e.__context__ from None
            raise
        if item is _DONE:
            return
        if isinstance(item, _Failure):
            raise item.exc
        yield item
