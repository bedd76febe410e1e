"""Fast JSON encode/decode for the simulator: orjson when installed, else the stdlib C codec.

Functions:
    dumps(obj) -> bytes   compact UTF-8 JSON
    loads(data) -> Any    accepts bytes or str; raises ValueError on invalid JSON

Example:
    >>> dumps({"a": [1, 2.5, "x"]}), loads(dumps({"a": [1, 2.5, "x"]}))
    (b'{"a":[1,2.5,"x"]}', {'a': [1, 2.5, 'x']})
"""

from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["dumps", "loads", "BACKEND"]

try:  # pragma: no cover - depends on the environment
    import orjson as _orjson

    dumps: Callable[[Any], bytes] = _orjson.dumps
    loads: Callable[[Any], Any] = _orjson.loads
    BACKEND = "orjson"
except ImportError:  # pragma: no cover - depends on the environment
    _encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    _decode = json.loads

    def dumps(obj: Any) -> bytes:
        """Encode ``obj`` as compact UTF-8 JSON bytes."""
        return _encode(obj).encode("utf-8")

    def loads(data: Any) -> Any:
        """Decode JSON from bytes/str (ValueError on invalid input)."""
        return _decode(data)

    BACKEND = "json"
