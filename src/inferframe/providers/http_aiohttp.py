"""The portable HTTP client: aiohttp, on the event loop, wherever Python and asyncio run.

One ``ClientSession`` per client, opened on the first request (a session belongs to the event
loop it was opened on), with an unbounded connection pool (``limit=0``: the runtime bounds the
requests in flight), as the Batch API's session in ``providers/openai.py``. No proxy from the
environment (``trust_env=False``), no cookies kept (``DummyCookieJar``), no redirects followed.
Failures go through ``providers.http_interface.failure``, the same mapping as reqwest's.

Example:
    >>> t = AiohttpTransport({"Authorization": "Bearer sk-x"}, timeout=5.0)
    >>> "sk-x" in repr(t), t.closed
    (False, False)
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp

from inferframe.providers.http_interface import SendFailed, failure, secret_values


class AiohttpTransport:
    """POST JSON bodies to one service through one pooled aiohttp session; the answer as (status, body, headers).

    Parameters:
        headers: sent with every request (the key among them; never in a repr or message).
        timeout: seconds for a whole request, connection included.

    Example:
        >>> AiohttpTransport({}, timeout=1.0).closed
        False
    """

    def __init__(self, headers: Mapping[str, str], timeout: float) -> None:
        self.timeout = timeout
        self.closed = False
        self._headers = {**headers, "Content-Type": "application/json"}
        self._secrets = secret_values(headers)
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"AiohttpTransport(timeout={self.timeout:g}, closed={self.closed})"

    def __reduce__(self):
        raise TypeError("A live HTTP client holds a key and a connection pool; it does not pickle.")

    def _open(self) -> aiohttp.ClientSession:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=30),
            timeout=aiohttp.ClientTimeout(total=self.timeout), headers=self._headers, trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar())
        return self._session

    async def post(self, url: str, body: bytes) -> tuple[int, bytes, Mapping[str, str]]:
        """Send one request; return ``(status, raw body, headers)`` or raise ``SendFailed``."""
        if self.closed:
            raise failure("stopped")
        session = self._session or self._open()
        try:
            async with session.post(url, data=body, allow_redirects=False) as resp:
                raw = await resp.read()
                return resp.status, raw, resp.headers
        except asyncio.TimeoutError:  # aiohttp's whole-request timeout (TimeoutError on 3.11)
            raise failure("timeout", timeout=self.timeout) from None
        except (aiohttp.ClientError, OSError) as e:
            raise self._failed(e, url) from None

    def _failed(self, e: Exception, url: str = "") -> SendFailed:
        if self.closed:
            return failure("stopped")
        if isinstance(e, aiohttp.ClientConnectorDNSError):
            os_error = e.os_error
            return failure("dns", detail=os_error.strerror or str(os_error), secrets=self._secrets, url=url)
        if isinstance(e, aiohttp.ClientConnectorError):
            return failure("connect", errno=e.errno, detail=str(e.os_error), secrets=self._secrets, url=url)
        if isinstance(e, aiohttp.ServerDisconnectedError):
            return failure("closed")
        if isinstance(e, OSError) and e.errno:  # ClientOSError: the connection broke (reset) mid-request
            return failure("connect", errno=e.errno, url=url)
        return failure("other", detail=f"{type(e).__name__}: {e}", secrets=self._secrets)

    async def aclose(self) -> None:
        """Close the pool; requests still running fail as CONNECTION, later ones are not sent."""
        self.closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()
