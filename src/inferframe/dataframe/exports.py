"""DataFrames out to polars and Hugging Face datasets, their plans run batch by batch by the consumer.

A DataFrame is itself an Arrow stream (``DataFrame.__arrow_c_stream__``), so ``pa.table(df)``,
``pl.DataFrame(df)`` and ``duckdb.sql("select ... from df")`` take it directly; these functions add a
lazy polars frame whose projection reaches the plan, and Hugging Face datasets. inferframe's image and
file types leave as their storage (binary, string), which those libraries know.

Example:
    >>> import inferframe as ifr
    >>> to_polars(ifr.from_pydict({"a": [1, 2]}), lazy=False)["a"].to_list()
    [1, 2]
"""

from __future__ import annotations

import importlib
from typing import Any

import pyarrow as pa

from inferframe.errors import ArgumentTypeError
from inferframe.io._batches import storage_batch, storage_schema
from inferframe.io.interop import optional


def to_polars(df: Any, lazy: bool = True) -> Any:
    """``df`` as a polars ``LazyFrame`` (default) or, with ``lazy=False``, a ``polars.DataFrame``.

    The LazyFrame runs ``df``'s plan when polars collects it, every time, batch by batch: the columns
    polars reads and a limit (``head``) are pushed into the plan, so an AI column the query does not
    read is never computed. A polars filter is applied by polars to the plan's batches (the AI columns
    are computed for the rows before it). Images and files become binary and string columns.

    Parameters:
        lazy: return a LazyFrame (True) or run the plan now into a DataFrame (False).

    Example:
        >>> import inferframe as ifr
        >>> lf = ifr.from_pydict({"a": [1, 2, 3], "b": ["x", "y", "z"]}).to_polars()
        >>> lf.select("b").head(2).collect()["b"].to_list()
        ['x', 'y']
    """
    pl = optional("polars", "polars", "to_polars()")
    if not isinstance(lazy, bool):
        raise ArgumentTypeError(f"to_polars(lazy=) takes True or False, got {type(lazy).__name__}.")
    schema = storage_schema(df.schema().to_arrow())
    if not lazy:
        table = df.to_arrow()
        return pl.from_arrow(pa.Table.from_batches([storage_batch(b, schema) for b in table.to_batches()], schema=schema))

    def source(with_columns, predicate, n_rows, batch_size):
        plan = df if with_columns is None else df.select(*with_columns)
        if n_rows is not None and predicate is None:
            plan = plan.limit(n_rows)
        out_schema = storage_schema(plan.schema().to_arrow())
        left = n_rows
        for batch in plan.iter_batches():
            frame = pl.from_arrow(pa.Table.from_batches([storage_batch(batch, out_schema)]))
            if predicate is not None:
                frame = frame.filter(predicate)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            yield frame
            if left == 0:
                return

    plugins = importlib.import_module("polars.io.plugins")
    return plugins.register_io_source(source, schema=pl.from_arrow(schema.empty_table()).schema)


def to_huggingface(df: Any, streaming: bool = False) -> Any:
    """``df`` as a Hugging Face ``datasets.Dataset`` over its Arrow table (or an ``IterableDataset``).

    ``Dataset``: the plan runs now and the result is held in memory as the dataset's Arrow table (write
    Parquet and ``load_dataset("parquet", ...)`` for data larger than memory). ``streaming=True``: an
    ``IterableDataset`` that runs the plan each time it is iterated, batch by batch. Embeddings become
    fixed-length sequences; images and files binary and string values.

    Parameters:
        streaming: return an ``IterableDataset`` instead of a ``Dataset``.

    Needs ``pip install "inferframe[hf]"``.

    Example:
        >>> import inferframe as ifr
        >>> ds = ifr.from_pydict({"text": ["a", "b"], "n": [1, None]}).to_huggingface()
        >>> ds.num_rows, ds[1]
        (2, {'text': 'b', 'n': None})
    """
    hf = optional("datasets", "hf", "to_huggingface()")
    if not isinstance(streaming, bool):
        raise ArgumentTypeError(f"to_huggingface(streaming=) takes True or False, got {type(streaming).__name__}.")
    schema = storage_schema(df.schema().to_arrow()).remove_metadata()
    if not streaming:
        batches = [storage_batch(b, schema) for b in df.iter_batches()]
        return hf.Dataset(pa.Table.from_batches(batches, schema=schema))

    def rows():
        for batch in df.iter_batches():
            yield from storage_batch(batch, schema).to_pylist()

    return hf.IterableDataset.from_generator(rows, features=hf.Features.from_arrow_schema(schema))


class InteropMethods:
    """A ``DataFrame`` as an Arrow stream, a polars frame, a Hugging Face dataset, or a SQL table (mixed into ``DataFrame``)."""

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """An Arrow C stream of the rows: the plan runs as the consumer reads, batch by batch.

        So ``pa.table(df)``, ``pa.RecordBatchReader.from_stream(df)``, ``pl.DataFrame(df)`` and
        ``duckdb.sql("select ... from df")`` take a DataFrame directly. ``requested_schema`` (a schema
        capsule) asks for other types: the batches are cast to it.

        Example:
            >>> import inferframe as ifr
            >>> pa.RecordBatchReader.from_stream(ifr.from_pydict({"a": [1, 2]})).read_all().num_rows
            2
        """
        if self._result is not None:
            return self._result.__arrow_c_stream__(requested_schema)
        reader = pa.RecordBatchReader.from_batches(self._plan.schema, self.iter_batches())
        return reader.__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self) -> Any:
        """The output schema as an Arrow C schema capsule, known before anything runs (``pa.schema(df)``)."""
        return self._plan.schema.__arrow_c_schema__()

    def to_polars(self, lazy: bool = True):
        """A polars LazyFrame that runs this plan when collected (``lazy=False``: a polars DataFrame now).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, 2]}).to_polars().collect()["a"].to_list()
            [1, 2]
        """
        return to_polars(self, lazy)

    def to_spark(self, spark: Any = None):
        """This DataFrame as a Spark DataFrame: the plan itself, lazily, on the Spark runner; else the result through Arrow.

        Parameters:
            spark: the SparkSession; None: the active one.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, 2]}).to_spark().count()   # doctest: +SKIP
            2
        """
        from inferframe.runners import get_runner
        from inferframe.runners.spark_interop import plan_to_spark

        lazy = self._result is None and get_runner().name == "spark"
        return plan_to_spark(self._runnable() if lazy else None, None if lazy else self.to_arrow(), spark)

    def to_huggingface(self, streaming: bool = False):
        """A Hugging Face ``datasets.Dataset`` of the result (``streaming=True``: an ``IterableDataset``).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, 2]}).to_huggingface()[1]
            {'a': 2}
        """
        return to_huggingface(self, streaming)

    def sql(self, query: str, **frames: "DataFrame") -> "DataFrame":
        """Run a DuckDB SQL query over this DataFrame, named ``self`` in it (and ``frames`` by their names).

        Only the columns the query reads are computed: an AI column it does not select makes no call.

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"label": ["a", "b", "a"]})
            >>> df.sql("select label, count(*) as n from self group by label order by label").to_pydict()
            {'label': ['a', 'b'], 'n': [2, 1]}
        """
        from inferframe.sql.source import sql_source

        from inferframe.plan import logical as lp

        source = sql_source(query, {"self": self, **frames})
        return type(self)(lp.Source(source, source.schema))
