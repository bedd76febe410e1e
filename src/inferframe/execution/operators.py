"""Physical operators for relational work, each a generator over record batches.

Streaming operators (project, filter, limit, explode, rebatch) touch one
morsel at a time. Blocking ones (sort, distinct, aggregate, join) gather
their input into one Arrow table and hand the work to pyarrow/Acero.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from inferframe.errors import ExecutionError
from inferframe.execution.context import ExecContext
from inferframe.expressions.evaluate import evaluate, to_pyarrow_filter
from inferframe.expressions.nodes import Node
from inferframe.plan.logical import JOIN_TYPES, Source

Batches = Iterator[pa.RecordBatch]
_PA_MAJOR = int(pa.__version__.split(".")[0])


def scan_table(table: pa.Table, ctx: ExecContext) -> Batches:
    """An in-memory table's batches, ``ctx.morsel_size`` rows at most each."""
    for batch in table.to_batches(max_chunksize=ctx.morsel_size):
        ctx.check()
        yield batch


def scan(node: Source, ctx: ExecContext) -> Batches:
    """Read a file source's batches, applying the pushed-down columns, filter and limit."""
    from inferframe.io import scan as io_scan

    pred = to_pyarrow_filter(node.filter) if node.filter is not None else None
    for batch in io_scan(node.source, columns=list(node.columns) if node.columns is not None else None, filter=pred, limit=node.limit):
        ctx.check()
        yield batch


def project(batches: Batches, exprs: tuple[Node, ...], schema: pa.Schema) -> Batches:
    for batch in batches:
        arrays = [evaluate(e, batch) for e in exprs]
        arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, schema)]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def filter_(batches: Batches, predicate: Node) -> Batches:
    for batch in batches:
        mask = evaluate(predicate, batch)
        if pa.types.is_null(mask.type):
            continue
        out = batch.filter(mask)
        if out.num_rows:
            yield out


def limit(batches: Batches, n: int) -> Batches:
    remaining = n
    if remaining <= 0:
        return
    for batch in batches:
        if batch.num_rows >= remaining:
            yield batch.slice(0, remaining)
            return
        remaining -= batch.num_rows
        yield batch


def rebatch(batches: Batches, size: int) -> Batches:
    """Re-chunk a stream into batches of exactly ``size`` rows (the last may be smaller)."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        while batch.num_rows:
            take = min(size - count, batch.num_rows)
            pending.append(batch.slice(0, take))
            count += take
            batch = batch.slice(take)
            if count == size:
                yield _combine(pending)
                pending, count = [], 0
    if count:
        yield _combine(pending)


def _combine(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


def split_morsels(batches: Batches, size: int) -> Batches:
    """Cut batches larger than ``size`` without merging small ones (cheap, zero-copy)."""
    for batch in batches:
        if batch.num_rows <= size:
            yield batch
            continue
        for start in range(0, batch.num_rows, size):
            yield batch.slice(start, size)


def explode(batches: Batches, columns: tuple[str, ...], schema: pa.Schema) -> Batches:
    for batch in batches:
        lists = {}
        for name in columns:
            arr = batch.column(name)
            lengths = pc.fill_null(pc.list_value_length(arr), 0)
            # Empty and null lists keep their row with a null, like pandas.explode.
            one_null = pa.scalar([None], type=arr.type)
            lists[name] = pc.if_else(pc.equal(lengths, 0), one_null, arr)
        first = lists[columns[0]]
        parents = pc.list_parent_indices(first)
        for name in columns[1:]:
            if not pc.all(pc.equal(pc.list_value_length(lists[name]), pc.list_value_length(first))).as_py():
                raise ExecutionError(f"explode(): the lists in {columns[0]!r} and {name!r} differ in length on some rows.")
        arrays = []
        for f in schema:
            if f.name in lists:
                arrays.append(pc.list_flatten(lists[f.name]))
            else:
                arrays.append(pc.take(batch.column(f.name), parents))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def gather(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    parts = list(batches)
    if not parts:
        return schema.empty_table()
    return pa.Table.from_batches(parts, schema=schema)


def emit(table: pa.Table, ctx: ExecContext) -> Batches:
    for batch in table.combine_chunks().to_batches(max_chunksize=ctx.morsel_size):
        yield batch


def sort(table: pa.Table, keys, descending, nulls_first: bool) -> pa.Table:
    placement = "at_start" if nulls_first else "at_end"
    if _PA_MAJOR >= 25:  # per-key null placement; the global option is deprecated there
        return table.sort_by([(k, "descending" if d else "ascending", placement) for k, d in zip(keys, descending)])
    return table.sort_by([(k, "descending" if d else "ascending") for k, d in zip(keys, descending)], null_placement=placement)


def distinct(table: pa.Table, on) -> pa.Table:
    keys = list(on) if on else table.column_names
    _check_groupable(table, keys, "distinct()")
    indexed = table.append_column("__row", pa.array(range(table.num_rows), type=pa.int64()))
    # Keep the first row of each key, in first-seen order, so results are deterministic.
    firsts = indexed.group_by(keys, use_threads=False).aggregate([("__row", "min")])
    rows = pc.sort_indices(firsts.column("__row_min"))
    return table.take(pc.take(firsts.column("__row_min"), rows))


def _check_groupable(table: pa.Table, keys, what: str) -> None:
    for k in keys:
        t = table.schema.field(k).type
        if pa.types.is_nested(t):
            raise ExecutionError(f"{what} cannot use {k!r} of type {t} as a key; nested types cannot be compared. Pick scalar columns.")


_ACERO = MappingProxyType({"count_distinct": "count_distinct", "list": "list", "first": "first", "last": "last", "variance": "variance"})


def aggregate(table: pa.Table, group_by, aggs, schema: pa.Schema) -> pa.Table:
    _check_groupable(table, group_by, "groupby()")
    specs = []
    for op, column, _ in aggs:
        if pa.types.is_null(table.schema.field(column).type):
            table = table.set_column(table.schema.get_field_index(column), column, table.column(column).cast(pa.int64()))
        if op == "count":
            specs.append((column, "count", pc.CountOptions(mode="only_valid")))
        elif op in ("stddev", "variance"):
            specs.append((column, op, pc.VarianceOptions(ddof=1)))
        else:
            specs.append((column, _ACERO.get(op, op)))
    keys = list(group_by)
    whole_list = not keys and any(s[1] == "list" for s in specs)
    if whole_list:
        # Acero has "list" only per group: aggregate the whole table as one group of a constant key.
        if table.num_rows == 0:
            return _empty_whole_table(table, aggs, specs, schema)
        keys = ["__whole_table"]
        table = table.append_column(keys[0], pa.repeat(pa.scalar(0, pa.int8()), table.num_rows))
    out = table.group_by(keys, use_threads=False).aggregate(specs)
    # Acero names outputs "<col>_<op>" and puts keys last; reorder to the planned schema.
    names = [f"{c}_{s[1]}" for (op, c, _), s in zip(aggs, specs)]
    arrays = [out.column(k) for k in group_by] + [out.column(n) for n in names]
    arrays = [a if a.type == f.type else pa.nulls(len(a)) if pa.types.is_null(f.type) else a.cast(f.type) for a, f in zip(arrays, schema)]
    result = pa.Table.from_arrays(arrays, schema=schema)
    if group_by:
        result = result.sort_by([(k, "ascending") for k in group_by])
    return result


def _empty_whole_table(table: pa.Table, aggs, specs, schema: pa.Schema) -> pa.Table:
    """``agg()`` over no rows: one row, empty lists for ``agg_list``, the other aggregations as Acero gives them."""
    others = [(i, s) for i, s in enumerate(specs) if s[1] != "list"]
    out = table.group_by([], use_threads=False).aggregate([s for _, s in others]) if others else None
    arrays = []
    for i, field in enumerate(schema):
        if specs[i][1] == "list":
            arrays.append(pa.array([[]], field.type))
        else:
            arrays.append(out.column(f"{specs[i][0]}_{specs[i][1]}").cast(field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def join(left: pa.Table, right: pa.Table, node, schema: pa.Schema) -> pa.Table:
    """The whole join as one table (a Ray task's share of a broadcast join); ``join_batches`` streams it."""
    return pa.Table.from_batches(list(join_batches(left, right, node, schema)), schema=schema)


# Output rows one probe batch of the hash join may give: a fan-out join's output stays in pieces of about this many rows.
JOIN_PIECE_ROWS = 65536


def join_batches(left: pa.Table, right: pa.Table, node, schema: pa.Schema, max_rows: int = JOIN_PIECE_ROWS) -> Batches:
    """Hash join ``left`` (probed) with ``right`` (built once), yielding batches of at most ``max_rows`` rows.

    Memory stays flat however many rows a key matches (1,000 rows joined to 10,000 on one key are 10M
    rows): the left side goes to Acero in pieces whose output is about ``max_rows`` rows, counted from
    each left row's matches, and Acero's output is read as it is made. A single left row's matches are
    one piece (bounded by the right side's size). Unmatched right rows (right and outer joins) come last.

    Example:
        >>> import pyarrow as pa
        >>> from inferframe.plan.logical import InMemory, Join, Source
        >>> l, r = pa.table({"k": [1] * 4, "a": range(4)}), pa.table({"k": [1] * 5, "b": range(5)})
        >>> node = Join(Source(InMemory(l), l.schema), Source(InMemory(r), r.schema), ("k",), ("k",))
        >>> [b.num_rows for b in join_batches(l, r, node, node.schema, max_rows=10)]
        [10, 10]
    """
    _check_groupable(left, node.left_on, "join()")
    left, right, null_cols = _join_inputs(left, right, node)
    how = JOIN_TYPES[node.how]
    left_on, right_on = list(node.left_on), list(node.right_on)
    # Acero's hash join carries no nested payload (a struct such as prompt()'s <name>_error aborted the
    # process): such columns stay out of it, a row number travels instead, and they are taken back by it.
    left, left_nested = _nested_out(left, left_on, _LEFT_ROW)
    right, right_nested = _nested_out(right, right_on, _RIGHT_ROW)
    left_out = [c for c in left.column_names if not (how == "right outer" and c in left_on)]
    right_out = ([] if how in ("left semi", "left anti") else
                 [c for c in right.column_names if how in ("right outer", "full outer") or c not in right_on])
    probe = _probe_pieces(left, right, left_on, right_on, how, max_rows)
    from pyarrow import acero

    decl = acero.Declaration("hashjoin", acero.HashJoinNodeOptions(how, left_on, right_on, left_out, right_out), inputs=[
        acero.Declaration("table_source", acero.TableSourceNodeOptions(probe)),
        acero.Declaration("table_source", acero.TableSourceNodeOptions(right))])
    reader = decl.to_reader(use_threads=False)  # pulled piece by piece: a probe batch is joined as it is read
    try:
        for batch in reader:
            for start in range(0, batch.num_rows, max_rows):
                piece, n_left, piece_right = _nested_back(batch.slice(start, max_rows), len(left_out), right_out,
                                                          left_nested, right_nested)
                yield _join_output(piece, node, schema, n_left, piece_right, null_cols)
    finally:
        reader.close()


_LEFT_ROW, _RIGHT_ROW = "__ifr_left_row", "__ifr_right_row"


def _nested_out(table: pa.Table, keys: list[str], row: str) -> tuple[pa.Table, pa.Table | None]:
    """(``table`` without its nested payload columns and with a row number instead, those columns); as is when it has none."""
    nested = [f.name for f in table.schema if f.name not in keys and pa.types.is_nested(f.type)]
    if not nested:
        return table, None
    rows = pa.array(range(table.num_rows), pa.int64())
    return table.drop_columns(nested).append_column(row, rows), table.select(nested)


def _nested_back(batch: pa.RecordBatch, n_left: int, right_out: list[str], left_nested: pa.Table | None,
                 right_nested: pa.Table | None) -> tuple[pa.RecordBatch, int, list[str]]:
    """A join output batch with the nested columns taken back by row number (null where a side did not match)."""
    if left_nested is None and right_nested is None:
        return batch, n_left, right_out
    names = batch.schema.names
    left = dict(zip(names[:n_left], batch.columns[:n_left]))
    right = dict(zip(right_out, batch.columns[n_left:]))
    for side, nested, row in ((left, left_nested, _LEFT_ROW), (right, right_nested, _RIGHT_ROW)):
        if nested is not None and row in side:
            rows = side.pop(row)
            side.update((name, nested.column(name).take(rows)) for name in nested.column_names)
    arrays = [*left.values(), *right.values()]
    out = pa.RecordBatch.from_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                                     names=[*left, *right])
    return out, len(left), list(right)


def _join_inputs(left: pa.Table, right: pa.Table, node) -> tuple[pa.Table, pa.Table, list[str]]:
    """Both sides as Acero takes them: clashing right names prefixed, one key type, no null-typed payload."""
    left_names = set(left.column_names)
    renames = {}
    for name in right.column_names:
        if name in node.right_on:
            continue
        if name in left_names:
            renames[name] = node.prefix + name
    right = right.rename_columns([renames.get(n, n) for n in right.column_names])
    for lk, rk in zip(node.left_on, node.right_on):
        lt, rt = left.schema.field(lk).type, right.schema.field(rk).type
        if lt != rt or pa.types.is_null(lt):
            # Acero needs one concrete key type; an all-null key (e.g. from empty input) takes the other side's.
            if pa.types.is_null(lt) and pa.types.is_null(rt):
                common = pa.string()
            elif pa.types.is_null(lt) or pa.types.is_null(rt):
                common = rt if pa.types.is_null(lt) else lt
            else:
                common = pa.float64() if (pa.types.is_floating(lt) or pa.types.is_floating(rt)) else lt
            left = left.set_column(left.schema.get_field_index(lk), lk, left.column(lk).cast(common))
            right = right.set_column(right.schema.get_field_index(rk), rk, right.column(rk).cast(common))
    # Acero cannot carry null-typed payload columns: drop them and add them back as nulls.
    null_cols = [f.name for t in (left, right) for f in t.schema if pa.types.is_null(f.type) and f.name not in (*node.left_on, *node.right_on)]
    left = left.drop_columns([c for c in null_cols if c in left.column_names])
    right = right.drop_columns([c for c in null_cols if c in right.column_names])
    return left, right, null_cols


def _probe_pieces(left: pa.Table, right: pa.Table, left_on: list[str], right_on: list[str], how: str,
                  max_rows: int) -> pa.Table:
    """``left`` cut into batches that each give about ``max_rows`` output rows (a row with more matches: its own).

    Acero joins one probe batch at a time, but all of that batch's output is made before any is read.
    """
    import numpy as np

    n = left.num_rows
    weights = None
    if n and right.num_rows and how not in ("left semi", "left anti"):  # semi/anti give a row at most per row
        matches = right.select(right_on).group_by(right_on, use_threads=False).aggregate([([], "count_all")])
        if pc.max(matches.column("count_all")).as_py() > 1:
            row, count = "__ifr_row", "__ifr_matches"
            keys = left.select(left_on).append_column(row, pa.array(np.arange(n, dtype=np.int64)))
            matches = matches.rename_columns([*right_on, count])
            found = keys.join(matches, keys=left_on, right_keys=right_on, join_type="inner", use_threads=False)
            weights = np.ones(n, dtype=np.int64)  # an unmatched row still gives one row (outer) or costs a probe
            weights[found.column(row).to_numpy()] = found.column(count).to_numpy()
    if weights is None:
        bounds = list(range(0, n, max_rows)) + [n]
    else:
        ends = np.cumsum(weights)
        bounds, start = [0], 0
        while start < n:
            done = ends[start - 1] if start else 0
            start = max(start + 1, int(np.searchsorted(ends, done + max_rows, side="right")))
            bounds.append(min(start, n))
    pieces = [b for a, z in zip(bounds, bounds[1:]) for b in left.slice(a, z - a).to_batches()]
    return pa.Table.from_batches(pieces, schema=left.schema)


def _join_output(batch: pa.RecordBatch, node, schema: pa.Schema, n_left: int, right_out: list[str],
                 null_cols: list[str]) -> pa.RecordBatch:
    """One batch of Acero's join output (left columns, then right ones) in the plan's schema."""
    names = batch.schema.names
    columns = dict(zip(names[:n_left], batch.columns[:n_left]))
    right = dict(zip(right_out, batch.columns[n_left:]))
    if node.how == "outer":  # one key column per key: the left's where it matched, else the right's
        for lk, rk in zip(node.left_on, node.right_on):
            columns[lk] = pc.coalesce(columns[lk], right.pop(rk))
    elif node.how == "right":  # the keys come from the right side, under the names the plan gives them
        for lk, rk in zip(node.left_on, node.right_on):
            if rk not in schema.names:
                right[lk] = right.pop(rk)
    columns.update((k, v) for k, v in right.items() if k not in columns)
    arrays = []
    for f in schema:
        if f.name in null_cols or pa.types.is_null(f.type):
            arrays.append(pa.nulls(batch.num_rows, f.type))  # an all-null key side stays null-typed
        else:
            arr = columns[f.name]
            arrays.append(arr if arr.type == f.type else arr.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def repartition(table: pa.Table, n: int | None, by, ctx: ExecContext) -> Batches:
    if by:
        table = table.sort_by([(k, "ascending") for k in by])
    parts = n or 1
    size = max(1, -(-table.num_rows // parts))
    for start in range(0, table.num_rows, size):
        yield from table.slice(start, size).combine_chunks().to_batches(max_chunksize=size)


def concat(streams: list[Batches], schema: pa.Schema) -> Batches:
    for stream in streams:
        for batch in stream:
            yield batch if batch.schema == schema else batch.cast(schema)
