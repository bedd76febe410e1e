"""The fast HTTP client: Rust's reqwest (pyreqwest), HTTP written, read and parsed off the event loop.

A provider's per-request CPU is what caps how many requests one process can feed a fast server
(issue 36): aiohttp writes, reads and parses every request in Python on the loop, about 180 us a
request on this machine; reqwest does it on its own thread, and the loop pays one awaited future.

Imported only when chosen (``providers/http.py``): pyreqwest is native code, and a failed import
must leave the portable client working. Its guards against interpreter crashes (issue 42) are here:
the import on a thread that never ends, a drop of open clients at exit and a short wait after close.

No proxy from the environment, no cookies, no redirects. The key travels as a default header marked
sensitive, so it shows in no repr, log or error.

Example:
    >>> t = ReqwestTransport({"Authorization": "Bearer sk-x"}, timeout=5.0)
    >>> "sk-x" in repr(t), t.closed
    (False, False)
"""

from __future__ import annotations

import asyncio
import atexit
import datetime
import os
import re
import threading
import time
import weakref
from collections.abc import Mapping

from inferframe.providers.http_interface import SECRET_HEADERS, SendFailed, failure, secret_values


def _load_pyreqwest() -> None:
    """Import pyreqwest on a thread that never ends: the main thread, else one parked for good.

    Its Rust side allocates what its import sets up from the importing thread's heap (mimalloc);
    once that thread ended (a job's event-loop thread), the next client built in a later job crashed
    the process (a segfault in the third job of three, measured by hand; imported on the main
    thread, 10 jobs of 10 ran).
    """
    if threading.current_thread() is threading.main_thread():
        import pyreqwest.client  # noqa: F401
        return
    loaded = threading.Event()
    failed: list[BaseException] = []

    def park() -> None:
        try:
            import pyreqwest.client  # noqa: F401
        except BaseException as e:  # noqa: BLE001 - handed to the importing thread, which raises it
            failed.append(e)
        finally:
            loaded.set()
        threading.Event().wait()

    threading.Thread(target=park, name="inferframe-pyreqwest", daemon=True).start()
    loaded.wait()
    if failed:
        raise failed[0]


_load_pyreqwest()
from pyreqwest import exceptions as _errors  # noqa: E402 (loaded above, on a thread that never ends)
from pyreqwest.client import ClientBuilder  # noqa: E402
from pyreqwest.http import HeaderMap  # noqa: E402

# Clients this process opened and has not closed: each is dropped at exit while the interpreter still runs.
_live: weakref.WeakSet = weakref.WeakSet()

# After a client closes, reqwest's runtime thread still releases its Python handles for a few ms; an interpreter
# that finalizes meanwhile aborts ("PyGILState_Release: thread state must be current"). Measured by hand on
# pyreqwest 0.15.1: 4 of 50 processes aborted with no wait after close, 0 of 80 with this wait.
_SETTLE_S = 0.02
_OS_ERROR = re.compile(r"\(os error (\d+)\)\s*$")


class ReqwestTransport:
    """POST JSON bodies to one service through a pooled reqwest client; the answer as (status, body, headers).

    The client is built here, so that a pyreqwest that imports but cannot build one is found when
    the default chooses (``providers/http.py``), not at the first request.

    Parameters:
        headers: sent with every request (the key among them, marked sensitive).
        timeout: seconds for a whole request, connection included.

    Example:
        >>> ReqwestTransport({}, timeout=1.0).closed
        False
    """

    def __init__(self, headers: Mapping[str, str], timeout: float) -> None:
        self.timeout = timeout
        self.closed = False
        self._secrets = secret_values(headers)
        sent = HeaderMap()  # the key marked sensitive: pyreqwest's reprs and logs show it masked
        for name, value in headers.items():
            sent.insert(name, value, is_sensitive=name.lower() in SECRET_HEADERS)
        sent.insert("Content-Type", "application/json")
        self._client = (ClientBuilder().default_headers(sent).timeout(datetime.timedelta(seconds=timeout))
                        .no_proxy().follow_redirects(False).build())
        self._pid = os.getpid()
        _live.add(self)

    def __repr__(self) -> str:
        return f"ReqwestTransport(timeout={self.timeout:g}, closed={self.closed})"

    def __reduce__(self):
        raise TypeError("A live HTTP client holds a key and a connection pool; it does not pickle.")

    async def post(self, url: str, body: bytes) -> tuple[int, bytes, Mapping[str, str]]:
        """Send one request; return ``(status, raw body, headers)`` or raise ``SendFailed``."""
        client = self._client
        if client is None:
            raise failure("stopped")
        if self._pid != os.getpid():  # built before a fork: its runtime thread is not in this process, and it never answers
            raise failure("other", detail="this HTTP client was built in the parent process before os.fork(); "
                                          "start the job in the child, or use multiprocessing's 'spawn' start method")
        try:
            resp = await client.post(url).body_bytes(body).build().send()
            raw = await resp.bytes()
        except _errors.RequestTimeoutError:
            raise failure("timeout", timeout=self.timeout) from None
        except _errors.ClientClosedError:
            raise failure("stopped") from None
        except _errors.PyreqwestError as e:
            raise self._failed(e, url) from None
        return resp.status, bytes(raw), resp.headers

    def _failed(self, e: Exception, url: str = "") -> SendFailed:
        cause = _cause(e)
        found = _OS_ERROR.search(cause)
        if found:
            return failure("connect", errno=int(found.group(1)), url=url)
        if "lookup address" in cause or "dns error" in cause:
            return failure("dns", detail=cause.rpartition(": ")[2], secrets=self._secrets, url=url)
        if isinstance(e, _errors.ConnectError):
            return failure("connect", detail=cause, secrets=self._secrets, url=url)
        if "connection closed" in cause or "IncompleteMessage" in cause or isinstance(e, _errors.ReadError):
            return failure("closed")
        return failure("other", detail=f"{type(e).__name__}: {cause}", secrets=self._secrets)

    async def aclose(self) -> None:
        """Close the pool; requests still running fail as CONNECTION, later ones are not sent."""
        self.closed = True
        client, self._client = self._client, None
        if client is not None:
            _live.discard(self)
            await client.close()
            await asyncio.sleep(_SETTLE_S)

    def _drop(self) -> None:
        self.closed = True
        self._client = None


def _cause(e: Exception) -> str:
    """The innermost cause reqwest gives ("Connection refused (os error 111)"), else the message."""
    causes = (getattr(e, "details", None) or {}).get("causes") or ()
    return causes[-1].get("message", str(e)) if causes else getattr(e, "message", str(e))


@atexit.register
def _drop_live_clients() -> None:
    # Clients a job did not close (a process ended mid-job): dropped while the interpreter still runs,
    # then a short wait so that reqwest's thread is done with Python before finalization.
    live = list(_live)
    for transport in live:
        transport._drop()
    if live:
        time.sleep(_SETTLE_S)
