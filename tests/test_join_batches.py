"""A fan-out join streams its output in bounded batches, holding a piece of it at a time (issue 31 item 10).

1,000 rows joined to 10,000 on one key value are 10M rows: the join used to make all of them before
the first batch came out. Memory is measured as Arrow's allocated bytes (deterministic), not time.
"""

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe.plan.logical import JOIN_TYPES, InMemory, Join, Source

MORSEL = 8192  # the executor's default batch size


def fan_out(left_rows: int, right_rows: int):
    left = ifr.from_pydict({"k": [1] * left_rows, "a": list(range(left_rows))})
    right = ifr.from_pydict({"k": [1] * right_rows, "b": [float(i) for i in range(right_rows)]})
    return left.join(right, on="k")


def test_a_fan_out_join_streams_bounded_batches_holding_a_piece_of_its_output():
    df = fan_out(200, 2000)  # 400,000 rows of 3 columns: 9.6 MB of Arrow data
    whole = 400_000 * 24
    reader = pa.RecordBatchReader.from_stream(df)
    before = pa.total_allocated_bytes()
    first = reader.read_next_batch()
    held = pa.total_allocated_bytes() - before
    rows, largest = first.num_rows, first.num_rows
    for batch in reader:
        rows += batch.num_rows
        largest = max(largest, batch.num_rows)
    assert rows == 400_000
    assert largest <= MORSEL
    # Before: the whole output (and its combined copy) was made before the first batch: held > 9.6 MB.
    assert held < whole / 4, f"{held} bytes held to give the first batch of a {whole}-byte output"


def sides():
    left = pa.table({"k": [1, 1, 2, None, 5, 1], "a": ["x", "y", "z", "n", "u", "w"], "v": [1, 2, 3, 4, 5, 6]})
    right = pa.table({"rk": [1, 1, 1, 2, None, 9], "v": [10, 20, 30, 40, 50, 90]})
    return left, right


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer", "semi", "anti"])
def test_a_join_in_small_pieces_gives_what_one_pyarrow_join_gives(how):
    from inferframe.execution.operators import join_batches

    left, right = sides()
    node = Join(Source(InMemory(left), left.schema), Source(InMemory(right), right.schema), ("k",), ("rk",), how=how)
    pieces = list(join_batches(left, right, node, node.schema, max_rows=2))  # a piece per two output rows
    assert max(b.num_rows for b in pieces) <= 2
    got = pa.Table.from_batches(pieces, schema=node.schema)
    expected = left.join(right.rename_columns(["rk", "right.v"]), keys="k", right_keys="rk", join_type=JOIN_TYPES[how],
                         coalesce_keys=True, use_threads=False)
    if how == "right":  # pyarrow names the keys as the right side; the plan, as the left
        expected = expected.rename_columns(["k" if n == "rk" else n for n in expected.column_names])
    expected = expected.select(node.schema.names)
    key = [(n, "ascending") for n in node.schema.names]
    assert got.sort_by(key).to_pylist() == expected.sort_by(key).to_pylist()
    assert got.num_rows == {"inner": 10, "left": 12, "right": 12, "outer": 14, "semi": 4, "anti": 2}[how]
    assert len(pieces) >= got.num_rows // 2


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer", "semi", "anti"])
def test_nested_columns_ride_through_the_join(how):
    """prompt()'s <name>_error is a struct: Acero's hash join carries none, and the piecewise join aborted the
    process in Acero ('tracing_internal.cc: Check failed'); main before it raised ArrowInvalid."""
    import inferframe as ifr

    st = pa.struct([("kind", pa.string()), ("message", pa.string())])
    left = pa.table({"g": [1, 2, 1, 3], "a": ["x", "y", "z", "w"],
                     "a_error": pa.array([None, {"kind": "x", "message": "m"}, None, None], st)})
    right = pa.table({"g": [1, 2, 4], "n": ["one", "two", "four"], "tags": pa.array([["a"], ["b", "c"], []])})
    got = ifr.from_arrow(left).join(ifr.from_arrow(right), on="g", how=how).to_arrow()
    flat = lambda t: t.drop_columns([c for c in t.column_names if pa.types.is_nested(t.schema.field(c).type)])
    expected = ifr.from_arrow(flat(left)).join(ifr.from_arrow(flat(right)), on="g", how=how).to_arrow()
    assert flat(got).sort_by([("a", "ascending"), ("g", "ascending")]).equals(
        expected.sort_by([("a", "ascending"), ("g", "ascending")]))
    rows = got.to_pylist()
    assert [r["a_error"] for r in rows if r["a"] == "y"] == [{"kind": "x", "message": "m"}] * (how != "anti")
    if how in ("inner", "left", "right", "outer"):
        assert {r["a"]: r["tags"] for r in rows if r["a"] in ("x", "y")} == {"x": ["a"], "y": ["b", "c"]}
