"""What a query reads of each DataFrame: its columns and how often (DuckDB's plan), and the rows its WHERE keeps (the tree).

Example:
    >>> import pyarrow as pa
    >>> s = pa.schema([("a", pa.int64()), ("b", pa.string())])
    >>> columns_read("select b from t where a > 1", {"t": s}, {"t": ["a"]})
    {'t': ['a', 'b']}
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import pyarrow as pa

from inferframe.sql.engine import connect
from inferframe.sql.filters import tree_rows
from inferframe.plan.inspect import calls_udf
from inferframe.plan.optimizer import optimize


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
    return {name: read.columns for name, read in reads(query, schemas, cheap).items()}


def reads(query: str, schemas: dict[str, pa.Schema], cheap: dict[str, list[str]]) -> dict[str, _Read]:
    """For each DataFrame: the columns DuckDB's plan scans (None: all), how many times, and the rows it keeps."""
    out: dict[str, _Read] = {}
    wheres = tree_rows(query, schemas, cheap)
    for name, schema in schemas.items():
        first = [f for f in schema if f.name in cheap.get(name, [])]
        ordered = pa.schema(first + [f for f in schema if f.name not in cheap.get(name, [])])
        try:
            with connect({**schemas, name: ordered}, scanned=name) as con:
                scans = _arrow_scans(json.loads(con.execute("EXPLAIN (FORMAT json) " + query).fetchall()[0][1]))
            infos = [info for info, _ in scans]
            # Read once: the rows its WHERE drops (read off the query's tree) need no computing.
            rows = wheres.get(name) if len(scans) == 1 else None
            out[name] = _Read(_columns(infos, schema.names, ordered.names[0]), len(scans), rows)
        except Exception:  # noqa: BLE001 - no plan to read: read every column and row, once, which is always right
            out[name] = _Read(None, 1, None)
    return out


class _Read(NamedTuple):
    columns: list[str] | None  # the columns DuckDB scans (None: every column)
    scans: int  # how many times the query reads the DataFrame
    rows: Any  # a predicate for the rows DuckDB keeps of it, made of cheap columns (None: every row)


def _arrow_scans(nodes: Any) -> list[tuple[dict, None]]:
    """Each Arrow scan's details in DuckDB's plan (the columns it projects)."""
    found = []
    for node in nodes if isinstance(nodes, list) else [nodes]:
        info = node.get("extra_info", {})
        if "ARROW" in str(node.get("name", "")).upper():
            found.append((info, None))
        found += _arrow_scans(node.get("children", []))
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
