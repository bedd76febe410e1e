"""Running the simulator: in-process on a background thread, or as a separate process.

Classes:
    Simulator(config=None, *, host='127.0.0.1', port=0, extra_modules=(), **overrides)
        context manager; runs the app on its own event loop in a daemon thread.
        .base_url ('http://127.0.0.1:PORT/v1'), .url, .port, .state, .config,
        .stats(include_hashes=False), .configure(**changes), .reset(), .requests(),
        .start(), .stop(); Simulator.spawn(config=None, **kw) -> SimulatorProcess
    SimulatorProcess(config=None, *, host, port, python, startup_timeout, env, **overrides)
        ``python -m inferframe.simulator`` as a child process (own CPU / GIL);
        same .base_url / .stats / .configure / .reset / .requests, plus .close(), .pid.
        Killed at interpreter exit (atexit) and exits by itself when the parent dies.
Functions:
    start_server(app, host, port) -> (runner, port)   (async; used by both and the CLI)

Example:
    >>> import openai
    >>> with Simulator(SimulatorConfig(rpm=600)) as sim:
    ...     client = openai.OpenAI(base_url=sim.base_url, api_key="x", max_retries=0)
    ...     _ = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    ...     sim.stats()["total_requests"]
    1
    >>> with Simulator.spawn(SimulatorConfig(latency_ms=50)) as proc:  # point a benchmark at proc.base_url
    ...     proc.base_url.startswith("http://127.0.0.1:"), proc.pid != os.getpid()
    (True, True)
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from types import ModuleType
from typing import Any, Iterable, Optional

from aiohttp import web

from .app import create_app
from .config import SimulatorConfig
from .state import SimState

__all__ = ["Simulator", "SimulatorProcess", "start_server"]


async def start_server(app: web.Application, host: str = "127.0.0.1", port: int = 0,
                       backlog: int = 4096) -> tuple[web.AppRunner, int]:
    """Start ``app`` on (host, port) (0 = a free port); return the runner and the bound port."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True,
                           shutdown_timeout=0.5)
    await runner.setup()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        await runner.cleanup()
        raise
    site = web.SockSite(runner, sock, backlog=backlog)
    await site.start()
    return runner, sock.getsockname()[1]


def _config(config: Optional[SimulatorConfig], overrides: dict) -> SimulatorConfig:
    cfg = config or SimulatorConfig()
    return cfg.updated(**overrides) if overrides else cfg


class Simulator:
    """In-process simulator on a background thread (see module docstring).

    Params:
        config: :class:`SimulatorConfig` (default settings when None).
        host, port: where to listen (port 0 = a free port).
        extra_modules: additional route modules (``register(app, state)``).
        **overrides: config field changes applied on top of ``config``.
    """

    def __init__(self, config: Optional[SimulatorConfig] = None, *, host: str = "127.0.0.1", port: int = 0,
                 extra_modules: Iterable[ModuleType] = (), **overrides: Any) -> None:
        self.state = SimState(_config(config, overrides))
        self.host = host
        self.port = port
        self._extra = tuple(extra_modules)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._runner: Optional[web.AppRunner] = None

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> "Simulator":
        """Start serving; returns self once the port is bound."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        error: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                app = create_app(state=self.state, extra_modules=self._extra)
                self._runner, self.port = loop.run_until_complete(start_server(app, self.host, self.port))
            except BaseException as exc:  # report to start()
                error.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                try:
                    loop.run_until_complete(self._runner.cleanup())
                    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                    for t in pending:
                        t.cancel()
                    if pending:
                        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                finally:
                    loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="inferframe-simulator", daemon=True)
        self._thread.start()
        ready.wait(30)
        if error:
            self._thread.join()
            self._thread = None
            raise error[0]
        return self

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        self._thread = None

    def __enter__(self) -> "Simulator":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------

    @property
    def url(self) -> str:
        """Server root, e.g. 'http://127.0.0.1:PORT'."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """OpenAI base URL, e.g. 'http://127.0.0.1:PORT/v1'."""
        return self.url + "/v1"

    # -- control (run on the server's loop so counters are read consistently) --

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = self._loop
        if self._thread is None or loop is None or loop.is_closed():
            return fn(*args, **kwargs)

        async def call() -> Any:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(call(), loop).result(30)

    @property
    def config(self) -> SimulatorConfig:
        """The current config."""
        return self.state.cfg

    def configure(self, **changes: Any) -> SimulatorConfig:
        """Change config fields on the running server (callables allowed for ``responder``)."""
        return self._call(self.state.configure, **changes)

    def stats(self, include_hashes: bool = False) -> dict:
        """Counters snapshot (see :class:`~inferframe.simulator.stats.Stats`)."""
        return self._call(self.state.stats_snapshot, include_hashes)

    def reset(self) -> None:
        """Zero counters, clear the request log, refill rate limits."""
        self._call(self.state.reset)

    def requests(self) -> list[dict]:
        """Recorded requests (``record_requests=True``): dicts with ts, method, path, hash, body."""
        return self._call(self.state.recorded)

    @staticmethod
    def spawn(config: Optional[SimulatorConfig] = None, **kwargs: Any) -> "SimulatorProcess":
        """Start the simulator in a child process; see :class:`SimulatorProcess`."""
        return SimulatorProcess(config, **kwargs)


class SimulatorProcess:
    """The simulator as a child process ``python -m inferframe.simulator`` (see module docstring).

    Params:
        config: settings; a responder must be an import path string.
        host, port: where the child listens (port 0 = a free port).
        python: interpreter to run (default sys.executable).
        startup_timeout: seconds to wait for the child's base-URL line.
        env: environment for the child (default os.environ; PYTHONPATH gets this package's root).
        **overrides: config field changes applied on top of ``config``.
    """

    def __init__(self, config: Optional[SimulatorConfig] = None, *, host: str = "127.0.0.1", port: int = 0,
                 python: Optional[str] = None, startup_timeout: float = 30.0,
                 env: Optional[dict] = None, **overrides: Any) -> None:
        cfg = _config(config, overrides)
        src_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, child_env.get("PYTHONPATH")) if p)
        args = [python or sys.executable, "-m", "inferframe.simulator", "--host", host, "--port", str(port),
                "--config-json", json.dumps(cfg.to_json_dict()), "--watch-stdin"]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env)
        self.pid = self.proc.pid
        atexit.register(self.close)
        lines: "queue.Queue[Optional[bytes]]" = queue.Queue()

        def pump() -> None:  # first line -> queue, the rest is drained so the child never blocks
            out = self.proc.stdout
            assert out is not None
            first = True
            for line in iter(out.readline, b""):
                if first:
                    lines.put(line)
                    first = False
            if first:
                lines.put(None)

        threading.Thread(target=pump, name=f"simulator-stdout-{self.pid}", daemon=True).start()
        try:
            line = lines.get(timeout=startup_timeout)
        except queue.Empty:
            self.close()
            raise TimeoutError(f"simulator process did not start within {startup_timeout}s") from None
        if not line or not line.startswith(b"http"):
            code = self.proc.poll()
            self.close()
            raise RuntimeError(f"simulator process failed to start (exit code {code}, first line {line!r})")
        self.base_url = line.decode().strip()
        self.url = self.base_url[: -len("/v1")]
        self.port = int(self.url.rsplit(":", 1)[1])

    # -- lifecycle -------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``timeout``); idempotent."""
        proc = self.proc
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in (proc.stdin, proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        atexit.unregister(self.close)

    def __enter__(self) -> "SimulatorProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- control over the admin routes -----------------------------------------

    def _admin(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")
            raise ValueError(f"simulator admin {method} {path} failed: {exc.code} {body}") from None

    @property
    def config(self) -> SimulatorConfig:
        """The child's current config."""
        data = self._admin("GET", "/_sim/config")
        if isinstance(data.get("responder"), str) and data["responder"].startswith("<callable"):
            data["responder"] = None
        return SimulatorConfig.from_dict(data)

    def configure(self, **changes: Any) -> dict:
        """Change config fields in the child; returns the new config as a dict."""
        return self._admin("POST", "/_sim/config", changes)

    def stats(self, include_hashes: bool = False) -> dict:
        """Counters snapshot of the child."""
        return self._admin("GET", "/_sim/stats" + ("?hashes=1" if include_hashes else ""))

    def reset(self) -> None:
        """Zero counters, clear the request log, refill rate limits."""
        self._admin("POST", "/_sim/reset", {})

    def requests(self) -> list[dict]:
        """Recorded requests of the child."""
        return self._admin("GET", "/_sim/requests")["data"]
