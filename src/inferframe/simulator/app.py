"""Builds the aiohttp application: one ``register(app, state)`` call per route module.

Functions:
    create_app(config=None, *, state=None, modules=None, extra_modules=()) -> web.Application
    DEFAULT_MODULES: chat, responses, embeddings, models, admin, files_batches

Unknown /v1 URLs answer OpenAI's 404 ``Invalid URL (METHOD /v1/...)``.  The
state is reachable as ``app[STATE_KEY]``.

Example (serve it with ``web.run_app(app, port=8080)``, ``Simulator`` or ``python -m inferframe.simulator``):
    >>> app = create_app(SimulatorConfig(rpm=60))
    >>> app[STATE_KEY].cfg.rpm, "/v1/chat/completions" in {r.resource.canonical for r in app.router.routes()}
    (60, True)
"""

from __future__ import annotations

from types import ModuleType
from typing import Iterable, Optional, Sequence

from aiohttp import web

from . import admin
from .config import SimulatorConfig
from .endpoints import chat, embeddings, files_batches, models, responses
from .errors import SimError
from .state import SimState

__all__ = ["create_app", "DEFAULT_MODULES", "STATE_KEY"]

DEFAULT_MODULES: tuple[ModuleType, ...] = (chat, responses, embeddings, models, admin, files_batches)
STATE_KEY = web.AppKey("inferframe_sim_state", SimState)
CLIENT_MAX_SIZE = 64 * 1024 * 1024


def create_app(
    config: Optional[SimulatorConfig] = None,
    *,
    state: Optional[SimState] = None,
    modules: Optional[Sequence[ModuleType]] = None,
    extra_modules: Iterable[ModuleType] = (),
) -> web.Application:
    """Create the simulator app.

    Params:
        config: settings (ignored when ``state`` is given).
        state: an existing :class:`SimState` to serve.
        modules: route modules to register (default :data:`DEFAULT_MODULES`).
        extra_modules: more modules, registered after ``modules`` (e.g. files/batches).
    """
    state = state or SimState(config)
    app = web.Application(client_max_size=CLIENT_MAX_SIZE)
    app[STATE_KEY] = state
    for mod in (*(DEFAULT_MODULES if modules is None else modules), *extra_modules):
        mod.register(app, state)

    async def invalid_url(request: web.Request) -> web.Response:
        err = SimError(404, f"Invalid URL ({request.method} {request.path})", "invalid_request_error")
        state.stats.status(404)
        return web.Response(body=err.body(), status=404, content_type="application/json")

    app.router.add_route("*", "/v1/{tail:.*}", invalid_url)
    return app
