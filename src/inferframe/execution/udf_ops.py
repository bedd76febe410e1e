"""Run Python UDFs over morsels: thread pool for sync code, the shared loop for async.

Order is preserved: morsels are submitted in order and yielded in order, with
a bounded window of morsels (and, for async row UDFs, rows) in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import math
import os
import queue
import shutil
import threading
import warnings
from collections import deque
from typing import Any, Callable, Iterator

import pyarrow as pa

from inferframe.errors import InferframeError, UDFError
from inferframe.execution.context import Cancelled, ExecContext
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
            warnings.warn(
                f"{owner.cls.__name__} asks for gpus={owner.gpus}, but this machine has no GPU; it runs on the CPU.",
                RuntimeWarning, stacklevel=2,
            )
        elif self._gpus and owner.gpus * self.size > len(self._gpus):
            warnings.warn(
                f"{owner.cls.__name__} asks for gpus={owner.gpus} for each of up to {self.size} instances, "
                f"but only {len(self._gpus)} GPU(s) are visible; instances will share GPUs.",
                RuntimeWarning, stacklevel=2,
            )

    def _build(self, index: int):
        if self.owner.use_process:
            from inferframe.execution.process_worker import ProcessInstance

            slots = gpu_slots(self.owner.gpus, index, self._gpus)
            env = {"CUDA_VISIBLE_DEVICES": ",".join(slots)} if slots else None
            inst = ProcessInstance(self.owner, env=env, start=False)
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
                return self.ctx.event_loop.call(self.owner.build)
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
                    self._all.append(self.owner.build())
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
        spec = self.spec
        if spec.use_process:
            submit = self._submit_process()
            window = self.workers * 2
        elif spec.is_async:
            submit = self._submit_async()
            window = 1_000_000 if not spec.is_batch else (spec.max_concurrency or 4)
        else:
            submit = self._submit_threads()
            window = self.workers * 2
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
        fn = spec.fn
        simple = all(kind == "expr" for kind, _ in spec.layout) and not spec.kwargs_layout

        async def worker(queue: asyncio.Queue) -> None:
            inst = instances.pick() if instances is not None else None
            while True:
                job, i = await queue.get()
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

        def start() -> None:
            queue: asyncio.Queue = asyncio.Queue()
            state["queue"] = queue
            state["workers"] = [asyncio.ensure_future(worker(queue)) for _ in range(n_workers)]

        def enqueue(job: "_RowJob") -> None:
            if "queue" not in state:
                start()
            put = state["queue"].put_nowait
            for i in range(len(job.rows)):
                put((job, i))

        def submit(batch: pa.RecordBatch, offset: int) -> cf.Future:
            cols = [a.to_pylist() for a in self._inputs(batch)]
            if simple:
                order = [v for _, v in spec.layout]
                rows = list(zip(*[cols[j] for j in order])) if cols else [()] * batch.num_rows
            else:
                rows = [spec.call_args([c[i] for c in cols]) for i in range(batch.num_rows)]
            job = _RowJob(rows, offset)
            if not rows:
                job.future.set_result([])
            else:
                loop.loop.call_soon_threadsafe(enqueue, job)
            return job.future

        return submit

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
