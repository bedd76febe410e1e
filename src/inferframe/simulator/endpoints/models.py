"""GET /v1/models and GET /v1/models/{model} (the config's ``models``).

Example:
    >>> import openai
    >>> from inferframe.simulator import Simulator
    >>> with Simulator() as sim:
    ...     client = openai.OpenAI(base_url=sim.base_url, api_key="x", max_retries=0)
    ...     ids = [m.id for m in client.models.list()]
    >>> ids[:2]
    ['gpt-4o-mini', 'gpt-4o']
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..errors import SimError
from ..pipeline import simple_handler

__all__ = ["register"]


def register(app: web.Application, state: Any) -> None:
    """Add the model listing routes."""

    def list_models(request: web.Request) -> dict:
        return {"object": "list", "data": state.list_models()}

    def get_model(request: web.Request) -> dict:
        model = request.match_info["model"]
        for m in state.list_models():
            if m["id"] == model:
                return m
        raise SimError(
            404,
            f"The model '{model}' does not exist",
            "invalid_request_error",
            "model",
            "model_not_found",
        )

    app.router.add_get("/v1/models", simple_handler(state, "models", list_models))
    app.router.add_get("/v1/models/{model:.+}", simple_handler(state, "models", get_model))
