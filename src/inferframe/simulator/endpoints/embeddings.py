"""POST /v1/embeddings -> ``list`` of ``embedding`` objects.

Input: a string, a list of strings, a token array or a list of token arrays
(at most 2048 inputs, 8192 tokens each).  ``dimensions`` (text-embedding-3
models only, up to the native size), ``encoding_format`` 'float' | 'base64'
(little-endian float32, what the SDK asks for by default).

Example:
    >>> import openai
    >>> from inferframe.simulator import Simulator
    >>> with Simulator() as sim:
    ...     client = openai.OpenAI(base_url=sim.base_url, api_key="x", max_retries=0)
    ...     e = client.embeddings.create(model="text-embedding-3-small", input=["a", "b"], dimensions=256)
    >>> len(e.data), len(e.data[0].embedding)
    (2, 256)
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .. import embeddings as emb
from ..errors import invalid_request
from ..pipeline import Prepared, inference_handler
from ._validate import bad_value, int_param, missing, reject_unknown

__all__ = ["Embeddings", "register"]

KNOWN_PARAMS = frozenset(("input", "model", "dimensions", "encoding_format", "user"))
_MAX_INPUTS = 2048
_MAX_TOKENS = 8192


def _invalid_input():
    return invalid_request(
        "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.",
        param=None,
        code=None,
    )


def _is_tokens(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(t, int) and not isinstance(t, bool) for t in v)


class Embeddings:
    """Endpoint object for the pipeline (see :mod:`..pipeline`)."""

    name = "embeddings"
    path = "/v1/embeddings"
    text_faults = False

    def prepare(self, st: Any, body: dict) -> Prepared:
        if st.cfg.reject_unknown_params:
            reject_unknown(body, KNOWN_PARAMS, "chat")
        model = st.check_model(body, "embedding", self.path)
        if "input" not in body:
            raise missing("input")
        inp = body["input"]
        if isinstance(inp, str):
            items: list = [inp]
        elif _is_tokens(inp):
            items = [inp]
        elif isinstance(inp, list) and inp and all(isinstance(x, str) or _is_tokens(x) for x in inp):
            items = inp
        else:
            raise _invalid_input()
        if len(items) > _MAX_INPUTS:
            raise invalid_request(
                f"Invalid 'input': array too long. Expected an array with maximum length {_MAX_INPUTS}, "
                f"but got an array with length {len(items)} instead.",
                param="input",
                code="array_above_max_length",
            )
        native = emb.default_dims(model)
        dims = int_param(body, "dimensions", minimum=1, maximum=native)
        if dims is not None and "text-embedding-3" not in model:
            raise invalid_request(
                "This model does not support specifying dimensions.", param="dimensions", code=None
            )
        fmt = body.get("encoding_format") or "float"
        if fmt not in ("float", "base64"):
            raise bad_value("encoding_format", fmt, ("float", "base64"))
        counter = st.counter
        total = 0
        texts = []
        for it in items:
            if isinstance(it, str):
                if not it:
                    raise _invalid_input()
                n = counter.count(it, model)
                texts.append(it)
            else:
                n = len(it)
            if n > _MAX_TOKENS:
                raise invalid_request(
                    f"This model's maximum context length is {_MAX_TOKENS} tokens, however you requested {n} "
                    "tokens in the input. Please reduce your input.",
                    param=None,
                    code=None,
                )
            total += n
        text = "\n".join(texts)
        return Prepared(model, body, text, text, total, None, total, "text", None, 1, None,
                        (items, dims or native, fmt))

    def render(self, st: Any, prep: Prepared, result: Any) -> dict:
        items, dims, fmt = prep.extra
        data = []
        for i, it in enumerate(items):
            vec = emb.embed(it, dims) if isinstance(it, str) else emb.embed_tokens(it, dims)
            data.append({"object": "embedding", "index": i, "embedding": emb.encode_vector(vec, fmt)})
        return {
            "object": "list",
            "data": data,
            "model": prep.model,
            "usage": {"prompt_tokens": prep.prompt_tokens, "total_tokens": prep.prompt_tokens},
        }


def register(app: web.Application, state: Any) -> None:
    """Add POST /v1/embeddings."""
    ep = Embeddings()
    app.router.add_post(ep.path, inference_handler(state, ep))
