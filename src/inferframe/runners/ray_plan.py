"""The physical plan on Ray Data: each physical operator (``plan.physical``) becomes Ray Data operators over Arrow blocks.

Streaming work (scans, projections, filters, ``@func``/``@cls`` UDFs, AI calls) runs as
``map_batches`` tasks or actor pools, so Ray's streaming executor gives backpressure, retries and
placement; ``sort``, ``groupby``, ``distinct`` and ``repartition`` use Ray's distributed shuffles (tasks:
``shuffle_strategy``), so no step gathers the whole table on one machine. What a worker runs is this project's own
code (``io.scan``, the executor's ``map_stream``, ``UDFOperator``, ``operators.*``): results match the local runner.

Inner, left, semi and anti joins use Ray's distributed hash join, or broadcast a right side known to be small.
Two exceptions, said where they happen: right and full outer joins gather both sides into one
task (and joins on keys of differing or null types broadcast the right side to every task),
and an aggregation over the whole table with holistic functions (``agg_list``,
``count_distinct``, ``stddev``, ...) gathers its input into one task; sum/count/min/max/mean
aggregate per block first. A source over an Arrow stream (``from_arrow`` of a stream, ``from_polars``,
``from_duckdb``, ``from_huggingface``) lives in the driver's process: the driver reads it into Ray's
object store, block by block, and the tasks read the blocks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from inferframe.execution import operators as ops
from inferframe.execution.context import ExecContext
from inferframe.expressions.evaluate import to_pyarrow_filter
from inferframe.expressions.nodes import UDFCall
from inferframe.io.arrow_stream import StreamSource
from inferframe.plan import logical as lp
from inferframe.plan import physical as pp

# Rows per block read from an in-memory table, and per read task of a big Parquet file (row groups).
BLOCK_ROWS = 64_000
# Rows per call of a GPU model class that sets no batch_size.
GPU_BATCH_ROWS = 256


def _batches(table: pa.Table) -> list[pa.RecordBatch]:
    return table.combine_chunks().to_batches() if table.num_rows else []


def _table(batches, schema: pa.Schema) -> pa.Table:
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return schema.empty_table()
    return pa.Table.from_batches([b if b.schema == schema else b.cast(schema) for b in batches], schema=schema)


# --- sources -------------------------------------------------------------------------------------


def _read_fragment(item: dict, node: lp.Source) -> pa.Table:
    """One read task: one file, or some row groups of one Parquet file, through ``io.scan``."""
    from inferframe.io import scan as io_scan

    src = dataclasses.replace(node.source, paths=(item["path"],))
    pred = to_pyarrow_filter(node.filter) if node.filter is not None else None
    columns = list(node.columns) if node.columns is not None else None
    if item.get("row_groups") is not None:
        import pyarrow.dataset as pads

        fragment = pads.ParquetFileFormat().make_fragment(item["path"], filesystem=src.filesystem,
                                                          row_groups=item["row_groups"])
        table = fragment.to_table(schema=node.source_schema, columns=columns, filter=pred)
        return table.cast(node.schema) if table.schema != node.schema else table
    return _table(io_scan(src, columns=columns, filter=pred, limit=node.limit), node.schema)


def _fragments(node: lp.Source) -> list[dict]:
    """The read tasks of a file source: one per file, a big Parquet file split by row groups."""
    import pyarrow.parquet as pq

    items: list[dict] = []
    src = node.source
    for path in src.paths:
        if src.format == "parquet" and node.limit is None:
            meta = pq.read_metadata(path, filesystem=src.filesystem)
            physical = meta.schema.to_arrow_schema().remove_metadata()
            if meta.num_row_groups > 1 and physical == node.source_schema:
                group, rows = [], 0
                for i in range(meta.num_row_groups):
                    group.append(i)
                    rows += meta.row_group(i).num_rows
                    if rows >= BLOCK_ROWS:
                        items.append({"path": path, "row_groups": group})
                        group, rows = [], 0
                if group:
                    items.append({"path": path, "row_groups": group})
                continue
        items.append({"path": path, "row_groups": None})
    return items


def source_table(table: pa.Table):
    """An in-memory table as blocks of ``BLOCK_ROWS`` rows."""
    import ray.data

    blocks = [table.slice(i, BLOCK_ROWS) for i in range(0, table.num_rows, BLOCK_ROWS)] or [table]
    return ray.data.from_arrow(blocks)


def source_files(node: lp.Source) -> tuple[Any, int | None]:
    """A file source: one read task per file, or per group of row groups of a big Parquet file; and its rows
    where already read (an Arrow stream, read on the driver), else None."""
    import ray.data

    if isinstance(node.source, StreamSource):
        return _source_stream(node)
    items = _fragments(node)
    if not items:
        return ray.data.from_arrow([node.schema.empty_table()]), 0
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    ds = ds.map_batches(_read_items, fn_kwargs={"node": node}, batch_size=1, batch_format="pyarrow")
    return (ds.limit(node.limit) if node.limit is not None else ds), None


def _source_stream(node: lp.Source):
    """An Arrow stream (``io.arrow_stream``) lives in this process: the driver reads it, a block of
    ``BLOCK_ROWS`` rows at a time, into Ray's object store (which spills to disk), and the tasks read the blocks."""
    import ray
    import ray.data

    from inferframe.io import scan as io_scan

    refs, pending, rows, total = [], [], 0, 0
    columns = list(node.columns) if node.columns is not None else None
    pred = to_pyarrow_filter(node.filter) if node.filter is not None else None
    for batch in io_scan(node.source, columns=columns, filter=pred, limit=node.limit):
        pending.append(batch)
        rows += batch.num_rows
        total += batch.num_rows
        if rows >= BLOCK_ROWS:
            refs.append(ray.put(pa.Table.from_batches(pending, schema=node.schema)))
            pending, rows = [], 0
    if pending or not refs:
        refs.append(ray.put(pa.Table.from_batches(pending, schema=node.schema)))
    return ray.data.from_arrow_refs(refs), total


def _read_items(items: pa.Table, node: lp.Source) -> pa.Table:
    tables = [_read_fragment(item, node) for item in items.to_pylist()]
    return pa.concat_tables(tables) if tables else node.schema.empty_table()


# --- streaming operators --------------------------------------------------------------------------


def map_block(table: pa.Table, op: pp.Map) -> pa.Table:
    """One block through a per-batch physical operator, with the local executor's own code (``map_stream``)."""
    from inferframe.execution.executor import map_stream

    return _table(map_stream(op, iter(_batches(table))), op.schema)


def cast_to(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return table if table.schema == schema else table.select(schema.names).cast(schema)


# --- UDF stages -----------------------------------------------------------------------------------


def batch_key(stage: str, table: pa.Table) -> str:
    """Names one input batch of one stage, the same in every attempt (its size, first and last rows)."""
    ends = table.slice(0, 1).to_pylist() + table.slice(max(0, table.num_rows - 1), 1).to_pylist()
    return hashlib.sha1(repr((stage, table.num_rows, ends)).encode()).hexdigest()


class UDFStage:
    """One UDF call as a Ray Data callable class: built once per actor, then one call per batch.

    The actor gets its own ``ExecContext`` with the job's services (the cluster coordinator and
    this worker's counters), so model instances, the event loop and HTTP clients live as long
    as the actor, and the UDF runs exactly as it does locally (``UDFOperator``).
    """

    def __init__(self, call: UDFCall, out_name: str, out_type: pa.DataType, out_schema: pa.Schema,
                 services: Callable[[], Any]) -> None:
        from inferframe.execution.udf_ops import UDFOperator

        self.services = services()
        self.ctx = ExecContext(services=self.services)
        self.op = UDFOperator(call, out_name, out_type, self.ctx)
        self.schema = out_schema

    def __call__(self, table: pa.Table) -> pa.Table:
        self.services.batch_started()
        out = _table(self.op.run(iter(_batches(table))), self.schema)
        self.services.batch_done(batch_key(self.op.out_name, table))
        return out

    def __del__(self) -> None:
        ctx = getattr(self, "ctx", None)
        if ctx is not None:
            ctx.close()


def _ray_call(call: UDFCall) -> UDFCall:
    """The call as a Ray actor runs it: Ray gives the process and the GPUs, one instance per actor."""
    spec = call.udf
    owner = spec.owner
    if owner is not None and getattr(owner, "cls", None) is not None and (owner.use_process or owner.gpus):
        owner = dataclasses.replace(owner, use_process=False, gpus=0, max_concurrency=1)
    spec = dataclasses.replace(spec, use_process=False, gpus=0, owner=owner)
    return dataclasses.replace(call, udf=spec)


# An AI call over at most this many rows in at most two batches (known from the plan, ``plan.row_bound``) runs as
# tasks on Ray's already started workers: an actor pool starts a process per actor first (a 20-row job: 4.0-5.3 s
# with the pool, 0.3-1 s as tasks, load ~6-8). More batches go to the pool: a task sets up its services per batch.
SMALL_AI_ROWS = 512


def small_input(op: pp.UDFStage, rows: int | None) -> bool:
    """Whether a UDF stage sees at most ``SMALL_AI_ROWS`` rows in at most two batches (``rows``: the plan's bound
    on its input's rows, None unknown); batches of its ``into_batches`` input, else of its call's batch size."""
    if rows is None or rows > SMALL_AI_ROWS:
        return False
    size = op.input.size if isinstance(op.input, pp.Rebatch) else op.call.udf.batch_size
    return not size or -(-rows // size) <= 2


def _actors_for(call: UDFCall, cluster_cpus: int, small: bool = False) -> dict:
    """Ray Data options of one UDF stage: an actor pool for model classes and AI calls, tasks otherwise
    (and for an AI call over a ``small_input``)."""
    spec = call.udf
    owner = spec.owner
    is_ai = owner is not None and getattr(owner, "cls", None) is not None and hasattr(owner.cls, "for_run")
    if owner is not None and not is_ai:
        # @cls: max_concurrency caps actors cluster-wide; gpus= reserves GPUs per actor (Ray sets the devices).
        import ray.data

        size = max(1, owner.max_concurrency or 1)
        return {"compute": ray.data.ActorPoolStrategy(size=size), "num_gpus": owner.gpus or None,
                "num_cpus": 1 if not owner.gpus else 0.5}
    if is_ai and small:
        return {}
    if is_ai:
        import ray.data

        # I/O-bound: a few actors, each with its async runtime; the in-flight bound is the coordinator's.
        return {"compute": ray.data.ActorPoolStrategy(min_size=1, max_size=max(1, min(4, cluster_cpus))),
                "num_cpus": 0.25}
    return {}


def udf_stage(ds, op: pp.UDFStage, services: Callable[[], Any], cluster_cpus: int, rows: int | None = None):
    """One UDF stage: stateless tasks for a plain ``@func`` and a small AI call, an actor pool for model classes and AI calls."""
    call = op.call
    options = _actors_for(call, cluster_cpus, small_input(op, rows))
    batch_size = call.udf.batch_size or None
    args = (_ray_call(call), op.out_name, op.out_type, op.schema, services)
    if not options:  # a plain @func: stateless batch tasks
        return ds.map_batches(_udf_task, fn_args=args, batch_format="pyarrow", batch_size=batch_size)
    gpus = options.pop("num_gpus", None)
    if gpus:
        options["num_gpus"] = gpus
        batch_size = batch_size or GPU_BATCH_ROWS  # Ray Data asks GPU stages for a batch size
    return ds.map_batches(UDFStage, fn_constructor_args=args, batch_format="pyarrow", batch_size=batch_size,
                          **options)


def _udf_task(table: pa.Table, call: UDFCall, out_name: str, out_type: pa.DataType, out_schema: pa.Schema,
              services: Callable[[], Any]) -> pa.Table:
    stage = UDFStage(call, out_name, out_type, out_schema, services)
    try:
        return stage(table)
    finally:
        stage.ctx.close()


# --- blocking operators ---------------------------------------------------------------------------


def sort(ds, node: lp.Sort):
    """Ray's distributed sort, with the local runner's null placement (a null flag sorts first)."""
    flags = [f"__null_{i}" for i in range(len(node.keys))]
    keys, desc = [], []
    for flag, k, d in zip(flags, node.keys, node.descending):
        keys += [flag, k]
        desc += [node.nulls_first, d]
    ds = ds.map_batches(_add_null_flags, fn_kwargs={"keys": node.keys, "flags": flags}, batch_format="pyarrow")
    ds = ds.sort(keys, descending=desc)
    return ds.map_batches(_drop, fn_kwargs={"names": flags}, batch_format="pyarrow")


def _add_null_flags(table: pa.Table, keys, flags) -> pa.Table:
    for k, flag in zip(keys, flags):
        table = table.append_column(flag, pc.is_null(table.column(k), nan_is_null=True))
    return table


def _drop(table: pa.Table, names) -> pa.Table:
    return table.drop_columns(list(names))


def _first_of_group(table: pa.Table) -> pa.Table:
    return table.slice(0, 1)


def distinct(ds, node: lp.Distinct, cluster_cpus: int):
    keys = list(node.on) if node.on else list(node.input.schema.names)
    return ds.groupby(keys, num_partitions=_partitions(cluster_cpus)).map_groups(_first_of_group, batch_format="pyarrow")


def _partitions(cluster_cpus: int) -> int:
    # Ray's default hash shuffle has 200 partitions: far too many tasks for a small cluster's groups.
    return max(2, 2 * cluster_cpus)


def _aggregate_group(table: pa.Table, node: lp.Aggregate) -> pa.Table:
    return ops.aggregate(table, node.group_by, node.aggs, node.schema)


_PARTIAL = {"sum": ("sum",), "count": ("count",), "min": ("min",), "max": ("max",), "mean": ("sum", "count")}
_FINAL = {"sum": "sum", "count": "sum", "min": "min", "max": "max"}


def aggregate(ds, node: lp.Aggregate, cluster_cpus: int):
    if node.group_by:
        keys = list(node.group_by)
        ds = ds.groupby(keys, num_partitions=_partitions(cluster_cpus)).map_groups(
            _aggregate_group, fn_kwargs={"node": node}, batch_format="pyarrow")
        # The local runner gives groups in key order (nulls last): so does this.
        return sort(ds, lp.Sort(node, tuple(keys), (False,) * len(keys), False))
    if all(op in _PARTIAL for op, _, _ in node.aggs):
        import ray.data

        ds = ds.map_batches(_partial_aggregate, fn_kwargs={"node": node}, batch_format="pyarrow", batch_size=None)
        tables = list(ds.iter_batches(batch_format="pyarrow", batch_size=None))  # one partial row a block
        partials = pa.concat_tables(tables) if tables else pa.table({})
        return ray.data.from_arrow(finish_aggregate(partials, node))
    return ds.repartition(1).map_batches(_aggregate_group, fn_kwargs={"node": node}, batch_format="pyarrow",
                                         batch_size=None)


def _partial_aggregate(table: pa.Table, node: lp.Aggregate) -> pa.Table:
    """One row of partial sums, counts, minima and maxima per block (merged by ``finish_aggregate``)."""
    cols = {}
    for i, (op, column, _) in enumerate(node.aggs):
        values = table.column(column)
        if pa.types.is_null(values.type):
            values = values.cast(pa.int64())
        for part in _PARTIAL[op]:
            if part == "count":
                v = pc.count(values, mode="only_valid").cast(pa.int64())
            else:
                v = getattr(pc, part)(values)
                if part == "sum" and (pa.types.is_integer(values.type) or pa.types.is_boolean(values.type)):
                    v = v.cast(pa.int64()) if v.is_valid else pa.scalar(None, pa.int64())
            cols[f"{i}_{part}"] = pa.array([v.as_py()], v.type if not pa.types.is_null(v.type) else pa.int64())
    return pa.table(cols)


def finish_aggregate(partials: pa.Table, node: lp.Aggregate) -> pa.Table:
    """The whole-table aggregation from the blocks' partial rows (on the driver: one row per block)."""
    arrays = []
    for i, ((op, _, _), field) in enumerate(zip(node.aggs, node.schema)):
        if op == "mean":
            total = pc.sum(partials.column(f"{i}_sum")).as_py() if partials.num_rows else None
            count = pc.sum(partials.column(f"{i}_count")).as_py() if partials.num_rows else 0
            value = (total / count) if count else None
        elif op == "count":
            value = pc.sum(partials.column(f"{i}_count")).as_py() if partials.num_rows else 0
            value = value or 0
        else:
            value = getattr(pc, _FINAL[op])(partials.column(f"{i}_{op}")).as_py() if partials.num_rows else None
        arrays.append(pa.array([value]).cast(field.type) if value is not None else pa.nulls(1, field.type))
    return pa.Table.from_arrays(arrays, schema=node.schema)


# Joins Ray's hash join gives exactly as the local runner does (right and full outer joins coalesce keys
# differently there: they are broadcast joins here).
_RAY_JOIN = {"inner": "inner", "left": "left_outer", "semi": "left_semi", "anti": "left_anti"}


def _rename(table: pa.Table, renames: dict) -> pa.Table:
    return table.rename_columns([renames.get(n, n) for n in table.column_names])


def _hash_joinable(node: lp.Join) -> bool:
    """Ray's hash join needs one concrete type per key pair and no null-typed column (Acero's limits)."""
    for lk, rk in zip(node.left_on, node.right_on):
        lt, rt = node.left.schema.field(lk).type, node.right.schema.field(rk).type
        if lt != rt or pa.types.is_null(lt) or pa.types.is_nested(lt):
            return False
    return not any(pa.types.is_null(f.type) for side in (node.left, node.right) for f in side.schema)


def hold_whole(ds, schema: pa.Schema):
    """A side held whole (a join's build side, a search index): one object in the object store."""
    import ray

    tables = list(ds.iter_batches(batch_format="pyarrow", batch_size=None))
    table = pa.concat_tables([cast_to(t, schema) for t in tables]) if tables else schema.empty_table()
    return ray.put(table)


# A right side the plan knows has at most this many rows goes whole to every task (Spark's broadcast hash join,
# by rows as the plan knows no bytes): a hash join shuffles both sides through actors it starts for the job.
BROADCAST_ROWS = 10_000


def join_any(left, right, node: lp.Join, cluster_cpus: int, right_rows: int | None = None):
    """Ray's hash join where it gives the local runner's result and the right side is not known to be small
    (``right_rows``: the plan's bound on it); else the right side broadcast to every task."""
    small = right_rows is not None and right_rows <= BROADCAST_ROWS
    if node.how in _RAY_JOIN and _hash_joinable(node) and not small:
        return join(left, right, node, cluster_cpus)
    return broadcast_join(left, hold_whole(right, node.right.schema), node)


def shuffle_strategy(op: pp.PhysicalOp) -> str:
    """The Ray Data shuffle a job's plan runs with: the task-based sort shuffle, unless it repartitions by key
    (which Ray does only with its hash shuffle).

    Why not Ray's default (``SHUFFLE_V2``, a hash shuffle): it starts aggregator actors for each shuffle of each
    job, 10-12 s a job on a 2-CPU cluster, where the sort shuffle's tasks took 0.24 s (a distinct of 3,500 rows).
    """
    stack = [op]
    while stack:
        node = stack.pop()
        if isinstance(node, pp.Exchange) and node.kind == "repartition" and node.spec.by:
            return "shuffle_v2"
        stack.extend(node.inputs)
    return "sort_shuffle_pull_based"


def join(left, right, node: lp.Join, cluster_cpus: int):
    """Ray's distributed hash join (both sides shuffled by key); the right side's clashing names get the prefix."""
    left_names = set(node.left.schema.names)
    renames = {n: node.prefix + n for n in node.right.schema.names if n not in node.right_on and n in left_names}
    if renames:
        right = right.map_batches(_rename, fn_kwargs={"renames": renames}, batch_format="pyarrow")
    out = left.join(right, join_type=_RAY_JOIN[node.how], num_partitions=_partitions(cluster_cpus),
                    on=tuple(node.left_on), right_on=tuple(node.right_on))
    return out.map_batches(cast_to, fn_kwargs={"schema": node.schema}, batch_format="pyarrow")


def _join_batch(table: pa.Table, right_ref, node: lp.Join) -> pa.Table:
    import ray

    right = ray.get(right_ref)
    return ops.join(table, right, node, node.schema)


def broadcast_join(ds, right_table_ref, node: lp.Join):
    """The right side goes to every task once, the left side streams (keys of differing or null types).

    A right or full outer join emits the right side's unmatched rows, so it must see the whole left
    side at once: one task (a gather, said in the README).
    """
    if node.how in ("right", "outer"):
        ds = ds.repartition(1)
    return ds.map_batches(_join_batch, fn_kwargs={"right_ref": right_table_ref, "node": node}, batch_format="pyarrow")


def _nearest_batch(table: pa.Table, right_ref, node: lp.Nearest) -> pa.Table:
    import ray

    from inferframe.execution.nearest import nearest

    right = ray.get(right_ref)
    ctx = ExecContext()
    try:
        return _table(nearest(iter(_batches(table)), iter(_batches(right)), node, ctx), node.schema)
    finally:
        ctx.close()


def nearest(ds, right, node: lp.Nearest):
    """Each task searches its left rows against the whole right side, held once in the object store."""
    right_ref = hold_whole(right, node.right.schema)
    return ds.map_batches(_nearest_batch, fn_kwargs={"right_ref": right_ref, "node": node}, batch_format="pyarrow")


def repartition(ds, node: lp.Repartition, cluster_cpus: int):
    """Partitions >= workers (seed 002): rows are spread evenly, a skewed input included; ``by`` hashes."""
    n = node.num_partitions or max(2, cluster_cpus)
    if node.by:
        return ds.repartition(n, keys=list(node.by))
    return ds.repartition(n, shuffle=False)


def into_batches(ds, size: int):
    """Blocks of ``size`` rows, so the work after it spreads over the workers batch by batch."""
    return ds.repartition(target_num_rows_per_block=size)


def write_block(table: pa.Table, pending) -> pa.Table:
    """One task's rows as part files in the pending write's temporary directory; the names, in order."""
    names = pending.write_parts(_batches(table), prefix=f"w-{uuid.uuid4().hex}-", keep_empty=False)
    return pa.table({"names": pa.array([names], pa.list_(pa.string()))})

