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

from inferframe.errors import ExpressionTypeError


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
        raise ExpressionTypeError(f"struct.get() needs a struct column, got {t}")
    if t.get_field_index(params["field"]) < 0:
        names = [t.field(i).name for i in range(t.num_fields)]
        raise ExpressionTypeError(f"struct has no field {params['field']!r}; fields are {names}")
    if isinstance(args[0], pa.StructArray) and args[0].null_count == 0:
        return args[0].field(params["field"])  # no parent nulls to apply: the child as it is (no kernel call)
    return pc.struct_field(args[0], [params["field"]])


@register("ai.input_error", "input_error()")
def _ai_input_error(args, params):
    """An AI call's error column, where a row whose input failed upstream is an error of kind "input".

    ``args``: the call's own error structs, then one error column per input that can fail (an AI
    call feeding it, or a column's ``<name>_error``); ``params``: ``labels`` (each input's name)
    and ``raise`` (the call's on_error="raise": such a row stops the job with ``RowFailed``).
    The call's own error wins; else the first failed input's, its message kept.
    """
    own = args[0].combine_chunks() if isinstance(args[0], pa.ChunkedArray) else args[0]
    t, n = own.type, len(own)
    found = []
    for label, err in zip(params["labels"], args[1:]):
        err = err.combine_chunks() if isinstance(err, pa.ChunkedArray) else err
        failed = pc.is_valid(err)
        kind = pc.fill_null(pc.struct_field(err, ["kind"]), "")
        said = pc.fill_null(pc.struct_field(err, ["message"]), "")
        message = pc.binary_join_element_wise(f"the input {label!r} failed (", kind, "): ", said, "")
        # An input error that already names where it began is passed on as it is, not wrapped again.
        message = pc.if_else(pc.and_(pc.equal(kind, "input"), pc.starts_with(said, "the input ")), said, message)
        fields = {"kind": pa.array(["input"] * n, pa.string()), "message": message,
                  "attempts": pa.array([0] * n, pa.int64())}
        found.append(pa.StructArray.from_arrays(
            [fields[f.name].cast(f.type) if f.name in fields else pa.nulls(n, f.type) for f in t],
            fields=list(t), mask=pc.invert(failed)))
    out = pc.coalesce(own, *found) if found else own
    if params.get("raise") and n:
        from inferframe.errors import RowFailed

        mine = pc.and_(pc.is_null(own), pc.is_valid(out))
        if pc.any(mine).as_py():
            row = out[pc.index(mine, True).as_py()].as_py()
            raise RowFailed.of({**row, "attempts": 0})
    return out


# --- vectors (embeddings) ---------------------------------------------------


class ConstVector:
    """A constant query vector held in a call's params: hashable, and shown short in plans.

    Parameters:
        values: the numbers of the vector.
    """

    __slots__ = ("values",)

    def __init__(self, values: Any) -> None:
        import numpy as np

        arr = np.asarray(values)
        if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
            raise ExpressionTypeError(f"a constant vector must be a flat list or 1-D array of numbers, got shape {arr.shape} of {arr.dtype}")
        self.values = tuple(float(v) for v in arr)

    def __len__(self) -> int:
        return len(self.values)

    def __hash__(self) -> int:
        return hash(self.values)

    def __eq__(self, other) -> bool:
        return isinstance(other, ConstVector) and other.values == self.values

    def __repr__(self) -> str:
        head = ", ".join(f"{v:g}" for v in self.values[:3])
        return f"vector[{len(self.values)}]([{head}{', ...' if len(self.values) > 3 else ''}])"

    def __getstate__(self):
        return self.values

    def __setstate__(self, state) -> None:
        self.values = state


def vector_size(t: pa.DataType) -> int | None:
    """The fixed size of a vector type, or None for a variable-length list; TypeError if not a vector."""
    if pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        v = t.value_type
        if pa.types.is_floating(v) or pa.types.is_integer(v):
            return t.list_size if pa.types.is_fixed_size_list(t) else None
    raise ExpressionTypeError(
        f"{t} is not a vector; vector functions need fixed_size_list<float> or list<float> columns, "
        "e.g. from embed_text() or .cast(DataType.embedding(DataType.float32(), 384))"
    )


def _work_dtype(*types: pa.DataType):
    """float64 if any side is float64 or integer, else float32: keep float32 embeddings in float32."""
    import numpy as np

    return np.float32 if all(pa.types.is_float32(t) or pa.types.is_float16(t) for t in types) else np.float64


def vector_matrix(arr: pa.Array, dtype=None):
    """A vector column as an (n, dim) numpy matrix plus its validity mask, read from the flat values buffer.

    Null rows hold zeros. Null elements inside a vector read as NaN. Every valid row must
    have the same length (always true for fixed-size lists).

    Example:
        >>> m, ok = vector_matrix(pa.array([[1.0, 2.0], None], type=pa.list_(pa.float32(), 2)))
        >>> m.tolist(), ok.tolist()
        ([[1.0, 2.0], [0.0, 0.0]], [True, False])
    """
    import numpy as np

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    dtype = dtype or _work_dtype(arr.type.value_type)
    n = len(arr)
    valid = np.ones(n, dtype=bool) if arr.null_count == 0 else arr.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_fixed_size_list(arr.type):
        d = arr.type.list_size
        # .values ignores the slice offset and .flatten() drops null rows: slice the child by hand.
        flat = arr.values.slice(arr.offset * d, n * d)
        m = _to_numpy(flat, dtype).reshape(n, d)
        if not valid.all():
            m = m.copy()
            m[~valid] = 0
        return m, valid
    offsets = arr.offsets.to_numpy()
    lengths = np.diff(offsets)
    sizes = np.unique(lengths[valid])
    if len(sizes) > 1:
        from inferframe.errors import ExecutionError

        raise ExecutionError(
            f"A list vector column holds vectors of different lengths ({', '.join(str(s) for s in sizes[:5])}); "
            "every row must have the same size. Store embeddings as DataType.embedding(DataType.float32(), size)."
        )
    d = int(sizes[0]) if len(sizes) else 0
    base = int(offsets[0]) if n else 0
    flat = _to_numpy(arr.values.slice(base, int(offsets[-1]) - base if n else 0), dtype)
    m = np.zeros((n, d), dtype=dtype)
    if d and valid.any():
        starts = offsets[:-1][valid] - base
        m[valid] = flat[starts[:, None] + np.arange(d)]
    return m, valid


def _to_numpy(values: pa.Array, dtype):
    import numpy as np

    if values.null_count:
        values = pc.fill_null(values.cast(pa.float64()), float("nan"))
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=dtype)


def _rows_norm(m):
    import numpy as np

    return np.sqrt(np.einsum("ij,ij->i", m, m))


@register("cosine_similarity", "cosine_similarity()")
def _cosine_similarity(args, params):
    """Row-wise cosine similarity as float32; null where a side is null or has norm 0."""
    import numpy as np

    a = args[0]
    b = args[1] if len(args) > 1 else None
    const = params.get("vector")
    a_arr = pa.array([a.as_py()], type=a.type) if isinstance(a, pa.Scalar) else a
    if b is not None:
        b_arr = pa.array([b.as_py()], type=b.type) if isinstance(b, pa.Scalar) else b
    else:
        b_arr = pa.array([list(const.values)], type=pa.list_(pa.float64(), len(const)))
    # Checked here because type inference runs this kernel on empty inputs: these are the plan-time errors.
    sa, sb = vector_size(a_arr.type), vector_size(b_arr.type)
    if sa is not None and sb is not None and sa != sb:
        what = "the constant vector has" if b is None else "the second has"
        raise ExpressionTypeError(
            f"the vectors differ in size: the first has {sa} values per row, {what} {sb}. "
            "Compare embeddings of the same model and size (embed_text(..., dimensions=) or the same model on both sides)"
        )
    n = max(len(a_arr), len(b_arr)) if min(len(a_arr), len(b_arr)) > 0 else 0
    if n == 0:
        return pa.array([], type=pa.float32())
    dtype = _work_dtype(a_arr.type.value_type, b_arr.type.value_type if b is not None else pa.float32())
    ma, va = vector_matrix(a_arr, dtype)
    mb, vb = vector_matrix(b_arr, dtype)
    if ma.shape[1] != mb.shape[1] and va.any() and vb.any():
        from inferframe.errors import ExecutionError

        raise ExecutionError(
            f"cosine_similarity(): the vectors differ in size ({ma.shape[1]} vs {mb.shape[1]}). "
            "Compare embeddings of the same model and size."
        )
    if ma.shape[1] != mb.shape[1]:  # one side is all null: nothing to compare
        return pa.nulls(n, type=pa.float32())
    if len(mb) == 1 and len(ma) != 1:
        dot = ma @ mb[0]
    elif len(ma) == 1 and len(mb) != 1:
        dot = mb @ ma[0]
    else:
        dot = np.einsum("ij,ij->i", ma, mb)
    na, nb = _rows_norm(ma), _rows_norm(mb)
    denom = na * nb
    bad = ~(va & vb) | (denom == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Clipped: float32 rounding can land just outside [-1, 1] for (anti)parallel vectors.
        sims = np.clip(np.where(bad, 0, dot / np.where(denom == 0, 1, denom)), -1, 1).astype(np.float32)
    sims = np.broadcast_to(sims, (n,))
    bad = np.broadcast_to(bad, (n,))
    return pa.array(sims, type=pa.float32(), mask=bad if bad.any() else None)
