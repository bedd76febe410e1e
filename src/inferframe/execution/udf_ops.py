"""Run Python UDFs over morsels: thread pool for sync code, the shared loop for async.

Order is preserved: morsels are submitted in order and yielded in order, with
a bounded window of morsels (and, for async row UDFs, rows) in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import os
from collections import deque
from typing import Any, Callable, Iterator

import pyarrow as pa

from inferframe.errors import InferframeError, RowFailed, UDFError
from inferframe.execution.context import Cancelled, ExecContext
from inferframe.execution.instances import pool_for
from inferframe.execution.operators import rebatch, split_morsels
from inferframe.expressions.evaluate import evaluate
from inferframe.expressions.nodes import UDFCall

Batches = Iterator[pa.RecordBatch]

DEFAULT_ASYNC_IN_FLIGHT = 128
DEFAULT_SYNC_THREADS = max(1, min(4, os.cpu_count() or 1))


def _short(v: Any, n: int = 80) -> str:
    r = repr(v)
    return r if len(r) <= n else r[: n - 3] + "..."


def to_result_array(name: str, values: Any, dtype: pa.DataType, offset: int, expected: int) -> pa.Array:
    """Turn what a UDF returned into an Arrow array of its declared type, naming the bad row if any."""
    if hasattr(values, "to_arrow") and not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_arrow()  # Series
    elif type(values).__module__.startswith("pandas"):
        values = values.to_numpy()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    try:
        n = len(values)
    except TypeError:
        raise UDFError(f"UDF {name!r} must return one value per row (a list, Series or array), got {type(values).__name__}.") from None
    if n != expected:
        raise UDFError(f"UDF {name!r} returned {n} values for a batch of {expected} rows (rows {offset}..{offset + expected - 1}); return one value per row.")
    if isinstance(values, pa.Array):
        if values.type == dtype:
            return values
        try:
            return values.cast(dtype)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise UDFError(f"UDF {name!r} returned {values.type} values, which do not fit its declared type {dtype}: {e}") from None
    try:
        return _from_pylist(values, dtype)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
        values = list(values)
        for i, v in enumerate(values):
            try:
                _from_pylist([v], dtype)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
                raise UDFError(
                    f"UDF {name!r} returned {_short(v)} ({type(v).__name__}) at row {offset + i}, which does not fit "
                    f"its declared type {dtype}. Fix the function or declare a matching return_dtype."
                ) from None
        raise


def _storage(t: pa.DataType) -> pa.DataType:
    """``t`` with extension types (images, files) replaced by their storage types."""
    if isinstance(t, pa.ExtensionType):
        return t.storage_type
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_storage(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_storage(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_storage(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_storage(t.value_type)), t.list_size)
    return t


def _from_pylist(values, dtype: pa.DataType) -> pa.Array:
    storage = _storage(dtype)
    if storage == dtype:
        return pa.array(values, type=dtype)
    # pyarrow cannot build nested extension types from Python objects: build the storage, then cast.
    return pa.array(values, type=storage).cast(dtype)


def _row_call(spec, instance, columns: list[list], offset: int, n: int) -> list:
    fn = spec.fn
    out = []
    for i in range(n):
        args, kwargs = spec.call_args([c[i] for c in columns])
        try:
            out.append(fn(instance, *args, **kwargs) if instance is not None else fn(*args, **kwargs))
        except Exception as e:
            raise _row_error(spec, e, offset + i, args) from e
    return out


def _row_error(spec, e: BaseException, row: int, args) -> UDFError:
    shown = ", ".join(_short(a, 60) for a in args)
    return UDFError(f"UDF {spec.name!r} failed on row {row} with input ({shown}): {type(e).__name__}: {e}")


def _batch_call(spec, instance, series: list, offset: int, n: int):
    args, kwargs = spec.call_args(series)
    try:
        return spec.fn(instance, *args, **kwargs) if instance is not None else spec.fn(*args, **kwargs)
    except RowFailed:
        raise  # an in-process model's row with on_error="raise": the same error as over an API
    except Exception as e:
        raise UDFError(f"UDF {spec.name!r} failed on the batch of rows {offset}..{offset + n - 1}: {type(e).__name__}: {e}") from e


class _RowJob:
    """One morsel's rows waiting for the async workers; ``future`` resolves to its values."""

    __slots__ = ("rows", "offset", "values", "remaining", "future")

    def __init__(self, rows: list, offset: int) -> None:
        self.rows = rows
        self.offset = offset
        self.values: list = [None] * len(rows)
        self.remaining = len(rows)
        self.future: cf.Future = cf.Future()


class UDFOperator:
    """Evaluate one UDF call per morsel and append its output column.

    Parameters:
        call: the UDF call node (its arguments are pure expressions).
        out_name: name of the column to append.
        out_type: the declared Arrow type of the output.
    """

    def __init__(self, call: UDFCall, out_name: str, out_type: pa.DataType, ctx: ExecContext) -> None:
        self.call = call
        self.spec = call.udf
        self.out_name = out_name
        self.out_type = out_type
        self.ctx = ctx
        spec = self.spec
        self.owner = spec.owner
        if spec.is_async and not spec.use_process:
            self.in_flight_rows = (spec.max_concurrency or DEFAULT_ASYNC_IN_FLIGHT) if not spec.is_batch else None
        if self.owner is not None:
            self.workers = self.owner.max_concurrency or 1
        else:
            self.workers = spec.max_concurrency or DEFAULT_SYNC_THREADS
        self._error: cf.Future = cf.Future()
        self._offsets: dict[int, int] = {}
        self._submitter: tuple[Callable, int] | None = None

    # --- morsel preparation -------------------------------------------
    def _inputs(self, batch: pa.RecordBatch) -> list[pa.Array]:
        return [evaluate(a, batch) for a in self.call.args]

    def _morsels(self, batches: Batches) -> Batches:
        spec = self.spec
        if spec.batch_size:
            return rebatch(batches, spec.batch_size)
        if spec.is_async and not spec.is_batch and not spec.use_process:
            # Several morsels must be pending so the row bound stays full across morsel edges.
            return split_morsels(batches, max(1, min(1024, self.in_flight_rows // 4 or 1)))
        return split_morsels(batches, 512 if not spec.is_batch else self.ctx.morsel_size)

    # --- execution ----------------------------------------------------
    def run(self, batches: Batches) -> Batches:
        """The input batches with the UDF's column appended, in order.

        May be called again with more batches (a Ray actor runs one batch per call): the
        threads, worker coroutines and instances made by the first call are reused.
        """
        if self._submitter is None:
            spec = self.spec
            if spec.use_process:
                self._submitter = self._submit_process(), self.workers * 2
            elif spec.is_async:
                self._submitter = self._submit_async(), 1_000_000 if not spec.is_batch else (spec.max_concurrency or 4)
            else:
                self._submitter = self._submit_threads(), self.workers * 2
        submit, window = self._submitter
        yield from self._ordered(self._morsels(batches), submit, window)

    def _ordered(self, morsels: Batches, submit: Callable, window: int) -> Batches:
        pending: deque = deque()
        pending_rows = 0
        offset = 0
        row_window = 2 * self.in_flight_rows if getattr(self, "in_flight_rows", None) else None
        try:
            for batch in morsels:
                self.ctx.check()
                fut = submit(batch, offset)
                self._offsets[id(fut)] = offset
                offset += batch.num_rows
                pending.append((batch, fut))
                pending_rows += batch.num_rows
                while pending and (
                    len(pending) >= window or (row_window is not None and pending_rows >= row_window) or pending[0][1].done()
                ):
                    b, out = self._wait_head(pending)
                    pending_rows -= b.num_rows
                    yield out
            while pending:
                b, out = self._wait_head(pending)
                yield out
        finally:
            for _, f in pending:
                f.cancel()

    def _wait_head(self, pending: deque):
        batch, head = pending[0]
        while True:
            done, _ = cf.wait([head, self._error], timeout=0.1, return_when=cf.FIRST_COMPLETED)
            if self._error.done():
                raise self._error.result()
            if head in done:
                break
            for _, f in pending:
                if f.done() and not f.cancelled() and f.exception() is not None:
                    f.result()
            if self.ctx.stop.is_set():
                raise Cancelled()
        pending.popleft()
        offset = self._offsets.pop(id(head), 0)
        try:
            values = head.result()
        except (cf.CancelledError, asyncio.CancelledError):
            raise Cancelled() from None
        if not isinstance(values, pa.Array):
            values = self._convert(values, offset, batch.num_rows)
        return batch, self._append(batch, values)

    def _append(self, batch: pa.RecordBatch, array: pa.Array) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [*batch.columns, array], schema=batch.schema.append(pa.field(self.out_name, self.out_type))
        )

    def _fail(self, e: BaseException) -> None:
        if not self._error.done():
            try:
                self._error.set_result(e)
            except cf.InvalidStateError:
                pass

    def _convert(self, values, offset: int, n: int) -> pa.Array:
        return to_result_array(self.spec.name, values, self.out_type, offset, n)

    # sync, in threads
    def _submit_threads(self) -> Callable:
        pool = cf.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=f"inferframe-udf-{self.spec.name}")
        self.ctx.on_close(lambda: pool.shutdown(wait=False, cancel_futures=True))
        instances = pool_for(self.owner, self.ctx, in_loop=False) if self.owner is not None else None
        spec = self.spec

        def work(batch: pa.RecordBatch, offset: int) -> pa.Array:
            if self.ctx.stop.is_set():
                raise Cancelled()
            inst = instances.acquire() if instances is not None else None
            try:
                arrays = self._inputs(batch)
                n = batch.num_rows
                if spec.is_batch:
                    from inferframe.series import Series

                    series = [Series(a, node.name()) for a, node in zip(arrays, self.call.args)]
                    return self._convert(_batch_call(spec, inst, series, offset, n), offset, n)
                cols = [a.to_pylist() for a in arrays]
                return self._convert(_row_call(spec, inst, cols, offset, n), offset, n)
            except BaseException as e:
                self._fail(e)
                raise
            finally:
                if inst is not None:
                    instances.release(inst)

        return lambda batch, offset: pool.submit(work, batch, offset)

    # sync or async, in a worker process per instance
    def _submit_process(self) -> Callable:
        pool = cf.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=f"inferframe-proc-{self.spec.name}")
        self.ctx.on_close(lambda: pool.shutdown(wait=False, cancel_futures=True))
        instances = pool_for(self.owner, self.ctx, in_loop=False)
        spec = self.spec

        names = [node.name() for node in self.call.args]  # batch methods get named Series, as in threads

        def work(batch: pa.RecordBatch, offset: int) -> pa.Array:
            if self.ctx.stop.is_set():
                raise Cancelled()
            try:
                inst = instances.acquire()
            except Cancelled:
                raise
            except BaseException as e:
                self._fail(e)
                raise
            try:
                values = inst.run(spec, self._inputs(batch), names, offset, batch.num_rows)
                return self._convert(values, offset, batch.num_rows)
            except Cancelled:
                raise  # the run is stopping (its worker was ended on purpose): not a new error
            except BaseException as e:
                self._fail(e)
                raise
            finally:
                instances.release(inst)

        return lambda batch, offset: pool.submit(work, batch, offset)

    # async, on the shared loop
    def _submit_async(self) -> Callable:
        return self._submit_async_batches() if self.spec.is_batch else self._submit_async_rows()

    def _submit_async_rows(self) -> Callable:
        """A fixed pool of worker coroutines pulls rows from one queue.

        A task per row parked on a semaphore costs O(waiters) per release in
        asyncio; a worker pool keeps the bound exact at O(1) per row, and the
        stage thread (not the loop) prepares inputs and converts outputs.
        """
        loop = self.ctx.event_loop
        spec = self.spec
        instances = pool_for(self.owner, self.ctx, in_loop=True) if self.owner is not None else None
        n_workers = self.in_flight_rows
        self.in_flight = 0
        self.max_seen_in_flight = 0
        state: dict = {}
        simple = all(kind == "expr" for kind, _ in spec.layout) and not spec.kwargs_layout

        def start() -> None:
            queue: asyncio.Queue = asyncio.Queue()
            state["queue"] = queue
            state["workers"] = [asyncio.ensure_future(self._row_worker(queue, instances, simple))
                                for _ in range(n_workers)]

        async def end_workers() -> None:
            workers, queue = state.pop("workers", ()), state["queue"]
            while not queue.empty():  # rows of a job that stopped early: nobody waits for them
                queue.get_nowait()
            # An idle worker ends on a None of its own. Cancelling one waiting in ``queue.get`` costs
            # O(waiters) (it takes itself out of the queue's deque): 28% of a 16,384-worker job's CPU.
            for _ in workers:
                queue.put_nowait(None)
            await asyncio.sleep(0)
            for t in workers:
                if not t.done():
                    t.cancel()  # still in the UDF (the job stopped early)
            await asyncio.gather(*workers, return_exceptions=True)

        def stop() -> None:
            # The workers wait on the queue forever: the job ends them, or the collector would find them
            # pending once the operator is dropped ("Task was destroyed but it is pending!").
            if state.get("workers"):
                loop.submit(end_workers()).result(timeout=5)

        self.ctx.on_close(stop)

        def enqueue(job: "_RowJob") -> None:
            if "queue" not in state:
                start()
            put = state["queue"].put_nowait
            for i in range(len(job.rows)):
                put((job, i))

        def submit(batch: pa.RecordBatch, offset: int) -> cf.Future:
            rows = self._row_args(batch, simple)
            job = _RowJob(rows, offset)
            if not rows:
                job.future.set_result([])
            else:
                loop.loop.call_soon_threadsafe(enqueue, job)
            return job.future

        return submit

    async def _row_worker(self, queue: asyncio.Queue, instances: Any, simple: bool) -> None:
        """One worker coroutine: calls the UDF on rows from ``queue`` until it gets None."""
        spec = self.spec
        fn = spec.fn
        inst = instances.pick() if instances is not None else None
        while True:
            item = await queue.get()
            if item is None:  # the job ends (``end_workers``)
                return
            job, i = item
            if job.future.done():
                continue
            args, kwargs = job.rows[i] if not simple else (job.rows[i], {})
            self.in_flight += 1
            if self.in_flight > self.max_seen_in_flight:
                self.max_seen_in_flight = self.in_flight
            try:
                value = await (fn(inst, *args, **kwargs) if inst is not None else fn(*args, **kwargs))
            except asyncio.CancelledError:
                raise
            except Exception as e:
                err = _row_error(spec, e, job.offset + i, args)
                err.__cause__ = e
                self._fail(err)
                if not job.future.done():
                    job.future.set_exception(err)
                continue
            finally:
                self.in_flight -= 1
            job.values[i] = value
            job.remaining -= 1
            if job.remaining == 0 and not job.future.done():
                job.future.set_result(job.values)

    def _row_args(self, batch: pa.RecordBatch, simple: bool) -> list:
        """Each row's arguments: a plain tuple when every argument is an expression, else (args, kwargs)."""
        spec = self.spec
        cols = [a.to_pylist() for a in self._inputs(batch)]
        if simple:
            order = [v for _, v in spec.layout]
            return list(zip(*[cols[j] for j in order])) if cols else [()] * batch.num_rows
        return [spec.call_args([c[i] for c in cols]) for i in range(batch.num_rows)]

    def _submit_async_batches(self) -> Callable:
        loop = self.ctx.event_loop
        spec = self.spec
        instances = pool_for(self.owner, self.ctx, in_loop=True) if self.owner is not None else None
        sem = loop.call(lambda: asyncio.Semaphore(spec.max_concurrency or 4))

        async def whole(batch: pa.RecordBatch, offset: int):
            from inferframe.series import Series

            async with sem:
                inst = instances.pick() if instances is not None else None
                try:
                    series = [Series(a, node.name()) for a, node in zip(self._inputs(batch), self.call.args)]
                    args, kwargs = spec.call_args(series)
                    try:
                        values = await (spec.fn(inst, *args, **kwargs) if inst is not None else spec.fn(*args, **kwargs))
                    except InferframeError as e:
                        self._fail(e)  # already one clear message (e.g. the service is down): pass it on as is
                        raise
                    except Exception as e:
                        raise UDFError(f"UDF {spec.name!r} failed on the batch of rows {offset}..{offset + batch.num_rows - 1}: {type(e).__name__}: {e}") from e
                    return self._convert(values, offset, batch.num_rows)
                except UDFError as e:
                    self._fail(e)
                    raise

        return lambda batch, offset: loop.submit(whole(batch, offset))
