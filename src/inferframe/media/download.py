"""Fetch the bytes behind many locations at once: local paths, file://, http(s):// and fsspec URLs.

One bad location never fails the batch: its slot holds a DownloadError instead.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import aiohttp

from inferframe.errors import DownloadError, PlanError

__all__ = ["DownloadError", "fetch_many", "fetch_many_sync"]

_USER_AGENT = "inferframe-media/0.1 (+aiohttp)"


def _scheme(location: str) -> str:
    if "://" not in location:
        return ""
    scheme = location.split("://", 1)[0].lower()
    # "C://x" is a Windows drive, not a URL scheme.
    return "" if len(scheme) == 1 else scheme


def _local_path(location: str) -> str:
    if _scheme(location) == "file":
        parts = urlsplit(location)
        if parts.netloc not in ("", "localhost"):
            raise DownloadError(
                f"Could not read {location!r}: file:// URLs on another host ({parts.netloc!r}) are not supported",
                url=location,
            )
        return url2pathname(parts.path)
    return os.path.expanduser(location)


def _os_error_reason(e: OSError) -> str:
    if isinstance(e, FileNotFoundError):
        return "file not found"
    if isinstance(e, IsADirectoryError):
        return "it is a directory, not a file"
    if isinstance(e, PermissionError):
        return "permission denied"
    return e.strerror or str(e) or type(e).__name__


def _read_local(location: str) -> bytes:
    path = _local_path(location)
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DownloadError(f"Could not read {location!r}: {_os_error_reason(e)}", url=location) from e


def _read_fsspec(location: str) -> bytes:
    try:
        import fsspec

        with fsspec.open(location, "rb") as f:
            return f.read()
    except ImportError as e:
        # fsspec names the missing backend package (s3fs, gcsfs, huggingface_hub, ...).
        raise DownloadError(f"Could not read {location!r}: {e}", url=location) from e
    except OSError as e:
        raise DownloadError(f"Could not read {location!r}: {_os_error_reason(e)}", url=location) from e
    except ValueError as e:
        raise DownloadError(f"Could not read {location!r}: {e}", url=location) from e


async def _read_http(session: aiohttp.ClientSession, url: str, timeout: float) -> bytes:
    try:
        async with session.get(url, allow_redirects=True, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            if not 200 <= resp.status < 300:
                reason = f" {resp.reason}" if resp.reason else ""
                raise DownloadError(f"GET {url} answered {resp.status}{reason}", url=url, status=resp.status)
            return await resp.read()
    except asyncio.TimeoutError as e:
        raise DownloadError(f"GET {url} timed out after {timeout:g}s", url=url) from e
    except aiohttp.TooManyRedirects as e:
        raise DownloadError(f"GET {url} failed: too many redirects", url=url) from e
    except aiohttp.InvalidURL as e:
        raise DownloadError(f"GET {url} failed: invalid URL", url=url) from e
    except aiohttp.ClientError as e:
        raise DownloadError(f"GET {url} failed: {type(e).__name__}: {e}", url=url) from e


async def _fetch_one(location: Any, session_for, timeout: float) -> bytes:
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not isinstance(location, str):
        raise DownloadError(f"Could not read {location!r}: expected a path or URL string, got {type(location).__name__}")
    if not location:
        raise DownloadError("Could not read '': the location is empty", url=location)
    scheme = _scheme(location)
    if scheme in ("http", "https"):
        return await _read_http(await session_for(), location, timeout)
    reader = _read_local if scheme in ("", "file") else _read_fsspec
    try:
        # The thread cannot be interrupted; on timeout it finishes in the background and is ignored.
        return await asyncio.wait_for(asyncio.to_thread(reader, location), timeout)
    except asyncio.TimeoutError as e:
        raise DownloadError(f"Could not read {location!r}: timed out after {timeout:g}s", url=location) from e



def _check_limits(max_concurrency: Any, timeout: Any) -> None:
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise PlanError(f"max_concurrency must be a positive int, got {max_concurrency!r}")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise PlanError(f"timeout must be a positive number of seconds, got {timeout!r}")


async def _fetch_or_error(location: str, session_for: Any, timeout: float) -> bytes | Exception:
    """The bytes at ``location``, or the DownloadError saying why not: one bad item must not fail the batch."""
    try:
        return await _fetch_one(location, session_for, timeout)
    except DownloadError as e:
        return e
    except Exception as e:
        err = DownloadError(f"Could not read {location!r}: {type(e).__name__}: {e}", url=str(location))
        err.__cause__ = e
        return err

async def fetch_many(
    urls: list[str | None],
    *,
    max_concurrency: int = 32,
    timeout: float = 30.0,
    session: aiohttp.ClientSession | None = None,
) -> list[bytes | Exception | None]:
    """Fetch the bytes at each location, at most max_concurrency at a time, in input order.

    Local paths (``~`` expanded) and ``file://`` URLs are read in a thread;
    ``http(s)://`` goes through one shared aiohttp session, following
    redirects; any other scheme (``s3://``, ``gs://``, ``hf://``,
    ``memory://``) goes through fsspec in a thread. A failed item yields a
    DownloadError in its slot; None yields None. Only cancellation propagates.

    Args:
        urls: locations; None entries pass through as None.
        max_concurrency: most reads in flight at once (HTTP and disk together).
        timeout: seconds allowed per item (the whole HTTP request, or the read).
        session: an aiohttp session to reuse; it is left open. When None, one
            is created for this call (only if an http(s) URL is present) and
            closed at the end.

    Returns:
        One entry per input: bytes, a DownloadError, or None.

    Example:
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> a = pathlib.Path(tmp.name, "a.txt")
        >>> _ = a.write_bytes(b"hi")
        >>> out = asyncio.run(fetch_many([str(a), None, str(a.with_name("missing.png"))]))
        >>> out[:2], out[2].url.endswith("missing.png")
        ([b'hi', None], True)
        >>> tmp.cleanup()
    """
    _check_limits(max_concurrency, timeout)
    items = list(urls)
    results: list[bytes | Exception | None] = [None] * len(items)
    todo = [i for i, u in enumerate(items) if u is not None]
    if not todo:
        return results

    own_session: aiohttp.ClientSession | None = None
    session_lock = asyncio.Lock()

    async def session_for() -> aiohttp.ClientSession:
        nonlocal own_session
        if session is not None:
            return session
        async with session_lock:
            if own_session is None:
                own_session = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=max_concurrency),
                    headers={"User-Agent": _USER_AGENT},
                )
        return own_session

    # A fixed pool of workers rather than a task per item: cheap for long lists and bounded by construction.
    next_index = iter(todo)

    async def worker() -> None:
        for i in next_index:
            results[i] = await _fetch_or_error(items[i], session_for, timeout)

    try:
        await asyncio.gather(*(worker() for _ in range(min(max_concurrency, len(todo)))))
    finally:
        if own_session is not None:
            await own_session.close()
    return results


def fetch_many_sync(urls: list[str | None], **kwargs: Any) -> list[bytes | Exception | None]:
    """Blocking fetch_many for code without an event loop; same arguments and result.

    Example:
        >>> import pathlib, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     notes = pathlib.Path(tmp, "notes.md")
        ...     _ = notes.write_bytes(b"# Notes")
        ...     fetch_many_sync([notes.as_uri(), None])
        [b'# Notes', None]
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(fetch_many(urls, **kwargs))
    raise RuntimeError("fetch_many_sync() cannot run inside an event loop; use `await fetch_many(...)`")
