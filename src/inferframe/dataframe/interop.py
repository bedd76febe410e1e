"""DataFrames from other Arrow libraries: any Arrow stream, polars, DuckDB, Hugging Face datasets, LanceDB, SQL.

Data is taken where it is: a table in memory without a copy, a stream or a query read batch by batch
when the plan runs, with only the plan's columns asked of the producer. View and large string, binary
and list types (polars, Hugging Face) become their plain kinds, which the engine's functions take.
The other way (``df.to_polars()``, ``df.to_huggingface()``, ``pa.table(df)``) is ``dataframe.exports``.

Example:
    >>> import pyarrow as pa
    >>> import inferframe as ifr
    >>> df = ifr.from_arrow(pa.table({"a": [1, 2, 3]}).to_reader(max_chunksize=2))
    >>> pa.table(df.with_column("b", ifr.col("a") * 10)).to_pydict()
    {'a': [1, 2, 3], 'b': [10, 20, 30]}
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pyarrow as pa

from inferframe.dataframe.dataframe import DataFrame, in_memory
from inferframe.errors import ArgumentTypeError
from inferframe.io.arrow_stream import StreamSource, engine_table, stream_source
from inferframe.io.interop import duckdb_source, huggingface_source, polars_source
from inferframe.plan import logical as lp


def source_frame(source: pa.Table | StreamSource) -> DataFrame:
    """A DataFrame over a table in memory or an Arrow stream source (``io.arrow_stream``).

    Example:
        >>> source_frame(pa.table({"a": [1]})).to_pydict()
        {'a': [1]}
    """
    if isinstance(source, pa.Table):
        return in_memory(source)
    return DataFrame(lp.Source(source, source.schema))


def from_arrow_object(data: Any) -> DataFrame:
    """A DataFrame from any Arrow producer: a stream (``__arrow_c_stream__``), an array (``__arrow_c_array__``),
    a ``pyarrow.RecordBatchReader``, ``Dataset`` or ``Scanner``, or a bare stream capsule; a polars,
    DuckDB or Hugging Face object goes through ``from_polars``, ``from_duckdb`` or ``from_huggingface``.

    Streams are read when the plan runs, never gathered here; see ``ifr.from_arrow``.

    Example:
        >>> from_arrow_object(pa.record_batch({"a": [1]}).to_struct_array()).to_pydict()
        {'a': [1]}
    """
    import pyarrow.dataset as pads

    if isinstance(data, DataFrame):
        return data
    # A library's own object goes through its own path, which pushes the plan's columns into it.
    library = type(data).__module__.split(".")[0].lstrip("_")
    if library in _LIBRARIES:
        return source_frame(_LIBRARIES[library](data))
    streams = (pa.RecordBatchReader, pads.Dataset, pads.Scanner)
    if isinstance(data, streams) or hasattr(data, "__arrow_c_stream__") or type(data).__name__ == "PyCapsule":
        try:
            return source_frame(stream_source(data))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise ArgumentTypeError(f"from_arrow(): {type(data).__name__} is not an Arrow stream of record batches "
                                    f"(a table): {e}") from None
    if hasattr(data, "__arrow_c_array__"):
        try:
            batch = pa.record_batch(data)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise ArgumentTypeError(f"from_arrow(): {type(data).__name__} is an Arrow array, not a table (a struct "
                                    f"array or record batch): {e}") from None
        return in_memory(engine_table(pa.Table.from_batches([batch])))
    raise ArgumentTypeError(
        f"from_arrow() takes a pyarrow Table, RecordBatch(es), RecordBatchReader or Dataset, or any object "
        f"exporting __arrow_c_stream__ / __arrow_c_array__ (polars, DuckDB, pandas, ...), got {type(data).__name__}."
    )


_LIBRARIES = MappingProxyType({"polars": polars_source, "duckdb": duckdb_source, "datasets": huggingface_source})


def from_polars(frame: Any) -> DataFrame:
    """A DataFrame from a polars DataFrame or Series (its Arrow data, no copy where the types allow) or a LazyFrame.

    A LazyFrame stays lazy: polars runs it (streaming) when the plan runs, every run, computing only the
    columns the plan reads.

    Parameters:
        frame: a ``polars.DataFrame``, ``polars.LazyFrame`` or ``polars.Series``.

    Example:
        >>> import polars as pl
        >>> import inferframe as ifr
        >>> ifr.from_polars(pl.DataFrame({"a": [1, None]})).to_pydict()
        {'a': [1, None]}
        >>> ifr.from_polars(pl.LazyFrame({"a": [1, 2], "b": ["x", "y"]})).select("b").to_pydict()
        {'b': ['x', 'y']}
    """
    return source_frame(polars_source(frame))


def from_duckdb(relation: Any) -> DataFrame:
    """A DataFrame over a DuckDB relation: DuckDB runs the query when the plan runs (every run), streamed.

    Only the columns the plan reads are asked of DuckDB. The relation's connection must stay open.

    Parameters:
        relation: a ``duckdb.DuckDBPyRelation``, e.g. ``duckdb.sql("select ...")`` or ``con.table("t")``.

    Example:
        >>> import duckdb
        >>> import inferframe as ifr
        >>> ifr.from_duckdb(duckdb.sql("select range as n from range(3)")).to_pydict()
        {'n': [0, 1, 2]}
    """
    return source_frame(duckdb_source(relation))


def from_huggingface(dataset_or_name: Any, split: str | None = None, **load_options: Any) -> DataFrame:
    """A DataFrame from a Hugging Face dataset: a ``Dataset``'s Arrow table (memory-mapped, no copy), an
    ``IterableDataset`` streamed batch by batch when the plan runs.

    Parameters:
        dataset_or_name: a ``datasets.Dataset`` or ``IterableDataset``; a ``DatasetDict`` with ``split``; or a
            name or path, loaded with ``datasets.load_dataset(name, split=split, **load_options)``.
        split: the split to take (needed for a dict of splits).
        **load_options: for ``load_dataset`` with a name: ``streaming=True`` (an iterable dataset,
            nothing downloaded up front), ``data_files=``, ``revision=``, ...

    Needs ``pip install "inferframe[hf]"``.

    Example:
        >>> import datasets
        >>> import inferframe as ifr
        >>> ifr.from_huggingface(datasets.Dataset.from_dict({"text": ["hi", None]})).to_pydict()
        {'text': ['hi', None]}
    """
    return source_frame(huggingface_source(dataset_or_name, split, **load_options))


def read_lance(uri: str, table: str, **options: Any) -> DataFrame:
    """Read a LanceDB table, streamed when the plan runs (every run), only the columns the plan reads.

    Parameters:
        uri: the LanceDB database (a directory or object-store URI), as given to ``write_lance``.
        table: the table name.
        **options: passed to ``lancedb.connect`` (e.g. ``storage_options``).

    Vector columns come back as fixed-size float lists (embeddings). Needs ``pip install "inferframe[lance]"``.

    Example:
        >>> import tempfile
        >>> import inferframe as ifr
        >>> with tempfile.TemporaryDirectory() as db:
        ...     _ = ifr.from_pydict({"id": [1, 2], "v": [[0.5, 1.0], None]}).write_lance(db, table="items")
        ...     ifr.read_lance(db, "items").where(ifr.col("id") > 1).to_pydict()
        {'id': [2], 'v': [None]}
    """
    from inferframe.io.lance import lance_source

    return source_frame(lance_source(str(uri), table, **options))


def sql(query: str, **frames: DataFrame) -> DataFrame:
    """A DataFrame of a DuckDB SQL query over DataFrames, each named in the query by its keyword.

    The query is checked (and its result's columns known) now, against empty stand-ins of the
    DataFrames; it runs, over their Arrow streams, when the result's plan runs. Only the columns the
    query reads are computed (see ``inferframe.sql.source`` for what is pushed down). Needs
    ``pip install "inferframe[sql]"``.

    Parameters:
        query: one SELECT statement in DuckDB's SQL.
        **frames: the DataFrames the query reads, e.g. ``reviews=df`` for ``... from reviews``.

    Example:
        >>> import inferframe as ifr
        >>> a = ifr.from_pydict({"id": [1, 2], "x": ["p", "q"]})
        >>> b = ifr.from_pydict({"id": [2, 3], "y": [True, False]})
        >>> ifr.sql("select a.id, x, y from a join b using (id)", a=a, b=b).to_pydict()
        {'id': [2], 'x': ['q'], 'y': [True]}
    """
    from inferframe.sql.source import sql_source

    return source_frame(sql_source(query, frames, to_frame=source_frame))
