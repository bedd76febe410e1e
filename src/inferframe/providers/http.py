"""Single JSON requests over HTTP: two clients behind one interface, chosen by ``INFERFRAME_HTTP``.

A provider posts a JSON body and gets ``(status, body, headers)`` back, or a ``SendFailed`` that
says what kind of failure it was (``providers/http_interface.py``: the interface and the one error
mapping). Two clients implement it:

- ``reqwest`` (``providers/http_reqwest.py``): Rust's reqwest through pyreqwest, HTTP parsed off the
  event loop: the fast path (issue 36), guarded against the interpreter crashes its native code
  caused here (issue 42).
- ``aiohttp`` (``providers/http_aiohttp.py``): pure asyncio, the portable path.

``INFERFRAME_HTTP=reqwest|aiohttp`` chooses. Unset, reqwest is used where pyreqwest imports and
builds a client; otherwise aiohttp, with one warning per process that says why. Both send no
proxy from the environment, keep no cookies, follow no redirects, and keep the key out of every
repr, log and error. A row's error kind and message do not depend on the client.

Example:
    >>> TRANSPORTS, chosen() in ("",) + TRANSPORTS
    (('reqwest', 'aiohttp'), True)
    >>> _aiohttp({"Authorization": "Bearer sk-x"}, 5.0)  # what INFERFRAME_HTTP=aiohttp connects
    AiohttpTransport(timeout=5, closed=False)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from inferframe.errors import PlanError, warn_user
from inferframe.providers.http_interface import HttpTransport, SendFailed, failure

__all__ = ["ENV", "TRANSPORTS", "HttpTransport", "SendFailed", "check", "chosen", "connect", "failure"]

TRANSPORTS = ("reqwest", "aiohttp")
ENV = "INFERFRAME_HTTP"


def chosen() -> str:
    """The client ``INFERFRAME_HTTP`` names, "" when it is unset; a clear error for any other value."""
    name = os.environ.get(ENV, "").strip().lower()
    if name and name not in TRANSPORTS:
        raise PlanError(f"{ENV}={os.environ[ENV]!r} is not an HTTP client inferframe has. "
                        f"Use one of: {', '.join(TRANSPORTS)} (or leave it unset: reqwest where it works, else aiohttp).")
    return name


def check() -> None:
    """Called when a plan is built: refuse an ``INFERFRAME_HTTP`` that names no client, and load reqwest now.

    Loaded on the thread that builds the plan (the user's, usually the main thread), as a top-level
    import did, not on a job's event-loop thread, where its guard would park a thread for good.
    Named and not loadable: a PlanError. Unset and not loadable: aiohttp, and the one warning now.
    """
    name = chosen()
    if name == "reqwest":
        try:
            import inferframe.providers.http_reqwest  # noqa: F401
        except Exception as e:  # noqa: BLE001 - the user asked for it: say why it cannot run
            raise _unusable(e) from e
    elif not name and not _reqwest_broken:
        try:
            import inferframe.providers.http_reqwest  # noqa: F401,F811
        except Exception as e:  # noqa: BLE001 - any failure to import: the portable client instead
            _fall_back(e)


def _unusable(e: Exception) -> PlanError:
    return PlanError(f"{ENV}=reqwest, but the reqwest HTTP client cannot run here ({type(e).__name__}: {e}). "
                     f"Unset {ENV} or set {ENV}=aiohttp to use aiohttp instead.")


def _fall_back(e: Exception) -> None:
    """Remember that reqwest cannot run in this process, and say so once."""
    with _reqwest_lock:
        first = not _reqwest_broken
        _reqwest_broken.append(f"{type(e).__name__}: {e}")
    if first:
        warn_user(f"inferframe sends its requests through aiohttp: the reqwest HTTP client (pyreqwest) cannot run "
                  f"here ({type(e).__name__}: {e}). Results are the same, at more CPU per request. Set {ENV}=aiohttp "
                  "to choose aiohttp and silence this warning.", RuntimeWarning)


# Why reqwest cannot run in this process, once the default found out (empty until then): it is not tried again.
_reqwest_broken: list[str] = []
_reqwest_lock = threading.Lock()


def connect(headers: Mapping[str, str], timeout: float) -> HttpTransport:
    """A client for one service: the one ``INFERFRAME_HTTP`` names, else reqwest where it works, else aiohttp.

    Parameters:
        headers: sent with every request (the key among them, never shown).
        timeout: seconds for a whole request, connection included.
    """
    name = chosen()
    if name == "aiohttp":
        return _aiohttp(headers, timeout)
    if name == "reqwest":
        try:
            return _reqwest(headers, timeout)
        except Exception as e:  # noqa: BLE001 - the user asked for it: say why it cannot run
            raise _unusable(e) from e
    if not _reqwest_broken:
        try:
            return _reqwest(headers, timeout)
        except Exception as e:  # noqa: BLE001 - any failure to import or build: the portable client instead
            _fall_back(e)
    return _aiohttp(headers, timeout)


def _reqwest(headers: Mapping[str, str], timeout: float) -> HttpTransport:
    from inferframe.providers.http_reqwest import ReqwestTransport  # imports pyreqwest: only when chosen

    return ReqwestTransport(headers, timeout)


def _aiohttp(headers: Mapping[str, str], timeout: float) -> HttpTransport:
    from inferframe.providers.http_aiohttp import AiohttpTransport

    return AiohttpTransport(headers, timeout)
