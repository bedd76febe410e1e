"""Session tables: what ``CREATE TABLE name AS SELECT ...`` made, read by name by later ``ifr.sql`` queries.

One catalog per process, as a DuckDB session has one: a table is the Arrow table of its query's result,
computed once when it is created and held in memory, so reading it sends no request. A DataFrame given
by keyword (``ifr.sql(q, reviews=df)``) hides a session table of the same name in that query, and a
CTE hides one in its own query. Names match as DuckDB matches identifiers: case-insensitively.
Kept in the ``sql`` package rather than in ``session.Session``: the session is settings that every
plan bakes in and workers receive; tables are data that only this process's queries read.

Example:
    >>> import pyarrow as pa
    >>> create("doc_t", pa.table({"a": [1]}))
    True
    >>> list(tables_read("select a from DOC_T join other using (a)"))
    ['DOC_T']
    >>> drop("doc_t")
    True
"""

from __future__ import annotations

import threading

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.sql.tree import nodes, parsed

_TABLES: dict[str, tuple[str, pa.Table]] = {}  # lower-case name -> (name as created, rows)
_LOCK = threading.Lock()


def exists(name: str) -> bool:
    """Whether a session table is called ``name``."""
    return name.lower() in _TABLES


def creatable(name: str, replace: bool = False, if_not_exists: bool = False) -> bool:
    """Whether ``CREATE TABLE name`` makes a table now; False: it exists and ``if_not_exists`` keeps the old one.

    Without ``replace`` or ``if_not_exists``, an existing name is a PlanError: nothing is replaced silently.
    """
    if name.lower() in _TABLES and not replace:
        if if_not_exists:
            return False
        raise PlanError(f"sql(): table {name!r} already exists in this session; CREATE OR REPLACE TABLE "
                        f"{name} AS ... replaces it, DROP TABLE {name} removes it.")
    return True


def create(name: str, table: pa.Table, replace: bool = False, if_not_exists: bool = False) -> bool:
    """Keep ``table`` as the session table ``name``; False: it exists and ``if_not_exists`` kept the old one."""
    with _LOCK:
        if not creatable(name, replace, if_not_exists):
            return False
        _TABLES[name.lower()] = (name, table)
        return True


def drop(name: str, if_exists: bool = False) -> bool:
    """Remove the session table ``name``; False: there was none and ``if_exists`` allowed that."""
    with _LOCK:
        if _TABLES.pop(name.lower(), None) is None:
            if if_exists:
                return False
            raise PlanError(f"sql(): no table {name!r} in this session to drop; the session's tables are "
                            f"{names() or 'none'} (DROP TABLE IF EXISTS {name} allows that).")
        return True


def names() -> list[str]:
    """The session's tables, by the names they were created with."""
    return sorted(shown for shown, _ in _TABLES.values())


def tables_read(query: str) -> dict[str, pa.Table]:
    """The session tables ``query`` reads (a FROM item naming one, not a CTE), by the name as the query writes it."""
    if not _TABLES:
        return {}
    tree = parsed(query)
    if tree.get("error"):  # not a SELECT DuckDB can serialize: its own planner says what is wrong
        return {}
    ctes = {entry.get("key", "").lower() for node in nodes(tree) for entry in (node.get("cte_map") or {}).get("map", [])}
    found = {}
    for node in nodes(tree):
        name = node.get("table_name")
        if node.get("type") == "BASE_TABLE" and name and not node.get("schema_name") and name.lower() not in ctes:
            entry = _TABLES.get(name.lower())
            if entry is not None:
                found[name] = entry[1]
    return found
