"""Small request-field validators shared by the endpoint modules (OpenAI error wording).

Example:
    >>> int_param({"n": 3}, "n", minimum=1, default=1), int_param({}, "n", minimum=1, default=1)
    (3, 1)
    >>> int_param({"n": 0}, "n", minimum=1, default=1)
    Traceback (most recent call last):
    ...
    inferframe.simulator.errors.SimError: Invalid 'n': integer below minimum value. Expected a value >= 1, but got 0 instead.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from ..errors import invalid_request
from ..prompts import type_name

__all__ = ["int_param", "reject_unknown", "missing", "bad_value"]


def missing(param: str):
    """400 missing_required_parameter."""
    return invalid_request(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def bad_value(param: str, value: Any, allowed: Iterable[str]):
    """400 invalid_value listing the supported values."""
    allowed = [f"'{a}'" for a in allowed]
    listed = ", ".join(allowed[:-1]) + f", and {allowed[-1]}" if len(allowed) > 1 else allowed[0]
    return invalid_request(
        f"Invalid value: '{value}'. Supported values are: {listed}.", param=param, code="invalid_value"
    )


def int_param(body: dict, name: str, minimum: Optional[int] = None, maximum: Optional[int] = None,
              default: Optional[int] = None, param: Optional[str] = None) -> Optional[int]:
    """Read an optional integer field with bounds (400 on wrong type / out of range)."""
    v = body.get(name)
    if v is None:
        return default
    param = param or name
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise invalid_request(
                f"Invalid type for '{param}': expected an integer, but got {type_name(v)} instead.",
                param=param,
                code="invalid_type",
            )
    if minimum is not None and v < minimum:
        raise invalid_request(
            f"Invalid '{param}': integer below minimum value. Expected a value >= {minimum}, but got {v} instead.",
            param=param,
            code="integer_below_min_value",
        )
    if maximum is not None and v > maximum:
        raise invalid_request(
            f"Invalid '{param}': integer above maximum value. Expected a value <= {maximum}, but got {v} instead.",
            param=param,
            code="integer_above_max_value",
        )
    return v


def reject_unknown(body: dict, known: frozenset, style: str) -> None:
    """400 for fields the real endpoint does not accept (``style``: 'chat' or 'responses' wording)."""
    unknown = body.keys() - known
    if not unknown:
        return
    name = sorted(unknown)[0]
    if style == "responses":
        raise invalid_request(f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter")
    raise invalid_request(f"Unrecognized request argument supplied: {name}", param=None, code=None)
