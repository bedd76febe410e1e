"""DuckDB connections for ``ifr.sql``: empty stand-ins of DataFrames, and its errors as PlanErrors.

Example:
    >>> import pyarrow as pa
    >>> with connect({"t": pa.schema([("a", pa.int64())])}, scanned="t") as con:
    ...     run(con, "select a from t", "check").columns
    ['a']
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.io.interop import optional, quote_sql
from inferframe.sql.tree import planning_cursor


@contextlib.contextmanager
def connect(schemas: dict[str, pa.Schema], scanned: str) -> Iterator[Any]:
    """A DuckDB connection with an empty stand-in for each DataFrame, ``scanned``'s the only Arrow scan, for a
    look at a plan; closed on leaving. A cursor of the planner's one database (``tree.planning_cursor``): a new
    database took 12 ms, and a query's planning asked for one per DataFrame it reads, and again."""
    with planning_cursor() as con:
        con.execute("SET python_enable_replacements = false")
        for name, schema in schemas.items():
            empty = schema.empty_table()
            if name == scanned:
                con.register(name, empty)
            else:  # a DuckDB table: its scans are not Arrow scans, so EXPLAIN's Arrow scans are `scanned`'s alone
                con.register("__inferframe_empty", empty)
                con.execute(f"CREATE TEMP TABLE {quote_sql(name)} AS SELECT * FROM __inferframe_empty")
                con.unregister("__inferframe_empty")
        yield con


def run(con: Any, query: str, why: str) -> Any:
    duckdb = optional("duckdb", "sql", "sql()")
    try:
        return con.sql(query)
    except duckdb.Error as e:
        raise PlanError(f"sql(): DuckDB cannot {why} the query: {e}") from None


