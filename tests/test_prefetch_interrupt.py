"""Ctrl-C that lands inside ``prefetch``'s wait on its queue is the user's KeyboardInterrupt, not a RuntimeError.

CPython 3.11's ``Condition.wait`` can take a KeyboardInterrupt between releasing and re-taking its lock; the queue's
``with self.not_empty`` then fails with "release unlocked lock", whose context is the interrupt. Seen once in a full
run (tests/test_quiet_output.py: exit 1 and the executor's frames instead of Python's 130).
"""

from __future__ import annotations

import queue

import pyarrow as pa
import pytest

from inferframe.execution.context import ExecContext
from inferframe.execution.stream import prefetch


def test_an_interrupt_inside_the_queue_wait_is_raised_as_the_keyboardinterrupt(monkeypatch):
    def interrupted_get(self, block=True, timeout=None):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("release unlocked lock")  # as threading's Condition.__exit__ raises it

    ctx = ExecContext()
    monkeypatch.setattr(queue.Queue, "get", interrupted_get)
    batches = prefetch(iter([pa.record_batch({"x": [1]})]), ctx)
    with pytest.raises(KeyboardInterrupt):
        next(batches)
    ctx.stop.set()


def test_another_runtime_error_of_the_wait_is_not_taken_for_an_interrupt(monkeypatch):
    def broken_get(self, block=True, timeout=None):
        raise RuntimeError("something else")

    ctx = ExecContext()
    monkeypatch.setattr(queue.Queue, "get", broken_get)
    with pytest.raises(RuntimeError, match="something else"):
        next(prefetch(iter([pa.record_batch({"x": [1]})]), ctx))
    ctx.stop.set()
