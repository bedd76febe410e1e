"""An async row UDF's worker coroutines end with the job: none is left pending for the garbage collector."""

from __future__ import annotations

import asyncio
import gc
import logging

import inferframe as ifr


def _run_job(n: int, concurrency: int) -> list:
    @ifr.func(max_concurrency=concurrency)
    async def shout(x: str) -> str:
        await asyncio.sleep(0)
        return x + "!"

    df = ifr.from_pydict({"x": [str(i) for i in range(n)]}).with_column("y", shout(ifr.col("x")))
    return df.to_arrow().column("y").to_pylist()


def _left(records) -> list:
    return [r for r in records if "Task was destroyed but it is pending" in r.getMessage() and "UDFOperator" in r.getMessage()]


def test_async_row_workers_leave_no_pending_task(caplog):
    gc.collect()  # what earlier tests left is not this job's
    caplog.set_level(logging.ERROR, logger="asyncio")
    out = _run_job(500, 32)
    assert out == [f"{i}!" for i in range(500)]
    gc.collect()  # a task left pending is reported when the collector frees it
    destroyed = _left(caplog.records)
    assert destroyed == [], f"{len(destroyed)} worker task(s) left pending by the job"


def test_async_row_workers_leave_no_pending_task_when_a_row_fails(caplog):
    gc.collect()
    caplog.set_level(logging.ERROR, logger="asyncio")

    @ifr.func(max_concurrency=16)
    async def boom(x: int) -> int:
        await asyncio.sleep(0)
        if x == 7:
            raise ValueError("row 7")
        return x

    df = ifr.from_pydict({"x": list(range(100))}).with_column("y", boom(ifr.col("x")))
    try:
        df.to_arrow()
    except Exception as e:
        assert "row 7" in str(e)
    else:
        raise AssertionError("the failing row did not stop the job")
    gc.collect()
    assert not _left(caplog.records)
