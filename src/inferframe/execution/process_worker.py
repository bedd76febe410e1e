"""A model-class instance living in its own Python process (``use_process=True``).

The child is started with ``python -m inferframe.execution.process_worker``, so
user scripts need no ``if __name__ == "__main__"`` guard. Parent and child
exchange length-prefixed cloudpickle frames over the child's stdin/stdout; the
child's own prints go to stderr. A child that dies becomes a clear UDFError.
"""

from __future__ import annotations

import atexit
import os
import struct
import subprocess
import sys
import threading
import traceback
import weakref
from typing import Any, BinaryIO

import cloudpickle

from inferframe.errors import UDFError

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


class ProcessInstance:
    """Parent-side proxy: builds the instance in a child process and calls its methods there."""

    def __init__(self, owner) -> None:
        self.name = owner.cls.__name__
        env = dict(os.environ)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "inferframe.execution.process_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )
        self._lock = threading.Lock()
        _LIVE.add(self)
        reply = self._exchange(("init", list(sys.path), cloudpickle.dumps(owner)), during=f"{self.name}.__init__")
        if reply[0] != "ok":
            self.close_process()
            raise UDFError(f"{self.name}.__init__ failed in its worker process:\n{reply[1]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _exchange(self, msg, during: str):
        with self._lock:
            try:
                _send(self.proc.stdin, msg)
                return _recv(self.proc.stdout)
            except (EOFError, BrokenPipeError, OSError):
                code = self.proc.wait(timeout=5)
                raise UDFError(
                    f"The worker process of {self.name} (pid {self.proc.pid}) died with exit code {code} during {during}. "
                    "Check its output above; a crash in native code or running out of memory are the usual causes."
                ) from None

    def run(self, spec, columns: list[list], offset: int, n: int) -> list:
        method = spec.fn.__name__
        msg = ("call", method, spec.is_batch, spec.is_async, spec.layout, spec.kwargs_layout, columns, offset, n, spec.name)
        reply = self._exchange(msg, during=f"rows {offset}..{offset + n - 1}")
        if reply[0] == "ok":
            return reply[1]
        raise UDFError(reply[1])

    def close_process(self) -> None:
        if self.proc.poll() is None:
            try:
                with self._lock:
                    _send(self.proc.stdin, ("exit",))
                self.proc.wait(timeout=3)
            except Exception:
                self.proc.kill()
                self.proc.wait(timeout=3)
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
    instance = None
    loop = None
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
                instance = cloudpickle.loads(payload).build()
                _send(proto_out, ("ok",))
            except BaseException:
                _send(proto_out, ("error", traceback.format_exc()))
            continue
        _, method, is_batch, is_async, layout, kwargs_layout, columns, offset, n, name = msg
        fn = getattr(instance, method)
        try:
            if is_async and loop is None:
                import asyncio

                loop = asyncio.new_event_loop()
            values = _call(fn, is_batch, is_async, layout, kwargs_layout, columns, offset, n, name, loop)
            _send(proto_out, ("ok", values))
        except _RowFailure as e:
            _send(proto_out, ("error", str(e)))
        except BaseException as e:
            _send(proto_out, ("error", f"UDF {name!r} failed on rows {offset}..{offset + n - 1}: {type(e).__name__}: {e}"))


class _RowFailure(Exception):
    pass


def _merge(layout, kwargs_layout, values):
    args = [values[v] if k == "expr" else v for k, v in layout]
    kwargs = {key: values[v] if k == "expr" else v for key, k, v in kwargs_layout}
    return args, kwargs


def _call(fn, is_batch, is_async, layout, kwargs_layout, columns, offset, n, name, loop):
    if is_batch:
        import pyarrow as pa

        from inferframe.series import Series

        args, kwargs = _merge(layout, kwargs_layout, [Series(pa.array(c)) for c in columns])
        out = fn(*args, **kwargs)
        if is_async:
            out = loop.run_until_complete(out)
        if hasattr(out, "to_pylist"):
            return out.to_pylist()
        if hasattr(out, "tolist"):
            return out.tolist()
        return list(out)
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
