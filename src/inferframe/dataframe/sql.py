"""SQL over DataFrames, run by DuckDB over their Arrow streams (``ifr.sql``, ``df.sql``): the query's stream.

The result is a lazy DataFrame: DuckDB runs the query each time the plan runs, reading every
DataFrame it names as an Arrow stream, batch by batch.

What reaches the plans: the columns and the rows. Before a run, DuckDB plans the query (``EXPLAIN``)
over empty stand-ins of the DataFrames, and each DataFrame is read with only the columns DuckDB's plan
scans (the columns of the result that the outer plan reads, too): an AI column the query does not use
is never computed. The filter DuckDB puts right above a DataFrame's scan is read too
(``sql_filters.pushable``): its parts that read only columns no model or UDF computes (``stars >= 4``,
``label IS NOT NULL``, ``contains(review, 'refund')``, ...) filter the DataFrame before its AI columns,
so an AI column is computed only for the rows the query keeps; DuckDB still applies its whole filter.
A part that reads an AI column, or syntax that module does not read (casts, LIKE patterns), is applied
by DuckDB alone, after the rows were computed: filter in the DataFrame (``df.where(...)``) first to save
those calls. A ``LIMIT`` stops the streams once DuckDB has its rows (batches already read are computed).
A DataFrame the query reads twice (a self-join) is computed once and held in memory, every row.
An error of a DataFrame's plan (a UDF's, a service's) is raised as itself, not as DuckDB's text of it.

Names in the query are the DataFrames given and nothing else: DuckDB's lookup of Python variables is
off, so a query means the same in whatever thread runs it.

Example:
    >>> import inferframe as ifr
    >>> reviews = ifr.from_pydict({"label": ["pos", "neg", "pos"], "stars": [5, 1, 4]})
    >>> ifr.sql("select label, avg(stars) as stars from reviews group by label order by label", reviews=reviews).to_pydict()
    {'label': ['neg', 'pos'], 'stars': [1.0, 4.5]}
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import pyarrow as pa

from inferframe.dataframe.sql_ai import has_ai, plan
from inferframe.dataframe.sql_filters import pushable
from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.io.arrow_stream import StreamSource, engine_schema
from inferframe.io.interop import optional, quote_sql
from inferframe.plan.inspect import calls_udf
from inferframe.plan.optimizer import optimize


def sql_source(query: str, frames: dict[str, Any]) -> StreamSource:
    """The Arrow stream of a DuckDB SQL query over DataFrames, each named in the query by its key in ``frames``.

    The query is checked and its result's columns known now, against empty stand-ins of the
    DataFrames; it runs each time the stream is opened. ``ifr.sql`` and ``df.sql`` make a DataFrame of it.

    Parameters:
        query: one SELECT statement in DuckDB's SQL.
        frames: the DataFrames the query reads, by name.

    Example:
        >>> import inferframe as ifr
        >>> sql_source("select a + 1 as b from t", {"t": ifr.from_pydict({"a": [1]})}).schema.names
        ['b']
    """
    if not isinstance(query, str) or not query.strip():
        raise ArgumentTypeError(f"sql() takes the query as a non-empty string, got {query!r}.")
    frames = {name: _frame(name, frame) for name, frame in frames.items()}
    query = query.strip().rstrip(";").strip()
    explain = _explained(query)
    if explain is not None:
        from inferframe.dataframe.sql_explain import explain_source

        return explain_source(explain, frames)
    if has_ai(query):
        planned = plan(query, frames)
        if planned is not None:
            query, frames = planned.query, planned.frames
    if not frames and not _reads_a_table(query):
        raise PlanError("sql() needs at least one DataFrame or file to query, e.g. ifr.sql(query, reviews=df).")
    return _source(query, frames)


def table_source(text: str, frames: dict[str, Any]) -> StreamSource:
    """The Arrow stream of every row of one FROM item's text (``'reviews.parquet'``, ``read_csv('x.csv')``).

    Example:
        >>> import inferframe as ifr
        >>> table_source("t", {"t": ifr.from_pydict({"a": [1]})}).schema.names
        ['a']
    """
    return _source(f"SELECT * FROM {text}", frames)


def _frame(name: str, frame: Any) -> Any:
    """A DataFrame of what was given: itself, or a Polars, Arrow or pandas object read as DuckDB would read it."""
    if all(callable(getattr(frame, m, None)) for m in ("iter_batches", "with_column", "select")):  # a DataFrame
        return frame
    from inferframe.dataframe.interop import from_arrow_object

    try:
        return from_arrow_object(frame)
    except (ArgumentTypeError, PlanError, TypeError) as e:
        raise ArgumentTypeError(f"sql(): {name}= must be an inferframe DataFrame, a Polars, pandas or Arrow object; "
                                f"got {type(frame).__name__} ({e}).") from None


def _explained(query: str) -> str | None:
    """The query after ``EXPLAIN`` (None: not an EXPLAIN)."""
    head = query.split(None, 1)
    if len(head) == 2 and head[0].upper() == "EXPLAIN" and not head[1].upper().startswith(("ANALYZE", "(")):
        return head[1]
    return None


def _reads_a_table(query: str) -> bool:
    """Whether the query has a FROM (a file or a table function: DuckDB reads it)."""
    duckdb = optional("duckdb", "sql", "sql()")
    con = duckdb.connect()
    try:
        out = json.loads(con.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])
    finally:
        con.close()
    node = (out.get("statements") or [{}])[0].get("node", {})
    return (node.get("from_table") or {}).get("type", "EMPTY_FROM") != "EMPTY_FROM"


def _source(query: str, frames: dict[str, Any]) -> StreamSource:
    schemas = {name: frame.schema().to_arrow() for name, frame in frames.items()}
    duckdb = optional("duckdb", "sql", "sql()")
    con = duckdb.connect()
    try:
        con.execute("SET python_enable_replacements = false")
        for name, schema in schemas.items():
            con.register(name, schema.empty_table())
        schema = pa.table(_run(con, query, "check").limit(0)).schema
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


def _connect(schemas: dict[str, pa.Schema], scanned: str) -> Any:
    """A DuckDB connection with an empty stand-in for each DataFrame, ``scanned``'s the only Arrow scan."""
    duckdb = optional("duckdb", "sql", "sql()")
    con = duckdb.connect()
    con.execute("SET python_enable_replacements = false")
    for name, schema in schemas.items():
        empty = schema.empty_table()
        if name == scanned:
            con.register(name, empty)
        else:  # a DuckDB table: its scans are not Arrow scans, so EXPLAIN's Arrow scans are `scanned`'s alone
            con.register("__inferframe_empty", empty)
            con.execute(f"CREATE TEMP TABLE {quote_sql(name)} AS SELECT * FROM __inferframe_empty")
            con.unregister("__inferframe_empty")
    return con


def _run(con: Any, query: str, why: str) -> Any:
    duckdb = optional("duckdb", "sql", "sql()")
    try:
        return con.sql(query)
    except duckdb.Error as e:
        raise PlanError(f"sql(): DuckDB cannot {why} the query: {e}") from None


def _wrapped(query: str, columns: Sequence[str]) -> str:
    return f"SELECT {', '.join(quote_sql(c) for c in columns)} FROM ({query}) AS __inferframe_query"


def _stream(query: str, frames: dict[str, Any], columns: Sequence[str]):
    """The query's rows as record batches with ``columns``, DuckDB reading each DataFrame with only the columns it needs."""
    text = _wrapped(query, columns)
    reads = _reads(text, {name: frame.schema().to_arrow() for name, frame in frames.items()},
                   {name: cheap_columns(frame) for name, frame in frames.items()})
    duckdb = optional("duckdb", "sql", "sql()")
    con = duckdb.connect()
    streams = []
    try:
        con.execute("SET python_enable_replacements = false")
        for name, frame in frames.items():
            keep, scans, rows = reads[name]
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
            for batch in pa.RecordBatchReader.from_stream(_run(con, text, "run")):
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


def cheap_columns(frame: Any) -> list[str]:
    """The columns of ``frame`` that no UDF or AI call computes.

    Example:
        >>> import inferframe as ifr
        >>> double = ifr.func(lambda x: x * 2, return_dtype=ifr.DataType.int64())
        >>> cheap_columns(ifr.from_pydict({"a": [1]}).with_column("b", double(ifr.col("a"))))
        ['a']
    """
    return [name for name in frame.column_names if not calls_udf(optimize(frame.select(name)._plan))]


def columns_read(query: str, schemas: dict[str, pa.Schema], cheap: dict[str, list[str]]) -> dict[str, list[str] | None]:
    """For each DataFrame, the columns DuckDB's plan of ``query`` scans (None: all of them, or unknown).

    Parameters:
        query: the query.
        schemas: each DataFrame's schema, by its name in the query.
        cheap: each DataFrame's columns that cost nothing to compute; put first in the stand-in, so that a
            query needing rows but no column (``count(*)``) makes DuckDB scan one of them.

    Example:
        >>> s = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.struct([("x", pa.int64())]))])
        >>> columns_read("select b, c.x from t where a > 1", {"t": s}, {"t": ["a"]})
        {'t': ['a', 'b', 'c']}
        >>> columns_read("select count(*) from t", {"t": s}, {"t": ["b"]})
        {'t': ['b']}
    """
    return {name: read.columns for name, read in _reads(query, schemas, cheap).items()}


def _reads(query: str, schemas: dict[str, pa.Schema], cheap: dict[str, list[str]]) -> dict[str, _Read]:
    """For each DataFrame: the columns DuckDB's plan scans (None: all), how many times, and the rows it keeps."""
    out: dict[str, _Read] = {}
    for name, schema in schemas.items():
        first = [f for f in schema if f.name in cheap.get(name, [])]
        ordered = pa.schema(first + [f for f in schema if f.name not in cheap.get(name, [])])
        con = None
        try:
            con = _connect({**schemas, name: ordered}, scanned=name)
            scans = _arrow_scans(json.loads(con.execute("EXPLAIN (FORMAT json) " + query).fetchall()[0][1]))
            infos = [info for info, _ in scans]
            rows = None
            if len(scans) == 1:  # read once: the rows DuckDB's filter right above the scan drops need no computing
                parts = [p for p in (scans[0][0].get("Filters"), scans[0][1]) if p]
                pushed = [e for e in (pushable(str(p), cheap.get(name, [])) for p in parts) if e is not None]
                rows = functools.reduce(operator.and_, pushed) if pushed else None
            out[name] = _Read(_columns(infos, schema.names, ordered.names[0]), len(scans), rows)
        except Exception:  # noqa: BLE001 - no plan to read: read every column and row, once, which is always right
            out[name] = _Read(None, 1, None)
        finally:
            if con is not None:
                con.close()
    return out


class _Read(NamedTuple):
    columns: list[str] | None  # the columns DuckDB scans (None: every column)
    scans: int  # how many times the query reads the DataFrame
    rows: Any  # a predicate for the rows DuckDB keeps of it, made of cheap columns (None: every row)


def _arrow_scans(nodes: Any, above: Any = None) -> list[tuple[dict, str | None]]:
    """Each Arrow scan's details, with the filter right above it (DuckDB's text of it; None: no filter there)."""
    found = []
    for node in nodes if isinstance(nodes, list) else [nodes]:
        info = node.get("extra_info", {})
        if "ARROW" in str(node.get("name", "")).upper():
            found.append((info, above))
        here = info.get("Expression") if str(node.get("name", "")).upper() == "FILTER" else None
        found += _arrow_scans(node.get("children", []), here)
    return found


def _columns(scans: list[dict], names: list[str], cheapest: str) -> list[str] | None:
    """The columns the scans read, in the DataFrame's order; None when a scan says nothing readable.

    A query that needs rows but no column (``count(*)``) reads ``cheapest``.
    """
    wanted: set[str] = set()
    for info in scans:
        projections = info.get("Projections")
        if projections is None:
            return None
        for text in [projections] if isinstance(projections, str) else projections:
            if not text:  # DuckDB 1.x shows no column for a scan that only counts rows
                continue
            # "s.x" is field x of struct column s, or a column named "s.x": keep every column it may be
            match = {n for n in names if text == n or text.startswith(n + ".")}
            if not match:
                return None
            wanted |= match
        filters = info.get("Filters")
        if filters:  # a filter DuckDB pushed into the scan reads its columns too
            wanted |= {n for n in names if n in str(filters)}
    return [n for n in names if n in wanted] or [cheapest]
