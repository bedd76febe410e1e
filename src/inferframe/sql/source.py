"""SQL over DataFrames, run by DuckDB over their Arrow streams (``ifr.sql``, ``df.sql``): the query's stream.

The result is a lazy DataFrame: DuckDB runs the query each time the plan runs, reading every
DataFrame it names as an Arrow stream, batch by batch.

What reaches the plans: the columns and the rows. Before a run, DuckDB plans the query (``EXPLAIN``)
over empty stand-ins of the DataFrames, and each DataFrame is read with only the columns DuckDB's plan
scans (the columns of the result that the outer plan reads, too): an AI column the query does not use
is never computed. The WHERE of each SELECT that reads a DataFrame is read off the query's syntax tree
(``sql.filters.tree_rows``): its parts that read only columns no model or UDF computes (``stars >= 4``,
``label IS NOT NULL``, ``contains(review, 'refund')``, ...) filter the DataFrame before its AI columns,
so an AI column is computed only for the rows the query keeps; DuckDB still applies its whole filter.
A part that reads an AI column, or syntax that module does not read (casts, LIKE patterns), is applied
by DuckDB alone, after the rows were computed: filter in the DataFrame (``df.where(...)``) first to save
those calls. A ``LIMIT`` stops the streams once DuckDB has its rows (batches already read are computed).
A DataFrame the query reads twice (a self-join) is computed once and held in memory, every row.
An error of a DataFrame's plan (a UDF's, a service's) is raised as itself, not as DuckDB's text of it.

AI functions (``ai_complete``, ``ai_classify``, ``ai_filter``, ``ai_agg``, ...) are planned by ``sql.planner``:
each call becomes an AI column of the source it reads, computed by the Python function of the same
meaning, and the query reads that column; ``EXPLAIN <query>`` shows them (``sql.explain``). Files
(``'reviews.parquet'``, ``read_csv(...)``) are read as DuckDB reads them, and Polars and Arrow objects
given by name as DataFrames.

Names in the query are the DataFrames given and nothing else: DuckDB's lookup of Python variables is
off, so a query means the same in whatever thread runs it.

Example:
    >>> import inferframe as ifr
    >>> reviews = ifr.from_pydict({"label": ["pos", "neg", "pos"], "stars": [5, 1, 4]})
    >>> ifr.sql("select label, avg(stars) as stars from reviews group by label order by label", reviews=reviews).to_pydict()
    {'label': ['neg', 'pos'], 'stars': [1.0, 4.5]}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from inferframe.sql import catalog
from inferframe.sql.planner import has_ai, plan
from inferframe.sql.writes import run_write, write_of
from inferframe.sql.engine import run
from inferframe.sql.tree import parsed
from inferframe.sql.reads import cheap_columns, columns_read, reads
from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.io.arrow_stream import StreamSource, engine_schema, stream_source
from inferframe.io.interop import optional, quote_sql
from inferframe.plan import logical as lp

__all__ = ["cheap_columns", "columns_read", "sql_source"]


def sql_source(query: str, frames: dict[str, Any], to_frame: Callable[[StreamSource], Any] | None = None) -> StreamSource:
    """The Arrow stream of a DuckDB SQL query over DataFrames, each named in the query by its key in ``frames``.

    The query is checked and its result's columns known now, against empty stand-ins of the
    DataFrames; it runs each time the stream is opened. ``ifr.sql`` and ``df.sql`` make a DataFrame of it.
    A query calling AI functions is planned by ``sql.planner``; ``EXPLAIN <query>`` gives ``sql.explain``'s lines.

    Parameters:
        query: one SELECT statement in DuckDB's SQL.
        frames: the DataFrames the query reads, by name (Polars and Arrow objects are read as DataFrames).
        to_frame: makes a DataFrame of a stream (default: the class of the DataFrames given).

    Example:
        >>> import inferframe as ifr
        >>> sql_source("select a + 1 as b from t", {"t": ifr.from_pydict({"a": [1]})}).schema.names
        ['b']
    """
    if not isinstance(query, str) or not query.strip():
        raise ArgumentTypeError(f"sql() takes the query as a non-empty string, got {query!r}.")
    to_frame = to_frame or _class_of(frames)
    query = query.strip().rstrip(";").strip()
    write = write_of(query)
    if write is not None:  # COPY, CREATE TABLE, DROP TABLE: run now, as a SQL session runs them
        done = run_write(write, frames, lambda text: to_frame(sql_source(text, frames, to_frame)))
        return stream_source(done)
    explain = _explained(query)
    if explain is not None:
        write = write_of(explain)
        explain = explain if write is None or write.select is None else write.select  # a write explains its SELECT
    # A session table (CREATE TABLE ... AS) is read by name as a DataFrame given; a DataFrame given hides it.
    frames = {**catalog.tables_read(query if explain is None else explain), **frames}
    frames = {name: _frame(name, frame, to_frame) for name, frame in frames.items()}

    def frame_of(text: str, over: dict[str, Any]) -> Any:
        return to_frame(sql_source(text, over, to_frame))

    if explain is not None:
        from inferframe.sql.explain import explain_source

        return explain_source(explain, frames, frame_of)
    if has_ai(query):
        planned = plan(query, frames, frame_of)
        if planned is not None:
            query, frames = planned.query, planned.frames
    if not frames and not _reads_a_table(query):
        raise PlanError("sql() needs at least one DataFrame or file to query, e.g. ifr.sql(query, reviews=df).")
    return _source(query, frames)


def _is_frame(frame: Any) -> bool:
    return all(callable(getattr(frame, m, None)) for m in ("iter_batches", "with_column", "select"))


def _class_of(frames: dict[str, Any]) -> Callable[[StreamSource], Any]:
    cls = next((type(f) for f in frames.values() if _is_frame(f)), None)

    def to_frame(source: StreamSource) -> Any:
        if cls is None:
            raise PlanError("sql(): pass at least one DataFrame (or use ifr.sql) to query files with AI functions.")
        return cls(lp.Source(source, source.schema))

    return to_frame


def _frame(name: str, frame: Any, to_frame: Callable[[StreamSource], Any]) -> Any:
    """A DataFrame of what was given: itself, or a Polars, Arrow or pandas object's Arrow stream."""
    if _is_frame(frame):
        return frame
    try:
        return to_frame(stream_source(frame))
    except (ArgumentTypeError, PlanError, TypeError, pa.ArrowInvalid) as e:
        raise ArgumentTypeError(f"sql(): {name}= must be an inferframe DataFrame, or a Polars or Arrow object (an "
                                f"Arrow stream); got {type(frame).__name__} ({e}).") from None


def _explained(query: str) -> str | None:
    """The query after ``EXPLAIN`` (None: not an EXPLAIN)."""
    head = query.split(None, 1)
    if len(head) == 2 and head[0].upper() == "EXPLAIN" and not head[1].upper().startswith(("ANALYZE", "(")):
        return head[1]
    return None


def _reads_a_table(query: str) -> bool:
    """Whether the query has a FROM (a file or a table function: DuckDB reads it)."""
    node = (parsed(query).get("statements") or [{}])[0].get("node", {})
    return (node.get("from_table") or {}).get("type", "EMPTY") not in ("EMPTY", "EMPTY_FROM")


def _source(query: str, frames: dict[str, Any]) -> StreamSource:
    schemas = {name: frame.schema().to_arrow() for name, frame in frames.items()}
    duckdb = optional("duckdb", "sql", "sql()")
    con = duckdb.connect()
    try:
        con.execute("SET python_enable_replacements = false")
        for name, schema in schemas.items():
            con.register(name, schema.empty_table())
        schema = pa.table(run(con, query, "check").limit(0)).schema
    except duckdb.Error as e:
        raise PlanError(f"sql(): DuckDB cannot read these DataFrames: {e}") from None
    finally:
        con.close()
    # A name the query repeats gets a suffix (a, a_1), as DuckDB 2 names them; the result's columns are taken by position.
    schema = pa.schema([f.with_name(n) for f, n in zip(schema, _unique(schema.names))])
    names = schema.names
    return StreamSource("duckdb sql", engine_schema(schema), lambda columns: _stream(query, frames, columns or names))


def _unique(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        new, i = name, 0
        while new in out or (new != name and new in names):
            i += 1
            new = f"{name}_{i}"
        out.append(new)
    return out


def _wrapped(query: str, columns: Sequence[str]) -> str:
    return f"SELECT {', '.join(quote_sql(c) for c in columns)} FROM ({query}) AS __inferframe_query"


def _stream(query: str, frames: dict[str, Any], columns: Sequence[str]):
    """The query's rows as record batches with ``columns``, DuckDB reading each DataFrame with only the columns it needs."""
    text = _wrapped(query, columns)
    found = reads(text, {name: frame.schema().to_arrow() for name, frame in frames.items()},
                   {name: cheap_columns(frame) for name, frame in frames.items()})
    duckdb = optional("duckdb", "sql", "sql()")
    con = duckdb.connect()
    streams = []
    try:
        con.execute("SET python_enable_replacements = false")
        for name, frame in frames.items():
            keep, scans, rows = found[name]
            if rows is not None:  # before the AI columns: the optimizer moves a relational filter below them
                frame = frame.where(rows)
            # Every column keeps its name (the binder needs them all); the ones DuckDB does not read are nulls.
            full = pa.schema(frame)
            frame = frame if keep is None else frame.select(*keep)
            if scans > 1:  # read more than once (a self-join): computed once, held in memory
                con.register(name, pa.Table.from_batches([_filled(b, full) for b in frame.to_arrow().to_batches()],
                                                         full))
            else:
                streams.append(_Tracked(frame, full))
                con.register(name, streams[-1])
        try:
            for batch in pa.RecordBatchReader.from_stream(run(con, text, "run")):
                yield pa.RecordBatch.from_arrays(batch.columns, names=list(columns))
        except Exception:
            for stream in streams:
                if stream.error is not None:  # the DataFrame's own error, not DuckDB's text of it
                    raise stream.error from None
            raise
    finally:
        con.close()


class _Tracked:
    """A DataFrame's Arrow stream for DuckDB, keeping the error its plan raised (DuckDB passes on only its text)."""

    def __init__(self, frame: Any, schema: pa.Schema) -> None:
        self.frame, self.schema = frame, schema
        self.error: BaseException | None = None

    def __arrow_c_schema__(self) -> Any:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        def batches():
            try:
                for batch in self.frame.iter_batches():
                    yield _filled(batch, self.schema)
            except BaseException as e:
                self.error = e
                raise

        reader = pa.RecordBatchReader.from_batches(self.schema, batches())
        return reader.__arrow_c_stream__(requested_schema)


def _filled(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s columns, nulls for the ones it lacks (columns DuckDB's plan does not read)."""
    if batch.schema.names == schema.names:
        return batch
    return pa.RecordBatch.from_arrays(
        [batch.column(f.name) if f.name in batch.schema.names else pa.nulls(batch.num_rows, f.type) for f in schema],
        schema=schema)
