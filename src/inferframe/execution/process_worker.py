"""A model-class instance living in its own Python process (``use_process=True``).

The child is started with ``python -m inferframe.execution.process_worker``, so
user scripts need no ``if __name__ == "__main__"`` guard. Parent and child
exchange length-prefixed cloudpickle frames over the child's stdin/stdout; the
child's own prints go to stderr. Column data crosses as Arrow IPC, which keeps
types and names and copies only the rows of a sliced batch. A child that dies
becomes a clear UDFError naming the method, the rows and the exit code (or
signal); a child still busy when the run stops is killed rather than waited for.
"""

from __future__ import annotations

import atexit
import os
import signal
import struct
import subprocess
import sys
import threading
import traceback
import weakref
from typing import Any, BinaryIO

import cloudpickle

from inferframe.errors import RowFailed, UDFError
from inferframe.execution.context import Cancelled
from inferframe.observe.stats import RunCounters

_LIVE: "weakref.WeakSet[ProcessInstance]" = weakref.WeakSet()


def _send(stream: BinaryIO, obj: Any) -> None:
    data = cloudpickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _recv(stream: BinaryIO) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (n,) = struct.unpack("<Q", head)
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return cloudpickle.loads(data)


def pack_arrays(arrays: list) -> bytes:
    """Arrow IPC bytes for same-length arrays (a sliced array sends only its own rows, unlike pickle)."""
    import pyarrow as pa

    batch = pa.RecordBatch.from_arrays(list(arrays), names=[str(i) for i in range(len(arrays))])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def unpack_arrays(data: bytes) -> list:
    import pyarrow as pa

    return list(pa.ipc.open_stream(pa.py_buffer(data)).read_next_batch().columns)


def describe_exit(code: int | None) -> str:
    """``exit code 3``, or ``exit code -9 (killed by SIGKILL)`` for a signal."""
    if code is not None and code < 0:
        try:
            return f"exit code {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit code {code}"


class ProcessInstance:
    """Parent-side proxy: builds the instance in a child process and calls its methods there.

    Parameters:
        owner: the model class and its recorded arguments.
        env: extra environment variables for the child (e.g. the GPUs it may use).
        start: build the instance now; with False, call ``start()`` later (the pool
            registers the process first, so a run stopped mid-``__init__`` can kill it).
        counters: the job's counters, where the child's are merged (None: new ones, which no job shows).
    """

    def __init__(self, owner, env: dict[str, str] | None = None, start: bool = True,
                 counters: RunCounters | None = None) -> None:
        self.name = owner.cls.__name__
        self.owner = owner
        self.counters = counters if counters is not None else RunCounters()
        self._closing = False
        child_env = dict(os.environ)
        child_env.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "inferframe.execution.process_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env,
        )
        self._lock = threading.Lock()
        _LIVE.add(self)
        if start:
            self.start()

    def start(self) -> None:
        """Run ``__init__`` in the child; raise a UDFError naming the class if it fails."""
        reply = self._exchange(("init", list(sys.path), cloudpickle.dumps(self.owner)),
                               who=self.name, during=f"{self.name}.__init__")
        if reply[0] != "ok":
            self.close_process()
            raise UDFError(f"{self.name}.__init__ failed in its worker process:\n{reply[1]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _exchange(self, msg, who: str, during: str):
        with self._lock:
            try:
                _send(self.proc.stdin, msg)
                return _recv(self.proc.stdout)
            except (EOFError, BrokenPipeError, OSError):
                if self._closing:
                    raise Cancelled() from None  # we stopped it: the run is ending anyway
                try:
                    code = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    # It closed its pipes but lives on: it cannot answer any more, so end it.
                    self.proc.kill()
                    code = self.proc.wait()
                raise UDFError(
                    f"The worker process of {who} (pid {self.proc.pid}) died with {describe_exit(code)} during {during}. "
                    "Check its output above; a crash in native code or running out of memory are the usual causes."
                ) from None

    def run(self, spec, arrays: list, names: list[str], offset: int, n: int):
        """Call ``spec``'s method on these argument columns in the child; its values, or a UDFError."""
        method = spec.fn.__name__
        msg = ("call", method, spec.is_batch, spec.is_async, spec.layout, spec.kwargs_layout,
               pack_arrays(arrays), list(names), offset, n, spec.name)
        reply = self._exchange(msg, who=f"{self.name}.{method}", during=f"rows {offset}..{offset + n - 1}")
        if len(reply) > 2:
            self.counters.merge(f"pid:{self.proc.pid}", reply[2])
        if reply[0] == "ok":
            return reply[1]
        if reply[0] == "arrow":
            return unpack_arrays(reply[1])[0]
        if reply[0] == "row_failed":
            raise reply[1]
        raise UDFError(reply[1])

    def close_process(self) -> None:
        """End the child: politely when idle, killed when it is still busy with a call."""
        self._closing = True
        if self.proc.poll() is None:
            # A busy child holds the lock until its call returns, which may be minutes away.
            if self._lock.acquire(timeout=0.2):
                try:
                    _send(self.proc.stdin, ("exit",))
                except Exception:
                    pass
                finally:
                    self._lock.release()
                try:
                    self.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    pass
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except Exception:
                pass


@atexit.register
def _kill_orphans() -> None:
    for inst in list(_LIVE):
        if inst.proc.poll() is None:
            inst.proc.kill()


def _serve() -> None:
    proto_in = sys.stdin.buffer
    proto_out = os.fdopen(os.dup(1), "wb")
    # User prints must not corrupt the protocol stream: send fd 1 to stderr.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Ctrl-C reaches the whole process group: the parent stops the run and then ends this child,
    # so the child must not die on its own mid-reply (or print a second traceback).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    instance = None
    loop = None
    methods: dict = {}  # (name, is_batch) -> the callable, resolved once rather than per batch
    counters = RunCounters()  # this child's own; a snapshot goes back to the job's with every reply
    while True:
        try:
            msg = _recv(proto_in)
        except EOFError:
            return  # parent is gone
        kind = msg[0]
        if kind == "exit":
            return
        if kind == "init":
            _, path, payload = msg
            # The class may be pickled by reference: make its module importable before loading it.
            sys.path[:] = path
            try:
                instance = _build(cloudpickle.loads(payload), counters)
                methods.clear()
                _send(proto_out, ("ok",))
            except BaseException:
                _send(proto_out, ("error", traceback.format_exc()))
            continue
        _, method, is_batch, is_async, layout, kwargs_layout, packed, names, offset, n, name = msg
        fn = methods.get((method, is_batch))
        if fn is None:
            from inferframe.expressions.udf import with_file_args

            fn = getattr(instance, method)
            # The parent sends the method's name, not its File-wrapping.
            fn = methods[(method, is_batch)] = fn if is_batch else with_file_args(fn)
        try:
            if is_async and loop is None:
                import asyncio

                loop = asyncio.new_event_loop()
            values = _call(fn, is_batch, is_async, layout, kwargs_layout, unpack_arrays(packed), names, offset, n, name, loop)
            if hasattr(values, "type") and hasattr(values, "to_pylist"):  # an Arrow array: send it as Arrow
                _send(proto_out, ("arrow", pack_arrays([values]), counters.snapshot()))
            else:
                _send(proto_out, ("ok", values, counters.snapshot()))
        except RowFailed as e:  # on_error="raise" in a model class: the row's own error, as in this process
            _send(proto_out, ("row_failed", e, counters.snapshot()))
        except _RowFailure as e:
            _send(proto_out, ("error", str(e), counters.snapshot()))
        except BaseException as e:
            _send(proto_out, ("error", f"UDF {name!r} failed on rows {offset}..{offset + n - 1}: {type(e).__name__}: {e}",
                              counters.snapshot()))


class _RowFailure(Exception):
    pass


def _build(owner, counters: RunCounters):
    """Build the model class in this child as the executor does: a class with ``for_run`` gets this run's
    services (a local coordinator and the child's ``counters``)."""
    for_run = getattr(owner.cls, "for_run", None)
    if for_run is None:
        return owner.build()
    from inferframe.ai.run import local_services

    return for_run(local_services(counters), *owner.args, **owner.kwargs)


def _merge(layout, kwargs_layout, values):
    args = [values[v] if k == "expr" else v for k, v in layout]
    kwargs = {key: values[v] if k == "expr" else v for key, k, v in kwargs_layout}
    return args, kwargs


def _call(fn, is_batch, is_async, layout, kwargs_layout, arrays, names, offset, n, name, loop):
    if is_batch:
        import pyarrow as pa

        from inferframe.series import Series

        args, kwargs = _merge(layout, kwargs_layout, [Series(a, nm) for a, nm in zip(arrays, names)])
        out = fn(*args, **kwargs)
        if is_async:
            out = loop.run_until_complete(out)
        if isinstance(out, Series):
            out = out.to_arrow()
        if isinstance(out, pa.ChunkedArray):
            out = out.combine_chunks()
        if isinstance(out, pa.Array):
            return out
        if hasattr(out, "to_pylist"):
            return out.to_pylist()
        if hasattr(out, "tolist"):
            return out.tolist()
        return list(out)
    columns = [a.to_pylist() for a in arrays]
    rows = [_merge(layout, kwargs_layout, [c[i] for c in columns]) for i in range(n)]
    if is_async:
        import asyncio

        async def all_rows():
            return await asyncio.gather(*(fn(*a, **k) for a, k in rows), return_exceptions=True)

        results = loop.run_until_complete(all_rows())
        for i, r in enumerate(results):
            if isinstance(r, BaseException):
                raise _RowFailure(f"UDF {name!r} failed on row {offset + i}: {type(r).__name__}: {r}")
        return results
    out = []
    for i, (a, k) in enumerate(rows):
        try:
            out.append(fn(*a, **k))
        except Exception as e:
            raise _RowFailure(f"UDF {name!r} failed on row {offset + i}: {type(e).__name__}: {e}") from e
    return out


if __name__ == "__main__":
    _serve()
