"""What a provider needs of an HTTP client, and the one mapping from a failed request to a row's error.

Both clients (``providers/http_reqwest.py``, ``providers/http_aiohttp.py``) implement
``HttpTransport`` and turn every failure into a ``SendFailed`` through ``failure``, so a row's error
kind and message do not depend on the client; ``providers/http.py`` chooses between them.

Example:
    >>> failure("timeout", timeout=2.5).message
    'No answer within 2.5 s'
    >>> e = failure("connect", errno=111, url="http://127.0.0.1:8000/v1/chat/completions?key=k")
    >>> e.kind.value, e.message
    ('connection', 'connection failed (Connection refused): nothing answers at http://127.0.0.1:8000/v1/chat/completions. Start the server there, or point base_url at a running one.')
    >>> failure("other", detail="bad header Bearer sk-1", secrets=("Bearer sk-1",)).message
    'request failed (bad header ***)'
"""

from __future__ import annotations

import errno as errnos
import os
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Protocol

from inferframe.errors import ErrorKind

# No server listens there (or none can be reached): the fix is the server or the base_url, so the message names both.
NO_SERVER = frozenset({errnos.ECONNREFUSED, errnos.EHOSTUNREACH, errnos.ENETUNREACH, errnos.EADDRNOTAVAIL})

# Header names whose values are secrets: marked sensitive (reqwest), masked in any message.
SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "proxy-authorization"})


class SendFailed(Exception):
    """No HTTP answer came back: the kind of failure and a message that names it (never the key)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class HttpTransport(Protocol):
    """What a provider needs of an HTTP client: post JSON, read the answer, close.

    ``post`` returns ``(status, raw body, headers)`` (headers read case-insensitively with ``get``)
    for any HTTP answer, 4xx and 5xx included, and raises ``SendFailed`` when none came back.
    After ``aclose`` a request still running fails as CONNECTION and a later one is not sent.
    """

    timeout: float
    closed: bool

    async def post(self, url: str, body: bytes) -> tuple[int, bytes, Mapping[str, str]]: ...

    async def aclose(self) -> None: ...


def failure(reason: str, *, timeout: float | None = None, errno: int | None = None, detail: str = "",
            secrets: Iterable[str] = (), url: str | None = None) -> SendFailed:
    """The one mapping from a failed request to a row's error: the same for every client.

    Parameters:
        reason: "timeout" (no whole answer within ``timeout``), "connect" (no connection: refused,
            reset, unreachable), "dns" (the host name did not resolve), "closed" (the server closed
            the connection before answering), "stopped" (the job stopped: the client is closed),
            else any failure the client could not place ("other").
        errno: the operating system's error number, when the client gives one (it names the cause).
        detail: the client's own words, used only where no errno names the cause.
        secrets: header values masked out of ``detail`` (the key).
        url: the request's address: where no server answered (refused, unreachable, an unknown host), the
            message names it (without its query or user part, which may carry a key) and the fix.
    """
    if reason == "timeout":
        return SendFailed(ErrorKind.TIMEOUT, f"No answer within {timeout:g} s")
    if reason == "stopped":
        return SendFailed(ErrorKind.CONNECTION, "the job stopped before this request had its answer")
    cause = os.strerror(errno) if errno and errno > 0 else _masked(detail, secrets)
    where = _address(url)
    if reason == "dns":
        fix = f": {where} names a host that does not resolve. Fix the host in base_url." if where else ""
        return SendFailed(ErrorKind.CONNECTION, f"connection failed (the host name did not resolve: {cause}){fix}")
    if reason == "closed" and not errno:
        return SendFailed(ErrorKind.CONNECTION, "connection failed (the server closed it before answering)")
    if reason in ("connect", "closed"):
        fix = (f": nothing answers at {where}. Start the server there, or point base_url at a running one."
               if where and errno in NO_SERVER else "")
        return SendFailed(ErrorKind.CONNECTION, f"connection failed ({cause}){fix}")
    return SendFailed(ErrorKind.CONNECTION, f"request failed ({cause})")


def _address(url: str | None) -> str:
    """``url`` without its user part, query and fragment (a key may ride in any of them)."""
    if not url:
        return ""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:  # a port that is no number: say nothing of the address rather than fail the row's error
        return ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}{parts.path}"


def _masked(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def secret_values(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The values of ``headers`` that are secrets (``SECRET_HEADERS``), bare tokens included.

    Example:
        >>> secret_values({"Authorization": "Bearer sk-1", "X-Title": "t"})
        ('Bearer sk-1', 'sk-1')
    """
    out: list[str] = []
    for name, value in headers.items():
        if name.lower() in SECRET_HEADERS and value:
            out.append(value)
            token = value.partition(" ")[2]
            if token:
                out.append(token)
    return tuple(out)
