"""Admin routes under /_sim: inspect and reconfigure a running simulator over HTTP.

Routes:
    GET  /_sim/health            -> {"ok": true}
    GET  /_sim/config            -> the config as JSON
    POST /_sim/config            body {field: value, ...} -> apply changes, return the new config
    GET  /_sim/stats[?hashes=1]  -> counters (request_hashes with ?hashes=1)
    POST /_sim/reset             -> zero counters, clear the request log, refill rate limits
    GET  /_sim/requests[?limit=N]-> recorded requests (needs record_requests=true)

Example::

    curl -X POST localhost:PORT/_sim/config -d '{"rpm": 60, "p_500": 0.1}'
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .errors import SimError, invalid_json, invalid_request
from .jsonio import loads
from .pipeline import json_response

__all__ = ["register"]


def register(app: web.Application, state: Any) -> None:
    """Add the /_sim routes."""

    async def health(request: web.Request) -> web.Response:
        return json_response({"ok": True})

    async def get_config(request: web.Request) -> web.Response:
        return json_response(state.cfg.to_dict())

    async def post_config(request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            changes = loads(raw) if raw else {}
        except ValueError:
            return _err(invalid_json())
        if not isinstance(changes, dict):
            return _err(invalid_request("expected a JSON object of config changes"))
        try:
            cfg = state.configure(**changes)
        except (ValueError, TypeError, ImportError, AttributeError) as exc:
            return _err(invalid_request(str(exc)))
        return json_response(cfg.to_dict())

    async def stats(request: web.Request) -> web.Response:
        hashes = request.query.get("hashes", "") not in ("", "0", "false")
        return json_response(state.stats_snapshot(include_hashes=hashes))

    async def reset(request: web.Request) -> web.Response:
        state.reset()
        return json_response({"ok": True})

    async def requests(request: web.Request) -> web.Response:
        recs = state.recorded()
        limit = request.query.get("limit")
        if limit:
            recs = recs[-int(limit):]
        return json_response({"object": "list", "data": recs})

    app.router.add_get("/_sim/health", health)
    app.router.add_get("/_sim/config", get_config)
    app.router.add_post("/_sim/config", post_config)
    app.router.add_get("/_sim/stats", stats)
    app.router.add_post("/_sim/reset", reset)
    app.router.add_get("/_sim/requests", requests)


def _err(e: SimError) -> web.Response:
    return web.Response(body=e.body(), status=e.status, content_type="application/json")
