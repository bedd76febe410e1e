"""Sources from other Arrow libraries' objects: polars frames, DuckDB relations, Hugging Face datasets.

Each function turns a library's object into what a plan's ``Source`` holds: a ``pyarrow.Table`` for
data already in memory (taken without a copy where the types allow), or a :class:`StreamSource` for
data read when the plan runs, with the plan's columns pushed into the library's own query (a polars
``select``, a DuckDB projection, a dataset's ``select_columns``). Every library is optional and imported
here only, through :func:`optional`, whose error names the extra to install.

Example:
    >>> import polars as pl
    >>> src = polars_source(pl.LazyFrame({"a": [1, 2], "b": ["x", "y"]}))
    >>> [b.to_pydict() for b in scan_stream(src, columns=["b"])]
    [{'b': ['x', 'y']}]
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pyarrow as pa

from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.io._batches import cast_batch
from inferframe.io.arrow_stream import StreamSource, engine_schema, engine_table, scan_stream

__all__ = ["duckdb_source", "huggingface_source", "optional", "polars_source", "quote_sql"]

# Rows per batch asked of a Hugging Face iterable dataset and a polars stream.
BATCH_ROWS = 8192


def optional(module: str, extra: str, caller: str) -> ModuleType:
    """Import the optional package ``module``, or raise an ImportError naming the extra that installs it.

    Parameters:
        module: the package to import.
        extra: the inferframe extra that installs it.
        caller: the function that needs it, for the message.

    Example:
        >>> optional("no_such_package", "sql", "df.sql()")
        Traceback (most recent call last):
        ...
        ImportError: df.sql() needs the optional no_such_package package: pip install "inferframe[sql]"
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f'{caller} needs the optional {module} package: pip install "inferframe[{extra}]"') from None


def quote_sql(name: str) -> str:
    """``name`` as a quoted SQL identifier.

    Example:
        >>> quote_sql('a"b')
        '"a""b"'
    """
    return '"' + name.replace('"', '""') + '"'


# --- polars ----------------------------------------------------------------------------------------


def polars_source(frame: Any) -> pa.Table | StreamSource:
    """A polars DataFrame or Series as an Arrow table (no copy where the types allow); a LazyFrame as a stream.

    A LazyFrame runs in polars' streaming engine each time the plan runs, with the plan's columns
    selected in polars first.

    Parameters:
        frame: a ``polars.DataFrame``, ``polars.Series`` or ``polars.LazyFrame``.

    Example:
        >>> import polars as pl
        >>> polars_source(pl.DataFrame({"a": [1]})).to_pydict()
        {'a': [1]}
    """
    pl = optional("polars", "polars", "from_polars()")
    if isinstance(frame, pl.Series):
        frame = frame.to_frame()
    if isinstance(frame, pl.DataFrame):
        return engine_table(frame.to_arrow())
    if not isinstance(frame, pl.LazyFrame):
        raise ArgumentTypeError(f"from_polars() takes a polars DataFrame, LazyFrame or Series, got {type(frame).__name__}.")
    schema = frame.head(0).collect().to_arrow().schema
    names = schema.names

    def open_(columns):
        # polars reads a name like "^a$" or "*" as a pattern: columns are chosen by position
        lazy = frame if columns is None else frame.select([pl.nth(names.index(c)) for c in columns])
        batches = getattr(lazy, "collect_batches", None)
        if batches is None:  # an older polars: one frame
            return [lazy.collect().to_arrow()]
        return (df.to_arrow() for df in batches(chunk_size=BATCH_ROWS))

    return StreamSource("polars.LazyFrame", engine_schema(schema), open_)


# --- DuckDB ----------------------------------------------------------------------------------------


def duckdb_source(relation: Any) -> StreamSource:
    """A DuckDB relation as a stream: the query runs (again) each time the plan runs, its result streamed.

    Only the plan's columns are asked of DuckDB (a projection over the relation), so DuckDB reads and
    computes only those.

    Parameters:
        relation: a ``duckdb.DuckDBPyRelation`` (``duckdb.sql(...)``, ``con.table(...)``, ...).

    Example:
        >>> import duckdb
        >>> src = duckdb_source(duckdb.sql("select 1 as a, 2 as b"))
        >>> [b.to_pydict() for b in scan_stream(src, columns=["b"])]
        [{'b': [2]}]
    """
    duckdb = optional("duckdb", "duckdb", "from_duckdb()")
    if not isinstance(relation, duckdb.DuckDBPyRelation):
        raise ArgumentTypeError(f"from_duckdb() takes a DuckDB relation (e.g. duckdb.sql('select ...')), got "
                                f"{type(relation).__name__}.")
    schema = pa.table(relation.limit(0)).schema

    def open_(columns):
        return relation if columns is None else relation.project(", ".join(quote_sql(c) for c in columns))

    return StreamSource("duckdb.DuckDBPyRelation", engine_schema(schema), open_)


# --- Hugging Face datasets -------------------------------------------------------------------------


def huggingface_source(dataset: Any, split: str | None = None, **load_options: Any) -> pa.Table | StreamSource:
    """A Hugging Face dataset's Arrow data: a ``Dataset``'s table (memory-mapped, no copy), an ``IterableDataset`` as a stream.

    Parameters:
        dataset: a ``datasets.Dataset``, ``IterableDataset``, a ``DatasetDict``/``IterableDatasetDict`` (with
            ``split``), or a name or path for ``datasets.load_dataset``.
        split: the split to take from a dict of splits or to load.
        **load_options: passed to ``datasets.load_dataset`` with a name (e.g. ``streaming=True``, ``data_files=``).

    Example:
        >>> import datasets
        >>> huggingface_source(datasets.Dataset.from_dict({"a": [1]})).to_pydict()
        {'a': [1]}
    """
    hf = optional("datasets", "hf", "from_huggingface()")
    if isinstance(dataset, str):
        dataset = hf.load_dataset(dataset, split=split, **load_options)
        if split is not None:
            split = None
    elif load_options:
        raise PlanError(f"from_huggingface(): {', '.join(sorted(load_options))} are options of datasets.load_dataset, "
                        "used only with a dataset name or path; this is a dataset already.")
    if isinstance(dataset, (hf.DatasetDict, hf.IterableDatasetDict)):
        if split is None or split not in dataset:
            said = "needs split=" if split is None else f"has no split {split!r}"
            raise PlanError(f"from_huggingface(): this dataset {said}; its splits are {sorted(dataset)}, "
                            f"e.g. split={sorted(dataset)[0]!r}.")
        dataset = dataset[split]
    elif split is not None:
        raise PlanError("from_huggingface(): split= chooses a split of a DatasetDict or of a dataset to load; "
                        "this is one split already: leave split= out.")
    if isinstance(dataset, hf.Dataset):
        # The dataset's own Arrow table (memory-mapped for one on disk), rows chosen by any indices mapping.
        return engine_table(dataset.with_format("arrow")[:])
    if isinstance(dataset, hf.IterableDataset):
        return _iterable(dataset)
    raise ArgumentTypeError(f"from_huggingface() takes a datasets.Dataset, IterableDataset, DatasetDict (with split=) "
                            f"or a dataset name, got {type(dataset).__name__}.")


def _iterable(dataset: Any) -> StreamSource:
    features = dataset.features
    if features is not None:
        schema = features.arrow_schema
    else:  # features known only from the data: read its first row
        first = next(iter(dataset.with_format("arrow").iter(batch_size=1)), None)
        if first is None:
            raise PlanError("from_huggingface(): the iterable dataset is empty and declares no features, so its "
                            "columns are unknown; pass features= when building it.")
        schema = first.schema

    declared = engine_schema(schema.remove_metadata())

    def open_(columns):
        chosen = dataset if columns is None else dataset.select_columns(list(columns))
        return _iterable_batches(chosen, declared if columns is None else pa.schema([declared.field(c) for c in columns]))

    return StreamSource("datasets.IterableDataset", declared, open_)


def _iterable_batches(dataset: Any, schema: pa.Schema):
    """An iterable dataset's Arrow tables, ``BATCH_ROWS`` rows each.

    ``iter(batch_size=)`` joins the tables of a dataset built from Python examples before casting them to
    its features, and fails when one example's None made a null-typed column. Then the rest is read as
    the one-row tables plain iteration gives (each cast to the features), skipping the rows already read,
    and joined here after a cast to ``schema``.
    """
    done = 0
    try:
        for table in dataset.with_format("arrow").iter(batch_size=BATCH_ROWS):
            yield table
            done += table.num_rows
        return
    except pa.ArrowInvalid:
        pass
    pending: list[pa.RecordBatch] = []
    for table in dataset.skip(done).with_format("arrow"):
        pending += [cast_batch(b, schema) for b in table.to_batches()]
        if len(pending) >= BATCH_ROWS:
            yield pa.Table.from_batches(pending, schema=schema).combine_chunks()
            pending = []
    if pending:
        yield pa.Table.from_batches(pending, schema=schema).combine_chunks()
