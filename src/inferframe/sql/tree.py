"""A query as DuckDB's own syntax tree: parsed once (``json_serialize_sql``), rewritten as a tree, printed back (``json_deserialize_sql``).

The planner never edits the query's text: it finds the AI calls, FROM items, CTEs and predicates in
this tree, replaces nodes, and asks DuckDB for the SQL of the result. DuckDB parses and prints its
own dialect, so what the planner rewrites is exactly what DuckDB will run.

Example:
    >>> node = statement("select a + 1 as b from t where a > 0")
    >>> node["where_clause"] = expression("a > 1")
    >>> to_sql(node)
    'SELECT (a + 1) AS b FROM t WHERE (a > 1)'
    >>> expression_sql(expression("x || 'y'"))
    "(x || 'y')"
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

from inferframe.errors import PlanError
from inferframe.io.interop import optional

class _Parser:
    """This process's one DuckDB connection for parsing and printing SQL, closed before every fork.

    A connection per call cost 12 ms (each is a new in-memory database) against 0.35 ms for the call
    itself, and planning one query asks 10-20 times (tests/test_sql_corpus.py: 717 calls, 10.1 of its
    22.7 s). One left open crashed forks made later in the process (llama-server's launcher), so a fork
    (``os.fork``, a subprocess with a ``preexec_fn``) waits for the call in progress and closes it first;
    a plain subprocess runs no code of this process before its exec.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._con: Any = None
        os.register_at_fork(before=self._close_for_fork, after_in_parent=self._lock.release,
                            after_in_child=self._lock.release)

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        """A connection of its own (a cursor: its registrations and temporary tables are its own) to this
        process's parsing database, for a look at a plan; closed, and the next fork let through, on leaving."""
        with self._lock:
            if self._con is None:
                self._con = optional("duckdb", "sql", "sql()").connect()
            con = self._con.cursor()
            try:
                yield con
            finally:
                con.close()

    def _close_for_fork(self) -> None:
        self._lock.acquire()
        if self._con is not None:
            self._con.close()
            self._con = None


_PARSER = _Parser()


def planning_cursor() -> contextlib.AbstractContextManager[Any]:
    """A DuckDB connection of its own to the planner's one database, for a look at a plan (``with ... as con``)."""
    return _PARSER.cursor()


def _ask(sql: str, value: str) -> str:
    with planning_cursor() as con:
        return con.execute(sql, [value]).fetchone()[0]


def parsed(query: str) -> dict:
    """DuckDB's parse of ``query``: {"error": ..., "statements": [...]}."""
    return json.loads(_ask("SELECT json_serialize_sql(?)", query))


def statement(query: str) -> dict:
    """The SELECT node of a one-statement query; PlanError when DuckDB cannot parse it."""
    out = parsed(query)
    if out.get("error"):
        kind = statement_kind(query)
        if kind in _WRITES:
            raise PlanError(f"sql(): {_WRITES[kind]} with AI functions is not planned yet (a SELECT, COPY (...) TO "
                            "and CREATE TABLE ... AS are): run the SELECT with ifr.sql(...) and write its DataFrame "
                            "with inferframe's atomic writers, e.g. ifr.sql('SELECT ...', reviews=df).write_parquet('out/').")
        raise PlanError(f"sql(): DuckDB cannot parse the query: {out.get('error_message', out)}")
    statements = out.get("statements") or []
    if len(statements) != 1:
        raise PlanError(f"sql() takes one SELECT statement, got {len(statements)}.")
    return statements[0]["node"]


# COPY and CREATE reach here only nested (a subquery's text); ``sql.writes`` plans them as whole statements.
_WRITES = MappingProxyType({"COPY": "COPY (...) TO", "CREATE": "CREATE ... AS", "INSERT": "INSERT INTO ... SELECT",
                            "UPDATE": "UPDATE", "DELETE": "DELETE"})


def statement_kind(query: str) -> str:
    """The statement's kind as DuckDB names it (COPY, CREATE, SELECT...; "" when DuckDB cannot split it).

    Example:
        >>> statement_kind("COPY (SELECT 1) TO 'x.csv'"), statement_kind("select 1"), statement_kind("select 1; select 2")
        ('COPY', 'SELECT', '')
    """
    with planning_cursor() as con:
        try:
            found = con.extract_statements(query)
        except Exception:  # noqa: BLE001 - not even statements: the parse error says why
            return ""
    return str(found[0].type).rsplit(".", 1)[-1] if len(found) == 1 else ""


def to_sql(node: dict) -> str:
    """The SQL of a SELECT node (a whole query, or a subquery's)."""
    text = json.dumps({"error": False, "statements": [{"node": node, "named_param_map": []}]})
    return _ask("SELECT json_deserialize_sql(?::JSON)", text)


def expression(sql: str) -> dict:
    """The node of one SQL expression."""
    return statement(f"SELECT {sql}")["select_list"][0]


def expression_sql(expr: dict) -> str:
    """The SQL of one expression node (without its alias)."""
    node = statement("SELECT 1")
    node["select_list"] = [dict(expr, alias="")]
    return to_sql(node)[len("SELECT "):]


def nodes(tree: Any) -> Iterator[dict]:
    """Every dict in the tree, parents before children."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            yield item
            stack.extend(reversed(list(item.values())))


def replace(node: dict, new: dict) -> None:
    """Put ``new`` in the tree where ``node`` is (in place: the parent keeps its reference)."""
    new = copy.deepcopy(new)
    node.clear()
    node.update(new)


def conjuncts(expr: dict | None) -> list[dict]:
    """The parts of an ``AND`` chain (one part: the expression itself).

    Example:
        >>> [expression_sql(c) for c in conjuncts(expression("a > 1 and (b or c) and d"))]
        ['(a > 1)', '(b OR c)', 'd']
    """
    if not expr:
        return []
    if expr.get("type") == "CONJUNCTION_AND":
        return [c for child in expr["children"] for c in conjuncts(child)]
    return [expr]


def conjunction(parts: list[dict]) -> dict | None:
    """The ``AND`` of ``parts`` (None: no part)."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return {"class": "CONJUNCTION", "type": "CONJUNCTION_AND", "alias": "", "query_location": 18446744073709551615,
            "children": list(parts)}


def column_refs(tree: Any) -> list[dict]:
    """Every column reference in the tree."""
    return [n for n in nodes(tree) if n.get("class") == "COLUMN_REF"]


def select_star(item: dict) -> str:
    """``SELECT * FROM <item>``: the query of one FROM item (a file, a table function, a subquery).

    Example:
        >>> select_star(statement("select * from read_csv('x.csv') as r")["from_table"])
        "SELECT * FROM read_csv('x.csv') AS r"
    """
    node = statement("SELECT * FROM __ifr_item")
    node["from_table"] = copy.deepcopy(item)
    return to_sql(node)


def table_ref(name: str, alias: str) -> dict:
    """The FROM item that reads the table ``name`` as ``alias``."""
    node = statement("SELECT * FROM __ifr_item AS __ifr_alias")["from_table"]
    return dict(node, table_name=name, alias=alias, qualified_name={"path": [name]})


def limit_rows(modifier: dict) -> int | None:
    """The rows a constant ``LIMIT n OFFSET m`` modifier reads: n + m (None: not constants).

    Example:
        >>> limit_rows(statement("select 1 limit 5 offset 2")["modifiers"][0])
        7
    """
    rows = _constant_int(modifier.get("limit"))
    offset = 0 if modifier.get("offset") is None else _constant_int(modifier.get("offset"))
    return None if rows is None or offset is None else rows + offset


def _constant_int(expr: Any) -> int | None:
    if isinstance(expr, dict) and expr.get("class") == "CONSTANT":
        try:
            return int((expr.get("literal") or {}).get("text"))
        except (TypeError, ValueError):
            return None
    return None
