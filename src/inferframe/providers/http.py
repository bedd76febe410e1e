"""One pooled HTTP client for single JSON requests, run by Rust's reqwest (pyreqwest) off the event loop.

A provider's per-request CPU is what caps how many requests one process can feed a fast server
(issue 36): aiohttp writes, reads and parses every request in Python on the loop, about 180 us a
request on this machine; reqwest does it on its own thread, and the loop pays one awaited future.
The Batch API's uploads, ``/tokenize`` and media downloads stay on aiohttp: they are few.

No proxy from the environment, no cookies, no redirects: the same as the aiohttp session it
replaced. The key travels as a default header marked sensitive, so it shows in no repr, log or error.

Example:
    >>> p = Poster({"Authorization": "Bearer sk-x"}, timeout=5.0)
    >>> "sk-x" in repr(p), p.closed
    (False, False)
"""

from __future__ import annotations

import asyncio
import atexit
import datetime
import threading
import time
import weakref
from collections.abc import Mapping

from inferframe.errors import ErrorKind


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

    def park() -> None:
        try:
            import pyreqwest.client  # noqa: F401
        finally:
            loaded.set()
        threading.Event().wait()

    threading.Thread(target=park, name="inferframe-pyreqwest", daemon=True).start()
    loaded.wait()


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


class SendFailed(Exception):
    """No HTTP answer came back: the kind of failure and a message that names it (never the key)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Poster:
    """POST JSON bodies to one service through a pooled client; the answer as (status, body, headers).

    Parameters:
        headers: sent with every request (the key among them, marked sensitive).
        timeout: seconds for a whole request, connection included.

    Example:
        >>> Poster({}, timeout=1.0).closed
        False
    """

    def __init__(self, headers: Mapping[str, str], timeout: float) -> None:
        self._headers = dict(headers)
        self.timeout = timeout
        self._client = None
        self.closed = False

    def __repr__(self) -> str:
        return f"Poster(timeout={self.timeout:g}, closed={self.closed})"

    def __reduce__(self):
        raise TypeError("A live HTTP client holds a key and a connection pool; it does not pickle.")

    def _build(self):
        headers = HeaderMap()  # the key marked sensitive: pyreqwest's reprs and logs show it masked
        for name, value in self._headers.items():
            headers.insert(name, value, is_sensitive=name.lower() in ("authorization", "api-key", "x-api-key"))
        headers.insert("Content-Type", "application/json")
        self._client = (ClientBuilder().default_headers(headers).timeout(datetime.timedelta(seconds=self.timeout))
                        .no_proxy().follow_redirects(False).build())
        _live.add(self)
        return self._client

    async def post(self, url: str, body: bytes):
        """Send one request; return ``(status, raw body, headers)`` or raise ``SendFailed``."""
        if self.closed:
            raise SendFailed(ErrorKind.CONNECTION, "the job stopped before this request was sent")
        client = self._client or self._build()
        try:
            resp = await client.post(url).body_bytes(body).build().send()
            raw = await resp.bytes()
        except _errors.RequestTimeoutError:
            raise SendFailed(ErrorKind.TIMEOUT, f"No answer within {self.timeout:g} s") from None
        except _errors.ConnectError as e:
            raise SendFailed(ErrorKind.CONNECTION, f"connection failed ({_cause(e)})") from None
        except _errors.PyreqwestError as e:
            raise SendFailed(ErrorKind.CONNECTION, f"{type(e).__name__}: {_cause(e)}") from None
        return resp.status, bytes(raw), resp.headers

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
    for poster in live:
        poster._drop()
    if live:
        time.sleep(_SETTLE_S)
