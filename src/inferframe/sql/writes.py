"""Write statements with AI functions: ``COPY (SELECT ...) TO 'path'``, ``CREATE [OR REPLACE] TABLE t AS SELECT ...``.

DuckDB's ``json_serialize_sql`` serializes SELECT statements only, and its Python API gives no tree of a
COPY or CREATE statement, so these are parsed by sqlglot's DuckDB dialect into a tree: the inner SELECT
is a subtree, printed back as DuckDB SQL and planned as any query (``sql.source``: batching, shared
limits, cache, cost, errors as NULL); nothing reads the text by position. sqlglot knows ``ai_*``
functions of other vendors (Snowflake's one-argument ``AI_SUMMARIZE_AGG``) and would check their
arity, so its dialect here reads every ``ai_*`` call as a plain function, printed back as written.

``COPY`` writes one file, as DuckDB's does, through inferframe's atomic writer (``io.writers.PendingWrite``):
the rows go to a hidden temporary directory beside the path, and the finished file is moved to the path
by one rename. A failed or interrupted job leaves no file at the path (an existing file stays as it
was); a finished one replaces an existing file, as DuckDB's COPY does. ``CREATE TABLE`` keeps the
result as a session table (``sql.catalog``), computed once; ``DROP TABLE`` removes one.

Example:
    >>> w = write_of("COPY (SELECT id, ai_complete(q) AS a FROM t) TO 'out.csv.gz'")
    >>> w.kind, w.select, w.target, w.format, w.compression
    ('copy', 'SELECT id, ai_complete(q) AS a FROM t', 'out.csv.gz', 'csv', 'gzip')
    >>> write_of("CREATE OR REPLACE TABLE s AS SELECT 1 AS a")[:5]
    ('create', 'SELECT 1 AS a', 's', None, None)
    >>> write_of("select 1") is None
    True
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.fs as pafs

from inferframe.errors import PlanError
from inferframe.io.filesystems import filesystem_for
from inferframe.io.formats import SUFFIXES
from inferframe.io.interop import optional
from inferframe.io.writers import PendingWrite
from inferframe.sql import catalog
from inferframe.sql.tree import statement_kind

FORMATS = ("parquet", "csv", "json")
OPTIONS = ("FORMAT", "COMPRESSION", "HEADER")
_CODECS = MappingProxyType({".gz": "gzip", ".zst": "zstd", ".bz2": "bz2", ".lz4": "lz4", ".br": "brotli"})
_PARQUET_CODECS = ("snappy", "zstd", "gzip", "brotli", "lz4")
_ONE_FILE = 2**62  # rows per file: COPY writes one file, whatever its size
# The statement's first word, past comments: only a query starting so can be a write (DuckDB's parse then decides).
_WRITE_WORD = re.compile(r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*\(*\s*(?:COPY|CREATE|DROP)\b", re.I | re.S)


class Write(NamedTuple):
    """One write statement: its kind ("copy", "create", "drop"), the SELECT it runs, and where the rows go."""

    kind: str
    select: str | None  # the inner SELECT as DuckDB SQL (None: DROP)
    target: str  # the file's path, or the table's name
    format: str | None = None  # COPY: parquet, csv or json
    compression: str | None = None  # COPY: the writer's codec (None: its default)
    replace: bool = False  # CREATE OR REPLACE
    if_exists: bool = False  # CREATE ... IF NOT EXISTS, DROP TABLE IF EXISTS


def write_of(query: str) -> Write | None:
    """The write statement ``query`` is (None: it is not COPY, CREATE or DROP); PlanError for what is not supported.

    Every option is checked here, before anything is planned or sent.
    """
    if not _WRITE_WORD.match(query):  # most queries: no DuckDB connection (tens of ms) to learn they are not writes
        return None
    kind = statement_kind(query)
    if kind not in ("COPY", "CREATE", "DROP"):
        return None
    exp = optional("sqlglot", "sql", "COPY and CREATE TABLE in sql()").exp
    tree = _parse(query)
    if isinstance(tree, exp.Copy):
        return _copy(tree, exp)
    if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "TABLE":
        select = tree.args.get("expression")
        if select is None:
            raise PlanError("sql(): CREATE TABLE takes a query here: CREATE TABLE name AS SELECT ... (a table with "
                            "columns and no rows is not an inferframe session table).")
        return Write("create", _sql(select.this if isinstance(select, exp.Subquery) else select),
                     _table_name(tree.this, exp), replace=bool(tree.args.get("replace")),
                     if_exists=bool(tree.args.get("exists")))
    if isinstance(tree, exp.Drop) and str(tree.args.get("kind", "")).upper() == "TABLE":
        tables = tree.args.get("tables") or [tree.this]
        if len(tables) != 1:
            raise PlanError("sql(): DROP TABLE takes one table here: DROP TABLE name.")
        return Write("drop", None, _table_name(tables[0], exp), if_exists=bool(tree.args.get("exists")))
    raise PlanError(f"sql(): this {kind} statement is not planned; sql() runs a SELECT, COPY (SELECT ...) TO "
                    "'file', CREATE [OR REPLACE] TABLE name AS SELECT ... and DROP TABLE name.")


def run_write(write: Write, frames: dict[str, Any], frame_of: Callable[[str], Any]) -> pa.Table:
    """Run ``write``: ``frame_of(select)`` is the planned DataFrame of its SELECT; the result is DuckDB's ``Count`` row."""
    if write.kind == "drop":
        catalog.drop(write.target, write.if_exists)
        return pa.table({"Count": pa.array([0], pa.int64())})
    if write.kind == "create":
        if write.target.lower() in {name.lower() for name in frames}:
            raise PlanError(f"sql(): {write.target!r} is a DataFrame given to this query; CREATE TABLE names a new "
                            "session table: choose another name.")
        if not catalog.creatable(write.target, write.replace, write.if_exists):  # before any request is sent
            return pa.table({"Count": pa.array([0], pa.int64())})
        table = frame_of(write.select).to_arrow()
        catalog.create(write.target, table, write.replace, write.if_exists)
        return pa.table({"Count": pa.array([table.num_rows], pa.int64())})
    return pa.table({"Count": pa.array([_copy_file(write, frame_of(write.select))], pa.int64())})


def _parse(query: str) -> Any:
    sqlglot = optional("sqlglot", "sql", "COPY and CREATE TABLE in sql()")
    try:
        return sqlglot.parse_one(query, read=_dialect())
    except sqlglot.errors.SqlglotError as e:
        raise PlanError(f"sql(): cannot read this write statement ({str(e).splitlines()[0]}); run its SELECT with "
                        "ifr.sql(...) and write the DataFrame (df.write_parquet('out/')).") from None


def _sql(node: Any) -> str:
    # normalize_functions=False: each call keeps its name as written (DuckDB names unnamed columns after it).
    return node.sql(dialect=_dialect(), normalize_functions=False)


_DIALECT: list = []  # built at the first write: sqlglot is imported only by a query that needs it


def _dialect() -> Any:
    """sqlglot's DuckDB dialect, less its ``ai_*`` functions: an ``ai_*`` call is ours, read and printed as written."""
    if not _DIALECT:
        from sqlglot.dialects.duckdb import DuckDB

        # sqlglot registers a dialect by its class's name: this one's is its own, clobbering none of sqlglot's.
        class InferframeDuckDB(DuckDB):
            class Parser(DuckDB.Parser):
                FUNCTIONS = {k: v for k, v in DuckDB.Parser.FUNCTIONS.items() if not k.upper().startswith("AI_")}

        _DIALECT.append(InferframeDuckDB)
    return _DIALECT[0]


def _table_name(node: Any, exp: Any) -> str:
    table = node.this if isinstance(node, exp.Schema) else node
    if not isinstance(table, exp.Table) or table.args.get("db") is not None:
        shown = "nothing" if node is None else repr(_sql(node))
        raise PlanError(f"sql(): a session table has a plain name (CREATE TABLE name AS ...), got {shown}.")
    return table.name


def _copy(tree: Any, exp: Any) -> Write:
    if tree.args.get("kind"):
        raise PlanError("sql(): COPY ... FROM loads a file into a table; read the file in a query instead: "
                        "SELECT ... FROM 'reviews.csv'.")
    files = tree.args.get("files") or []
    if len(files) != 1 or not isinstance(files[0], exp.Literal) or not files[0].is_string:
        raise PlanError("sql(): COPY ... TO takes one file path as a string: COPY (SELECT ...) TO 'out.parquet'.")
    path = files[0].this
    options = {}
    for param in tree.args.get("params") or []:
        name, value = param.this.name.upper(), param.args.get("expression")
        if name not in OPTIONS:
            raise PlanError(f"sql(): COPY option {name} is not supported; COPY ... TO takes FORMAT "
                            f"({', '.join(FORMATS)}), COMPRESSION (the writer's codecs) and HEADER (csv: true).")
        options[name] = value.this if isinstance(value, exp.Boolean) else (None if value is None else value.name)
    source = tree.this
    if isinstance(source, exp.Subquery):
        select = _sql(source.this)
    else:  # COPY table [(columns)] TO: the table's rows (a DataFrame given, or a session table)
        _table_name(source, exp)  # a plain name
        table = source.this if isinstance(source, exp.Schema) else source
        columns = [exp.column(c.copy()) for c in source.expressions] if isinstance(source, exp.Schema) else []
        select = _sql(exp.select(*(columns or [exp.Star()])).from_(table.copy()))
    fmt, codec = _format(path, options)
    return Write("copy", select, path, fmt, codec)


def _format(path: str, options: dict[str, Any]) -> tuple[str, str | None]:
    """(format, compression) of a COPY: its options, else the path's extension, as DuckDB picks them."""
    stem, codec = path.lower(), options.get("COMPRESSION")
    suffix = posixpath.splitext(stem)[1]
    if suffix in _CODECS:
        stem = stem[: -len(suffix)]
        codec = codec or _CODECS[suffix]
    fmt = str(options.get("FORMAT") or SUFFIXES.get(posixpath.splitext(stem)[1], "csv")).lower()  # io.formats' one suffix table
    if fmt not in FORMATS:
        raise PlanError(f"sql(): COPY ... TO (FORMAT {fmt}) is not supported; the formats are {', '.join(FORMATS)}.")
    if options.get("HEADER") not in (None, True, "true", "1") or ("HEADER" in options and fmt != "csv"):
        raise PlanError(f"sql(): COPY option HEADER {options['HEADER']} is not supported for {fmt}; inferframe's csv "
                        "writer always writes a header (HEADER true), and other formats take none.")
    codec = None if codec is None or str(codec).lower() in ("none", "uncompressed") else str(codec).lower()
    codecs = _PARQUET_CODECS if fmt == "parquet" else tuple(_CODECS.values())
    if codec is not None and codec not in codecs:
        raise PlanError(f"sql(): COPY option COMPRESSION {codec} is not supported for {fmt}; the codecs are "
                        f"{', '.join(codecs)} and none.")
    return fmt, codec


def _copy_file(write: Write, frame: Any) -> int:
    """Write ``frame``'s rows to ``write.target`` as one file, atomically; the rows written."""
    fs, path = filesystem_for(write.target)
    if isinstance(fs, pafs.LocalFileSystem):
        # The rename below replaces what is at the path: a link's target is the file written, and a device
        # (/dev/stdout) or pipe would be replaced itself, so only a regular file or nothing may be there.
        path = os.path.realpath(path)
        if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode) and not os.path.isdir(path):
            raise PlanError(f"sql(): COPY ... TO {write.target!r}: that is not a regular file (a device or a pipe); "
                            "COPY writes a file, renamed into place when it is complete.")
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        raise PlanError(f"sql(): COPY ... TO {write.target!r}: that is a directory; COPY writes one file "
                        "(ifr.sql('SELECT ...').write_parquet(dir) writes a directory of parts).")
    # The writer's temporary directory is in the file's own directory: the final move is a rename there.
    pending = PendingWrite(posixpath.dirname(path) or ".", write.format, frame.schema().to_arrow(),
                           rows_per_file=_ONE_FILE, compression=write.compression, filesystem=fs, mode="append")
    rows = 0

    def counted():
        nonlocal rows
        for batch in frame.iter_batches():
            rows += batch.num_rows
            yield batch

    try:
        (name,) = pending.write_parts(counted())
        fs.move(f"{pending.tmp}/{name}", path)
    finally:
        pending.abort()  # the temporary directory, written or not (a parent directory it made stays if it holds the file)
    return rows
