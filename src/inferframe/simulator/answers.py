"""Answer text of the text endpoints: responder, default echo, JSON from schema, stop, truncation.

Functions:
    resolve_responder(spec) -> callable | None     (callable or 'module:function')
    default_text(cfg, user_text) -> str
    finish_text(state, prep, raw, fault) -> TextResult   (stop / max tokens / faults)

``TextResult`` has text (None on refusal), refusal (None unless refused),
truncated (hit max tokens or a 'length' fault) and tokens (completion tokens).

Example:
    >>> resolve_responder("json:dumps")({"a": 1})
    '{"a": 1}'
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Optional

from .config import SimulatorConfig
from .jsonio import dumps
from .schema_gen import generate

__all__ = ["resolve_responder", "default_text", "raw_answer", "finish_text", "TextResult"]

_FILLER = (
    " The quick brown fox jumps over the lazy dog while the simulator keeps answering"
    " every request with deterministic text so that benchmarks see realistic sizes."
) * 64


def resolve_responder(spec: Any) -> Optional[Callable[[dict], Any]]:
    """Turn the config's ``responder`` into a callable (import 'module:function' strings)."""
    if spec is None or callable(spec):
        return spec
    mod, _, attr = str(spec).partition(":")
    if not mod or not attr:
        raise ValueError(f"responder import path must look like 'package.module:function', got {spec!r}")
    obj: Any = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"responder {spec!r} is not callable")
    return obj


def is_async(fn: Any) -> bool:
    """True when ``fn`` must be awaited."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def default_text(cfg: SimulatorConfig, user_text: str) -> str:
    """``answer_prefix + user_text[:answer_max_chars]``, padded to ``answer_min_chars``."""
    text = cfg.answer_prefix + user_text[: cfg.answer_max_chars]
    if len(text) < cfg.answer_min_chars:
        need = cfg.answer_min_chars - len(text)
        filler = _FILLER
        while len(filler) < need:
            filler += _FILLER
        text += filler[:need]
    return text


class TextResult:
    """Final answer of a text endpoint (see module docstring)."""

    __slots__ = ("text", "refusal", "truncated", "tokens")

    def __init__(self, text: Optional[str], refusal: Optional[str], truncated: bool, tokens: int) -> None:
        self.text = text
        self.refusal = refusal
        self.truncated = truncated
        self.tokens = tokens


def raw_answer(cfg: SimulatorConfig, prep: Any, responded: Any) -> str:
    """Answer before stop/truncation: the responder's result, else JSON from the schema, else echo."""
    if responded is not None:
        return responded if isinstance(responded, str) else dumps(responded).decode("utf-8")
    if prep.fmt == "json_schema":
        schema = prep.schema if prep.schema is not None else {}
        return dumps(generate(schema, f"{cfg.seed}\x00{prep.text}")).decode("utf-8")
    text = default_text(cfg, prep.user_text)
    if prep.fmt == "json_object":
        return dumps({"answer": text}).decode("utf-8")
    return text


def finish_text(state: Any, prep: Any, raw: str, fault: Optional[str]) -> TextResult:
    """Apply stop sequences, the max-token limit and the 'refusal' / 'length' faults."""
    counter = state.counter
    cfg = state.cfg
    if fault == "refusal":
        return TextResult(None, cfg.refusal_text, False, counter.count(cfg.refusal_text, prep.model))
    text = raw
    if prep.stop:
        cut = min((i for i in (text.find(s) for s in prep.stop if s) if i >= 0), default=-1)
        if cut >= 0:
            text = text[:cut]
    tokens = counter.count(text, prep.model)
    truncated = False
    if prep.max_out is not None and tokens > prep.max_out:
        text = counter.truncate(text, prep.max_out, prep.model)
        tokens = counter.count(text, prep.model)
        truncated = True
    if fault == "length" and not truncated:
        keep = max(1, tokens // 2)
        text = counter.truncate(text, keep, prep.model)
        tokens = counter.count(text, prep.model)
        truncated = True
    return TextResult(text, None, truncated, tokens)
