"""Validate per-format read options and turn them into pyarrow dataset file formats.

Options are stored as a sorted tuple of ``(key, value)`` pairs so a
:class:`~inferframe.io.readers.ScanSource` stays immutable, comparable and picklable.

Accepted options:

* all formats except ``glob``: ``schema`` (a ``pa.Schema`` that replaces inference);
* ``csv``: ``delimiter``, ``has_header``, ``column_names``, ``quote_char``,
  ``escape_char``, ``double_quote``, ``newlines_in_values``, ``null_values``,
  ``skip_rows``, ``encoding``, ``block_size``;
* ``json``: ``newlines_in_values``, ``block_size``.

Example::

    >>> normalize_options("csv", {"delimiter": "|", "has_header": False})
    (('delimiter', '|'), ('has_header', False))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from inferframe.errors import ArgumentTypeError, PlanError

if TYPE_CHECKING:  # imported where a format is built: pyarrow.dataset imports pandas, 0.17 s of every start
    import pyarrow.dataset as ds

__all__ = ["FORMATS", "normalize_options", "file_format", "option"]

FORMATS = ("parquet", "csv", "json", "glob")

# Expected type of each option: a type, or a tuple of types for isinstance().
_OPTIONS: dict[str, dict[str, Any]] = {
    "parquet": {"schema": pa.Schema},
    "csv": {
        "schema": pa.Schema,
        "delimiter": str,
        "has_header": bool,
        "column_names": tuple,
        "quote_char": (str, bool),
        "escape_char": (str, bool),
        "double_quote": bool,
        "newlines_in_values": bool,
        "null_values": tuple,
        "skip_rows": int,
        "encoding": str,
        "block_size": int,
    },
    "json": {"schema": pa.Schema, "newlines_in_values": bool, "block_size": int},
    "glob": {},
}


def normalize_options(format: str, options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Check ``options`` for ``format`` and return them as sorted ``(key, value)`` pairs.

    Args:
        format: one of :data:`FORMATS`.
        options: keyword options given by the user; lists become tuples.

    Raises:
        PlanError: unknown format or option name.
        ArgumentTypeError: an option has the wrong type.

    Example::

        >>> normalize_options("json", {})
        ()
    """
    if format not in _OPTIONS:
        raise PlanError(f"Unknown format {format!r}; expected one of {', '.join(FORMATS)}.")
    allowed = _OPTIONS[format]
    out = []
    for key, value in options.items():
        if key not in allowed:
            valid = ", ".join(sorted(allowed)) or "none"
            raise PlanError(f"Unknown option {key!r} for {format}; valid options: {valid}.")
        if isinstance(value, list):
            value = tuple(value)
        expected = allowed[key]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ArgumentTypeError(f"Option {key!r} for {format} has type {type(value).__name__}; "
                                    f"it takes {getattr(expected, '__name__', expected)}.")
        out.append((key, value))
    return tuple(sorted(out, key=lambda kv: kv[0]))


def option(options: tuple[tuple[str, Any], ...], key: str, default: Any = None) -> Any:
    """Look up ``key`` in normalized ``options``.

    Args:
        options: pairs from :func:`normalize_options`.
        key: option name.
        default: returned when ``key`` is absent.

    Example::

        >>> option((("delimiter", "|"),), "delimiter", ",")
        '|'
    """
    for k, v in options:
        if k == key:
            return v
    return default


def file_format(format: str, options: tuple[tuple[str, Any], ...]) -> ds.FileFormat:
    """Build the pyarrow dataset ``FileFormat`` that reads ``format`` with ``options``.

    Args:
        format: ``parquet``, ``csv`` or ``json``.
        options: pairs from :func:`normalize_options`.

    Example::

        >>> type(file_format("csv", (("delimiter", ";"),))).__name__
        'CsvFileFormat'
    """
    import pyarrow.dataset as ds

    if format == "parquet":
        return ds.ParquetFileFormat()
    if format == "csv":
        return _csv_format(options)
    if format == "json":
        read = pajson.ReadOptions(**_pick(options, block_size="block_size"))
        parse = pajson.ParseOptions(**_pick(options, newlines_in_values="newlines_in_values"))
        return ds.JsonFileFormat(read_options=read, parse_options=parse)
    raise PlanError(f"Format {format!r} has no file reader; read parquet, csv or json.")


def _csv_format(options: tuple[tuple[str, Any], ...]) -> ds.CsvFileFormat:
    import pyarrow.dataset as ds

    read_kwargs = _pick(
        options, block_size="block_size", skip_rows="skip_rows", encoding="encoding"
    )
    names = option(options, "column_names")
    schema = option(options, "schema")
    if names is None and schema is not None and not option(options, "has_header", True):
        # Headerless files read with an explicit schema take its names positionally;
        # autogenerated f0, f1... would match none of its columns.
        names = tuple(schema.names)
    if names is not None:
        # Explicit names replace the header line, which then must be skipped.
        read_kwargs["column_names"] = list(names)
        if option(options, "has_header", True):
            read_kwargs["skip_rows_after_names"] = 1
    elif not option(options, "has_header", True):
        read_kwargs["autogenerate_column_names"] = True
    parse = pacsv.ParseOptions(
        **_pick(
            options,
            delimiter="delimiter",
            quote_char="quote_char",
            escape_char="escape_char",
            double_quote="double_quote",
            newlines_in_values="newlines_in_values",
        )
    )
    convert_kwargs: dict[str, Any] = {}
    nulls = option(options, "null_values")
    if nulls is not None:
        convert_kwargs["null_values"] = list(nulls)
        convert_kwargs["strings_can_be_null"] = True
    return ds.CsvFileFormat(
        read_options=pacsv.ReadOptions(**read_kwargs),
        parse_options=parse,
        convert_options=pacsv.ConvertOptions(**convert_kwargs),
    )


def _pick(options: tuple[tuple[str, Any], ...], **mapping: str) -> dict[str, Any]:
    """Return ``{pyarrow_kwarg: value}`` for the options present among ``mapping``."""
    present = dict(options)
    return {arg: present[key] for arg, key in mapping.items() if key in present}
