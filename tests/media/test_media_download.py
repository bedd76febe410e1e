"""fetch_many against a local aiohttp server, local files and fsspec's memory filesystem."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import pickle
import time
import uuid

import aiohttp
import fsspec
import pytest
from aiohttp import web

from inferframe.errors import InferframeError
from inferframe.media import DownloadError, download, fetch_many, fetch_many_sync

pytestmark = pytest.mark.timeout(60)


class Server:
    """A local test server: /ok/{n}, /delay/{n}?ms=, /status/{code}, /slow, /redirect, /count."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self.user_agents: list[str] = []
        self.release = asyncio.Event()
        app = web.Application()
        app.router.add_get("/ok/{n}", self.ok)
        app.router.add_get("/delay/{n}", self.delay)
        app.router.add_get("/status/{code}", self.status)
        app.router.add_get("/slow", self.slow)
        app.router.add_get("/redirect", self.redirect)
        app.router.add_get("/count", self.count)
        self.runner = web.AppRunner(app)
        self.base = ""

    async def __aenter__(self) -> "Server":
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc) -> None:
        self.release.set()  # let parked /slow handlers finish so shutdown is quick
        await self.runner.cleanup()

    def url(self, path: str) -> str:
        return self.base + path

    async def ok(self, request: web.Request) -> web.Response:
        self.user_agents.append(request.headers.get("User-Agent", ""))
        return web.Response(body=f"payload-{request.match_info['n']}".encode())

    async def delay(self, request: web.Request) -> web.Response:
        await asyncio.sleep(int(request.query.get("ms", "0")) / 1000)
        return web.Response(body=f"delayed-{request.match_info['n']}".encode())

    async def status(self, request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="nope")

    async def slow(self, request: web.Request) -> web.Response:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.release.wait(), 10)
        return web.Response(body=b"too late")

    async def redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/ok/redirected")

    async def count(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.03)
        finally:
            self.in_flight -= 1
        return web.Response(body=b"counted")


def run(coro_fn):
    """Run an async test body against a fresh server; no pytest-asyncio needed."""

    async def main():
        async with Server() as server:
            return await coro_fn(server)

    return asyncio.run(main())


@pytest.fixture
def files(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    good = tmp_path / "good.bin"
    good.write_bytes(b"local bytes")
    spaced = tmp_path / "with space.txt"
    spaced.write_bytes(b"spaced")
    return {"good": good, "spaced": spaced, "missing": tmp_path / "missing.png", "dir": tmp_path}


@pytest.fixture
def memory_url():
    url = f"memory://inferframe-media-test/{uuid.uuid4().hex}.bin"
    with fsspec.open(url, "wb") as f:
        f.write(b"from memory")
    yield url
    fsspec.filesystem("memory").rm(url.removeprefix("memory://"))


def test_mixed_batch_failures_stay_in_their_slots(files, memory_url):
    async def body(server: Server):
        urls = [
            str(files["good"]),
            None,
            str(files["missing"]),
            server.url("/ok/1"),
            server.url("/status/404"),
            server.url("/slow"),
            memory_url,
            server.url("/redirect"),
            files["good"].as_uri(),
            server.url("/status/500"),
        ]
        start = time.monotonic()
        out = await fetch_many(urls, timeout=0.5)
        return out, time.monotonic() - start

    out, elapsed = run(body)
    assert len(out) == 10
    assert out[0] == b"local bytes"
    assert out[1] is None
    assert isinstance(out[2], DownloadError)
    assert str(out[2]) == f"Could not read {str(files['missing'])!r}: file not found"
    assert out[3] == b"payload-1"
    assert isinstance(out[4], DownloadError) and out[4].status == 404
    assert str(out[4]).startswith("GET http://127.0.0.1:") and str(out[4]).endswith("/status/404 answered 404 Not Found")
    assert isinstance(out[5], DownloadError) and "timed out after 0.5s" in str(out[5]) and out[5].status is None
    assert out[6] == b"from memory"
    assert out[7] == b"payload-redirected"
    assert out[8] == b"local bytes"
    assert isinstance(out[9], DownloadError) and out[9].status == 500
    assert elapsed < 5  # the slow endpoint was cut off by the timeout, not awaited
    assert all(isinstance(x, InferframeError) for x in (out[2], out[4], out[5], out[9]))


def test_order_preserved_when_completion_order_differs():
    async def body(server: Server):
        # Earlier items take longer, so they finish last.
        urls = [server.url(f"/delay/{i}?ms={(10 - i) * 15}") for i in range(10)]
        return await fetch_many(urls, max_concurrency=10)

    assert run(body) == [f"delayed-{i}".encode() for i in range(10)]


@pytest.mark.parametrize("limit", [1, 4])
def test_concurrency_is_bounded(limit):
    async def body(server: Server):
        out = await fetch_many([server.url("/count")] * 24, max_concurrency=limit)
        return out, server.max_in_flight

    out, max_seen = run(body)
    assert out == [b"counted"] * 24
    assert max_seen == limit  # never above the bound, and the bound is actually used


def test_own_session_is_created_once_and_closed(monkeypatch):
    created: list[aiohttp.ClientSession] = []
    real = aiohttp.ClientSession

    def spy(*args, **kwargs):
        session = real(*args, **kwargs)
        created.append(session)
        return session

    monkeypatch.setattr(download.aiohttp, "ClientSession", spy)

    async def body(server: Server):
        out = await fetch_many([server.url(f"/ok/{i}") for i in range(6)], max_concurrency=3)
        return out, list(server.user_agents)

    out, agents = run(body)
    assert out == [f"payload-{i}".encode() for i in range(6)]
    assert len(created) == 1 and created[0].closed
    assert all(a.startswith("inferframe-media/") for a in agents)


def test_given_session_is_used_and_left_open():
    async def body(server: Server):
        async with aiohttp.ClientSession(headers={"User-Agent": "caller-agent"}) as session:
            out = await fetch_many([server.url("/ok/a")], session=session)
            still_open = not session.closed
        return out, still_open, list(server.user_agents)

    out, still_open, agents = run(body)
    assert out == [b"payload-a"] and still_open and agents == ["caller-agent"]


def test_no_session_without_http(monkeypatch, files):
    monkeypatch.setattr(download.aiohttp, "ClientSession", lambda *a, **k: pytest.fail("opened a session"))
    out = fetch_many_sync([str(files["good"]), None])
    assert out == [b"local bytes", None]


def test_local_path_variants(files, monkeypatch):
    monkeypatch.setenv("HOME", str(files["dir"]))
    out = fetch_many_sync(
        [
            files["spaced"].as_uri(),  # percent-encoded space
            "~/good.bin",
            files["good"],  # os.PathLike
            str(files["dir"]),
            "",
            123,
            "file://otherhost/x.txt",
        ]
    )
    assert out[:3] == [b"spaced", b"local bytes", b"local bytes"]
    assert "it is a directory" in str(out[3])
    assert str(out[4]) == "Could not read '': the location is empty"
    assert "expected a path or URL string, got int" in str(out[5])
    assert "another host" in str(out[6])


def test_fsspec_errors(memory_url):
    missing = memory_url.replace(".bin", "-missing.bin")
    out = fetch_many_sync([missing, "nosuchproto://bucket/key", memory_url])
    assert str(out[0]) == f"Could not read {missing!r}: file not found"
    assert isinstance(out[1], DownloadError) and "nosuchproto" in str(out[1])
    assert out[2] == b"from memory"


def test_unreachable_host_is_an_error_in_its_slot():
    async def body(server: Server):
        port = int(server.base.rsplit(":", 1)[1])
        await server.runner.cleanup()  # nothing listens on this port any more
        return await fetch_many([f"http://127.0.0.1:{port}/ok/1", "http://[::1"], timeout=5)

    out = run(body)
    assert isinstance(out[0], DownloadError) and str(out[0]).startswith("GET http://127.0.0.1:")
    assert "failed" in str(out[0])
    assert isinstance(out[1], DownloadError)


def test_thread_reads_time_out(files, monkeypatch):
    def slow_read(location):
        time.sleep(0.6)
        return b"late"

    monkeypatch.setattr(download, "_read_local", slow_read)
    out = fetch_many_sync([str(files["good"])], timeout=0.1)
    assert isinstance(out[0], DownloadError) and "timed out after 0.1s" in str(out[0])


def test_unexpected_exceptions_are_wrapped(files, monkeypatch):
    def boom(location):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(download, "_read_local", boom)
    [err] = fetch_many_sync([str(files["good"])])
    assert isinstance(err, DownloadError) and "RuntimeError: disk on fire" in str(err)
    assert isinstance(err.__cause__, RuntimeError)


def test_cancellation_propagates_and_closes_session(monkeypatch):
    created: list[aiohttp.ClientSession] = []
    real = aiohttp.ClientSession
    monkeypatch.setattr(download.aiohttp, "ClientSession", lambda *a, **k: created.append(real(*a, **k)) or created[-1])

    async def body(server: Server):
        task = asyncio.create_task(fetch_many([server.url("/slow")] * 3))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return created[0].closed

    assert run(body) is True


def test_all_none_and_empty():
    assert fetch_many_sync([None, None]) == [None, None]
    assert fetch_many_sync([]) == []


@pytest.mark.parametrize("kwargs", [{"max_concurrency": 0}, {"max_concurrency": 2.5}, {"timeout": 0}, {"timeout": -1}])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        fetch_many_sync(["x"], **kwargs)


def test_sync_wrapper_refuses_inside_a_loop():
    async def body():
        with pytest.raises(RuntimeError, match="inside an event loop"):
            fetch_many_sync(["x"])

    asyncio.run(body())


def test_download_error_pickles_with_fields():
    err = DownloadError("GET https://x/y answered 404 Not Found", url="https://x/y", status=404)
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.url, back.status) == (str(err), "https://x/y", 404)
