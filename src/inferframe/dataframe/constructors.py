"""Ways to make a DataFrame: from Python, Arrow, pandas, and files."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from inferframe.dataframe.dataframe import DataFrame, in_memory
from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.plan import logical as lp


def from_pydict(data: dict[str, Any]) -> DataFrame:
    """A DataFrame from ``{"column": [values...]}``.

    Example:
        >>> from_pydict({"a": [1, 2]}).count_rows()
        2
    """
    if not isinstance(data, dict):
        raise ArgumentTypeError(f"from_pydict() takes a dict of columns, got {type(data).__name__}")
    lengths = {k: len(v) for k, v in data.items()}
    if len(set(lengths.values())) > 1:
        raise PlanError(f"from_pydict(): columns have different lengths {lengths}; every column needs one value per row.")
    arrays = {}
    for k, v in data.items():
        try:
            arrays[k] = v if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.array(v if not hasattr(v, "to_arrow") else v.to_arrow())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise PlanError(f"from_pydict(): column {k!r} mixes values that cannot share one type: {e}") from None
    return in_memory(pa.table(arrays))


def from_pylist(rows: list[dict]) -> DataFrame:
    """A DataFrame from a list of row dicts."""
    try:
        return in_memory(pa.Table.from_pylist(list(rows)))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise PlanError(f"from_pylist(): rows have values that cannot share one column type: {e}") from None


def from_arrow(data: Any) -> DataFrame:
    """A DataFrame from Arrow data: a pyarrow Table, RecordBatch(es), RecordBatchReader or Dataset, any object
    exporting ``__arrow_c_stream__`` or ``__arrow_c_array__`` (pandas, nanoarrow, ...), or a polars, DuckDB
    or Hugging Face object (as ``from_polars``, ``from_duckdb``, ``from_huggingface``).

    A table is used as it is (no copy); a stream is read when the plan runs, batch by batch, never
    gathered. A one-shot stream (a RecordBatchReader) is read by the first run only: call
    ``.collect()`` to run the DataFrame more than once. View and large string/binary/list types become
    their plain kinds, which the engine's functions take.

    Example:
        >>> import pyarrow as pa
        >>> from_arrow(pa.table({"a": [1, None]})).to_pydict()
        {'a': [1, None]}
        >>> from_arrow(pa.table({"a": [1, 2, 3]}).to_reader(max_chunksize=2)).limit(2).to_pydict()
        {'a': [1, 2]}
    """
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    elif isinstance(data, (list, tuple)):
        if not all(isinstance(b, pa.RecordBatch) for b in data):
            raise ArgumentTypeError("from_arrow() takes a list of pyarrow RecordBatches; the list holds other values.")
        data = pa.Table.from_batches(list(data))
    if isinstance(data, pa.Table):
        from inferframe.io.arrow_stream import engine_table

        return in_memory(engine_table(data))
    from inferframe.dataframe.interop import from_arrow_object

    return from_arrow_object(data)


def from_ray_dataset(ds: Any) -> DataFrame:
    """A DataFrame from a Ray Dataset: its Arrow blocks, taken from the object store without a copy where Ray allows.

    Example:
        >>> import ray.data                                           # doctest: +SKIP
        >>> from_ray_dataset(ray.data.from_items([{"a": 1}])).to_pydict()   # doctest: +SKIP
        {'a': [1]}
    """
    import ray

    tables = [t for t in ray.get(ds.to_arrow_refs()) if isinstance(t, pa.Table)]
    schema = ds.schema()
    if not tables:
        arrow_schema = getattr(schema, "base_schema", schema)
        if not isinstance(arrow_schema, pa.Schema):
            raise PlanError("from_ray_dataset(): the dataset is empty and has no Arrow schema to keep; "
                            "pass a dataset with at least one row or an Arrow schema.")
        return in_memory(arrow_schema.empty_table())
    return in_memory(pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0])


def from_spark(sdf: Any) -> DataFrame:
    """A DataFrame from a Spark DataFrame, through Arrow: Spark runs it once and its rows come to this process.

    Example:
        >>> from pyspark.sql import SparkSession                                 # doctest: +SKIP
        >>> spark = SparkSession.builder.master("local[2]").getOrCreate()        # doctest: +SKIP
        >>> from_spark(spark.range(3)).to_pydict()                               # doctest: +SKIP
        {'id': [0, 1, 2]}
    """
    from inferframe.runners.spark_interop import spark_to_arrow

    return from_arrow(spark_to_arrow(sdf))


def spark_with_columns(sdf: Any, columns: dict) -> Any:
    """``sdf`` with ``columns`` (name -> inferframe expression) added, as a lazy Spark DataFrame (``inferframe.spark``).

    The columns are planned over an empty table of ``sdf``'s schema; the Spark runner's operators run that
    plan with ``sdf`` in the table's place.
    """
    from inferframe.runners.spark_interop import arrow_schema_of, spark_with_columns as run_over

    frame = in_memory(arrow_schema_of(sdf).empty_table())
    for name, expr in columns.items():
        frame = frame.with_column(name, expr)
    return run_over(sdf, frame._runnable())


def from_pandas(df: Any) -> DataFrame:
    """A DataFrame from a pandas DataFrame (the index is dropped)."""
    return in_memory(pa.Table.from_pandas(df, preserve_index=False))


def _read(format: str, path: Any, **options: Any) -> DataFrame:
    from inferframe.io import open_source, source_schema

    try:
        paths = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else os.fspath(path)
    except TypeError:
        raise ArgumentTypeError(f"read_{format}() takes a path, glob or URI (str or os.PathLike) or a list of them, "
                                f"got {type(path).__name__}; pass e.g. 'data/*.{format}'.") from None
    src = open_source(format, paths, **options)
    return DataFrame(lp.Source(src, source_schema(src)))


def read_parquet(path: Any, **options: Any) -> DataFrame:
    """Read Parquet files: a path, directory, glob, list, or URI (s3://, hf://, ...).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = from_pydict({"a": [1, 2]}).write_parquet(d)
        ...     read_parquet(f"{d}/*.parquet").to_pydict()
        {'a': [1, 2]}
    """
    return _read("parquet", path, **options)


def read_csv(path: Any, **options: Any) -> DataFrame:
    """Read CSV files (header row expected); options: delimiter, has_header."""
    return _read("csv", path, **options)


def read_json(path: Any, **options: Any) -> DataFrame:
    """Read JSON-lines files (one object per line)."""
    return _read("json", path, **options)


def from_glob_path(path: Any, **options: Any) -> DataFrame:
    """One row per file matching ``path``: columns path, size, mtime."""
    return _read("glob", path, **options)
