"""Command line: ``python -m inferframe.simulator [--port 0] [--rpm 600] [--p-500 0.01] ...``.

Prints the base URL (``http://HOST:PORT/v1``) as the first stdout line, then
serves until SIGTERM/SIGINT (or, with ``--watch-stdin``, until stdin closes,
which is how spawned children die with their parent).  Every scalar field of
SimulatorConfig has a flag (``--field-name``; ``none`` clears an optional
one; booleans take ``--flag/--no-flag``); ``--config-json`` takes a JSON object
(or ``@file.json``) applied before the flags; ``--fail-rule`` takes a JSON
object and may repeat; ``--models`` takes a comma-separated list.

Example::

    python -m inferframe.simulator --port 0 --rpm 600 --latency-ms 30 --p-500 0.01
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import sys
from typing import Any, Optional, Sequence

from .app import create_app
from .config import SimulatorConfig
from .server import start_server
from .state import SimState

__all__ = ["main", "parse_args"]


def _scalar(tp: type, optional: bool):
    def conv(text: str) -> Any:
        if optional and text.lower() in ("none", "null", ""):
            return None
        return tp(text)

    conv.__name__ = tp.__name__
    return conv


def parse_args(argv: Optional[Sequence[str]] = None) -> tuple[argparse.Namespace, SimulatorConfig]:
    """Parse the command line into (namespace, config)."""
    p = argparse.ArgumentParser(prog="python -m inferframe.simulator",
                                description="OpenAI-compatible API simulator")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = a free port")
    p.add_argument("--config-json", default=None, help="JSON object of config fields, or @path")
    p.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches EOF")
    p.add_argument("--log-level", default="WARNING")
    p.add_argument("--responder", default=None, help="import path 'package.module:function'")
    p.add_argument("--models", default=None, help="comma-separated model ids")
    p.add_argument("--fail-rule", action="append", default=[], help="JSON object of a FailRule (repeatable)")
    fields = SimulatorConfig.cli_fields()
    for name, tp, optional in fields:
        flag = "--" + name.replace("_", "-")
        if tp is bool:
            p.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None)
        else:
            p.add_argument(flag, dest=name, type=_scalar(tp, optional), default=argparse.SUPPRESS,
                           metavar=tp.__name__.upper())
    ns = p.parse_args(argv)
    data: dict[str, Any] = {}
    if ns.config_json:
        text = ns.config_json
        if text.startswith("@"):
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        data.update(json.loads(text))
    for name, tp, _ in fields:
        if hasattr(ns, name) and getattr(ns, name) is not None:
            data[name] = getattr(ns, name)
    if ns.responder is not None:
        data["responder"] = ns.responder
    if ns.models is not None:
        data["models"] = [m.strip() for m in ns.models.split(",") if m.strip()]
    if ns.fail_rule:
        data["fail_rules"] = list(data.get("fail_rules", [])) + [json.loads(r) for r in ns.fail_rule]
    return ns, SimulatorConfig.from_dict(data)


class _EofProtocol(asyncio.Protocol):
    def __init__(self, on_eof) -> None:
        self.on_eof = on_eof

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> None:
        self.on_eof()

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.on_eof()


async def _watch_parent(loop: asyncio.AbstractEventLoop, on_exit) -> None:
    """Call ``on_exit`` when stdin closes (parent died); poll the parent pid if stdin is no pipe."""
    try:
        await loop.connect_read_pipe(lambda: _EofProtocol(on_exit), sys.stdin)
        return
    except (ValueError, OSError):
        pass
    parent = os.getppid()

    async def poll() -> None:
        while os.getppid() == parent:
            await asyncio.sleep(0.5)
        on_exit()

    loop.create_task(poll())


async def _serve(ns: argparse.Namespace, cfg: SimulatorConfig) -> None:
    state = SimState(cfg)
    runner, port = await start_server(create_app(state=state), ns.host, ns.port)
    host = f"[{ns.host}]" if ":" in ns.host else ns.host
    sys.stdout.write(f"http://{host}:{port}/v1\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-POSIX
            pass
    if ns.watch_stdin:
        await _watch_parent(loop, stop.set)
    gc.collect()
    gc.freeze()  # startup objects never need scanning again
    await stop.wait()
    await runner.cleanup()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the simulator until stopped; returns the exit code."""
    ns, cfg = parse_args(argv)
    logging.basicConfig(level=ns.log_level.upper(), stream=sys.stderr)
    try:
        import uvloop  # optional speed-up

        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(_serve(ns, cfg))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
