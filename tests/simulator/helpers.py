"""Helpers for the simulator tests: SDK/raw clients and strict shape checks."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Optional

import openai
import pydantic

from inferframe.simulator import Simulator, SimulatorConfig


def make_sim(**cfg: Any) -> Simulator:
    """Simulator with config fields ``cfg`` (use as a context manager)."""
    return Simulator(SimulatorConfig(**cfg))


def sdk(sim: Simulator, **kw: Any) -> openai.OpenAI:
    """SDK client for ``sim`` (api_key 'x', max_retries 0 unless given)."""
    kw.setdefault("api_key", "x")
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 10)
    return openai.OpenAI(base_url=sim.base_url, **kw)


def post(url: str, body: Any, headers: Optional[dict] = None, raw: Optional[bytes] = None,
         method: str = "POST", timeout: float = 10) -> tuple[int, dict, Any]:
    """Plain HTTP call: returns (status, lower-cased headers, parsed JSON body or raw text)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    h = {"Content-Type": "application/json", "Authorization": "Bearer x"}
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, hdrs, payload = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        status, hdrs, payload = exc.code, exc.headers, exc.read()
    text = payload.decode("utf-8")
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = text
    return status, {k.lower(): v for k, v in hdrs.items()}, parsed


def chat_body(text: str = "hello", **kw: Any) -> dict:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    body.update(kw)
    return body


def assert_strict(model_cls: type, body: dict, wire_only: frozenset = frozenset()):
    """Validate ``body`` with the SDK model; fail on missing required keys and, recursively, on keys
    the model does not declare (except top-level ``wire_only`` keys the live API is known to send)."""
    obj = model_cls.model_validate(body)
    required = {n for n, f in model_cls.model_fields.items() if f.is_required()}
    assert required <= set(body), f"missing required keys {sorted(required - set(body))}"
    _no_extra(obj, model_cls.__name__, wire_only)
    return obj


def _no_extra(obj: Any, path: str, allowed: frozenset = frozenset()) -> None:
    if isinstance(obj, pydantic.BaseModel):
        extra = set(obj.model_extra or {}) - allowed
        assert not extra, f"{path}: keys not in the SDK model: {sorted(extra)}"
        for name in type(obj).model_fields:
            _no_extra(getattr(obj, name), f"{path}.{name}")
    elif isinstance(obj, list):
        for i, x in enumerate(obj):
            _no_extra(x, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k, x in obj.items():
            _no_extra(x, f"{path}[{k!r}]")


def assert_error_shape(body: Any, type_: Optional[str] = None, code: Any = "<any>") -> dict:
    """Check OpenAI's error body shape exactly; return the inner error dict."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    if type_ is not None:
        assert err["type"] == type_, err
    if code != "<any>":
        assert err["code"] == code, err
    return err
