"""Registry of vectorised functions: each name maps to a pyarrow compute kernel.

A function takes Arrow arrays (or scalars) and keyword params and returns an
array. Type inference runs the same function on empty arrays, so adding a
function here is all it takes for both planning and execution.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc


@dataclasses.dataclass(frozen=True)
class Function:
    display: str
    evaluate: Callable[[list, dict], Any]


REGISTRY: dict[str, Function] = {}


def register(name: str, display: str | None = None):
    def deco(fn: Callable[[list, dict], Any]):
        REGISTRY[name] = Function(display or name, fn)
        return fn

    return deco


def empty_of(t: pa.DataType) -> pa.Array:
    return pa.nulls(0, type=t)  # pa.array([], type) cannot build structs holding extension types


def _simple(name: str, kernel: str, display: str | None = None) -> None:
    k = getattr(pc, kernel)
    register(name, display)(lambda args, params: k(*args))


for _name, _kernel, _disp in [
    ("add", "add_checked", "'+'"),
    ("sub", "subtract_checked", "'-'"),
    ("mul", "multiply_checked", "'*'"),
    ("pow", "power_checked", "'**'"),
    ("eq", "equal", "'=='"),
    ("ne", "not_equal", "'!='"),
    ("lt", "less", "'<'"),
    ("le", "less_equal", "'<='"),
    ("gt", "greater", "'>'"),
    ("ge", "greater_equal", "'>='"),
    ("and", "and_kleene", "'&'"),
    ("or", "or_kleene", "'|'"),
    ("xor", "xor", "'^'"),
    ("not", "invert", "'~'"),
    ("neg", "negate_checked", "unary '-'"),
    ("abs", "abs_checked", "abs()"),
    ("is_null", "is_null", "is_null()"),
    ("not_null", "is_valid", "not_null()"),
    ("fill_null", "coalesce", "fill_null()"),
    ("if_else", "if_else", "if_else()"),
    ("str.lower", "utf8_lower", "str.lower()"),
    ("str.upper", "utf8_upper", "str.upper()"),
    ("str.length", "utf8_length", "str.length()"),
    ("str.strip", "utf8_trim_whitespace", "str.strip()"),
    ("list.length", "list_value_length", "list.length()"),
    ("list.flatten", "list_flatten", "list.flatten()"),
]:
    _simple(_name, _kernel, _disp)


@register("div", "'/'")
def _div(args, params):
    a, b = args
    # True division like Python: ints become floats instead of truncating.
    return pc.divide(pc.cast(a, pa.float64()), pc.cast(b, pa.float64()))


@register("floordiv", "'//'")
def _floordiv(args, params):
    a, b = args
    return pc.floor(pc.divide(pc.cast(a, pa.float64()), pc.cast(b, pa.float64())))


@register("mod", "'%'")
def _mod(args, params):
    a, b = args
    q = pc.floor(pc.divide(pc.cast(a, pa.float64()), pc.cast(b, pa.float64())))
    out = pc.subtract(pc.cast(a, pa.float64()), pc.multiply(q, pc.cast(b, pa.float64())))
    both_int = pa.types.is_integer(_type(a)) and pa.types.is_integer(_type(b))
    return pc.cast(out, pa.int64()) if both_int else out


def _type(x) -> pa.DataType:
    return x.type


@register("round", "round()")
def _round(args, params):
    return pc.round(args[0], ndigits=params.get("decimals", 0))


@register("is_in", "is_in()")
def _is_in(args, params):
    values = params["values"]
    return pc.is_in(args[0], value_set=pa.array(values, type=_type(args[0])) if values else pa.array([], type=_type(args[0])))


@register("str.contains", "str.contains()")
def _contains(args, params):
    return pc.match_substring(args[0], params["pattern"], ignore_case=params.get("ignore_case", False))


@register("str.startswith", "str.startswith()")
def _startswith(args, params):
    return pc.starts_with(args[0], params["prefix"])


@register("str.endswith", "str.endswith()")
def _endswith(args, params):
    return pc.ends_with(args[0], params["suffix"])


@register("str.split", "str.split()")
def _split(args, params):
    return pc.split_pattern(args[0], params["sep"])


@register("str.replace", "str.replace()")
def _replace(args, params):
    if params.get("regex"):
        return pc.replace_substring_regex(args[0], params["pattern"], params["replacement"])
    return pc.replace_substring(args[0], params["pattern"], params["replacement"])


@register("str.match", "str.match()")
def _match(args, params):
    return pc.match_substring_regex(args[0], params["pattern"])


@register("str.slice", "str.slice()")
def _slice(args, params):
    return pc.utf8_slice_codeunits(args[0], params["start"], params.get("stop"))


def _as_string(x):
    t = _type(x)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return x
    return pc.cast(x, pa.string())


@register("str.concat", "str.concat()")
def _concat(args, params):
    return pc.binary_join_element_wise(*[_as_string(a) for a in args], "")


@register("format", "format()")
def _format(args, params):
    parts: list = []
    pieces = params["template"].split("{}")
    for i, piece in enumerate(pieces):
        if piece:
            parts.append(pa.scalar(piece))
        if i < len(args):
            parts.append(_as_string(args[i]))
    if not parts:
        parts.append(pa.scalar(""))
    return pc.binary_join_element_wise(*parts, "")


@register("list.get", "list.get()")
def _list_get(args, params):
    arr = args[0]
    idx = params["index"]
    lengths = pc.list_value_length(arr)
    if idx < 0:
        pos = pc.add(lengths, idx)
        ok = pc.greater_equal(pos, 0)
    else:
        pos = None
        ok = pc.greater(lengths, idx)
    ok = pc.fill_null(ok, False)
    if len(arr) == 0:
        return pc.list_element(arr, 0)
    masked = pc.if_else(ok, arr, pa.scalar(None, type=arr.type))
    if pos is None:
        return pc.list_element(masked, idx)
    # Negative indexes differ per row: take from the flattened values by offset.
    flat = pc.list_flatten(masked)
    offsets = pc.subtract(pc.cumulative_sum(pc.fill_null(pc.list_value_length(masked), 0)), pc.fill_null(pc.list_value_length(masked), 0))
    take_at = pc.if_else(ok, pc.add(offsets, pos), pa.scalar(None, type=pa.int64()))
    return pc.take(flat, take_at)


@register("list.join", "list.join()")
def _list_join(args, params):
    return pc.binary_join(args[0], params["sep"])


@register("struct.get", "struct.get()")
def _struct_get(args, params):
    t = _type(args[0])
    if not pa.types.is_struct(t):
        raise TypeError(f"struct.get() needs a struct column, got {t}")
    if t.get_field_index(params["field"]) < 0:
        names = [t.field(i).name for i in range(t.num_fields)]
        raise TypeError(f"struct has no field {params['field']!r}; fields are {names}")
    return pc.struct_field(args[0], [params["field"]])
