"""Deterministic embedding vectors: unit-norm, hash-derived, similar for texts sharing words.

A text's vector is the sum of one pseudo-random vector per word (derived from
SHAKE-256 of the lower-cased word) plus a smaller whole-text component, then
normalised to length 1.  Same text -> same vector; texts sharing words have a
higher cosine similarity.  Component i does not depend on the requested
dimension count, so like text-embedding-3 a shortened vector is the
renormalised prefix of the full one.

Functions:
    embed(text, dims) -> list[float] | numpy array (unit norm)
    embed_tokens(tokens, dims) -> same, for token-id inputs
    encode_vector(vec, fmt) -> list[float] (fmt 'float') or base64 str of little-endian float32
    default_dims(model) -> 1536 / 3072

Example:
    >>> v = embed("the cat sat", 8)
    >>> len(v), round(float(v @ v), 6), bool((embed("the cat sat", 8) == v).all())  # unit length, deterministic
    (8, 1.0, True)
"""

from __future__ import annotations

import base64
import math
import re
from array import array
from hashlib import shake_256
from types import MappingProxyType
from typing import Any, Sequence

try:  # numpy makes this ~50x faster; the pure-Python path is the fallback
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the environment
    _np = None

__all__ = ["embed", "embed_tokens", "encode_vector", "default_dims", "MODEL_DIMS"]

#: Native dimension of the embedding models served.
MODEL_DIMS = MappingProxyType({
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
})
_MAX_DIMS = 3072
_WORD_RE = re.compile(r"\w+", re.UNICODE)
_TEXT_WEIGHT = 0.35  # weight of the whole-text component vs the word components
_CACHE_MAX = 8192
_cache: dict[str, Any] = {}


def default_dims(model: str) -> int:
    """Native dimension of ``model`` (3072 for *-large, else 1536)."""
    d = MODEL_DIMS.get(model)
    if d is not None:
        return d
    return 3072 if "large" in model else 1536


def _raw(key: str, dims: int):
    """Pseudo-random components in [-1, 1) for ``key`` (prefix-stable in ``dims``)."""
    data = shake_256(key.encode("utf-8")).digest(dims)
    if _np is not None:
        return _np.frombuffer(data, dtype=_np.int8).astype(_np.float32) * (1.0 / 128.0)
    return [(b - 256 if b > 127 else b) / 128.0 for b in data]


def _word_vec(word: str, dims: int):
    v = _cache.get(word)
    if v is None or len(v) < dims:
        v = _raw("w:" + word, max(dims, 1536))
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[word] = v
    return v[:dims]


def _combine(words: Sequence[str], text_key: str, dims: int):
    if _np is not None:
        acc = _raw("t:" + text_key, dims) * _TEXT_WEIGHT
        for w in words:
            acc += _word_vec(w, dims)
        n = float(_np.sqrt(_np.dot(acc, acc)))
        if n == 0.0:
            acc[0] = 1.0
            return acc
        acc *= 1.0 / n
        return acc
    acc = [x * _TEXT_WEIGHT for x in _raw("t:" + text_key, dims)]
    for w in words:
        acc = [a + b for a, b in zip(acc, _word_vec(w, dims))]
    n = math.sqrt(sum(a * a for a in acc)) or 1.0
    return [a / n for a in acc]


def embed(text: str, dims: int):
    """Unit-norm vector of ``dims`` floats for ``text`` (deterministic)."""
    return _combine(_WORD_RE.findall(text.lower()), text, dims)


def embed_tokens(tokens: Sequence[int], dims: int):
    """Unit-norm vector for a token-id input (each id acts as a word)."""
    return _combine([f"#{t}" for t in tokens], "#" + ",".join(map(str, tokens)), dims)


def encode_vector(vec: Any, fmt: str) -> Any:
    """Encode a vector for the response: list of floats, or base64 of little-endian float32."""
    if fmt == "base64":
        if _np is not None:
            data = _np.asarray(vec, dtype="<f4").tobytes()
        else:
            arr = array("f", vec)
            if arr.itemsize != 4:  # pragma: no cover
                raise RuntimeError("float32 array needed")
            import sys

            if sys.byteorder != "little":  # pragma: no cover
                arr.byteswap()
            data = arr.tobytes()
        return base64.b64encode(data).decode("ascii")
    if _np is not None:
        return _np.round(_np.asarray(vec, dtype=_np.float64), 8).tolist()
    return [round(float(x), 8) for x in vec]
