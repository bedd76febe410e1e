"""DuckDB connections for ``ifr.sql``: empty stand-ins of DataFrames, and its errors as PlanErrors.

Example:
    >>> import pyarrow as pa
    >>> con = connect({"t": pa.schema([("a", pa.int64())])}, scanned="t")
    >>> run(con, "select a from t", "check").columns
    ['a']
    >>> con.close()
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.io.interop import optional, quote_sql


def connect(schemas: dict[str, pa.Schema], scanned: str) -> Any:
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


def run(con: Any, query: str, why: str) -> Any:
    duckdb = optional("duckdb", "sql", "sql()")
    try:
        return con.sql(query)
    except duckdb.Error as e:
        raise PlanError(f"sql(): DuckDB cannot {why} the query: {e}") from None


