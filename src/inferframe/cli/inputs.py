"""Reading a command's INPUT and checking what the options name in it: columns, a template, a Pydantic model.

The INPUT's format comes from the one table of file suffixes (:mod:`inferframe.io.formats`), the one that
``examples=`` and ``evaluate(golden=)`` read files by too.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"stars": [5], "review": ["great"]})
    >>> expr, used = template_message(df, "Review ({stars} stars): {review}")
    >>> df.select(expr.alias("m")).to_pydict(), used
    ({'m': ['Review (5 stars): great']}, ['stars', 'review'])
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import string
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any, Optional

import inferframe as ifr
from inferframe.cli.base import USAGE, CLIError
from inferframe.cli.options import unescape
from inferframe.io.formats import file_spec

_READERS = MappingProxyType({"parquet": ifr.read_parquet, "csv": ifr.read_csv, "json": ifr.read_json})


def read_input(path: str, fmt: Optional[str]) -> ifr.DataFrame:
    """The INPUT as a DataFrame: read as ``--format`` says, else as its name (or its files' names) say."""
    spec = file_spec(path, fmt, hint=" Or pass --format parquet|csv|tsv|json to read it whatever its name.")
    if spec.json_array:  # small by nature: one JSON document in memory
        return ifr.from_arrow(spec.table())
    return _READERS[spec.format](spec.path, **spec.options)


def check_columns(df: ifr.DataFrame, names: list[str], option: str) -> None:
    have = df.column_names
    for name in names:
        if name not in have:
            close = difflib.get_close_matches(name, have, n=3, cutoff=0.5)  # as the library's ColumnNotFoundError
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise CLIError(f"unknown column {name!r} ({option}).{hint} The input has: {', '.join(have)}", USAGE)


def check_text_column(df: ifr.DataFrame, name: str, command: str) -> None:
    """The one input rule on the command line: ``--column`` names text; a number or date is refused with its fix.

    The library's own error names the Python cast, which a command line cannot write: this one names the
    option that puts the value into text (``--template`` for ``prompt``, a SQL cast for ``embed``).
    """
    dtype = df.schema()[name]
    if dtype.is_string() or str(dtype) in ("null", "DataType(null)"):
        return
    if command == "prompt":
        fix = f"put it in a sentence: --template 'Rated {{{name}}} stars' (or --template '{{{name}}}' for the value alone)"
    else:
        fix = (f"make a text column first, e.g. inferframe sql \"SELECT *, CAST({name} AS VARCHAR) AS {name}_text "
               f"FROM ...\" --out DIR, then --column {name}_text")
    raise CLIError(f"--column {name!r} holds {dtype} values, not text; nothing is turned into text silently: "
                   f"{fix}. No request was sent.", USAGE)


def text_or_file(text: Optional[str], option: str) -> Optional[str]:
    """An option's text, or the contents of the file named after ``@``."""
    if text is None or not text.startswith("@"):
        return unescape(text)
    path = Path(text[1:]).expanduser()
    if not path.is_file():
        raise CLIError(f"{option} {text}: no such file: {path}", USAGE)
    return path.read_text(encoding="utf-8")


def template_message(df: ifr.DataFrame, template: str) -> tuple[ifr.Expression, list[str]]:
    """``"Review ({stars} stars): {review}"`` as a column expression, and the columns it uses."""
    from inferframe.functions import format as fmt

    literal, names = [], []
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as e:
        raise CLIError(f"--template {template!r}: {e}", USAGE) from None
    for text, name, spec, conv in fields:
        if "{}" in text:
            raise CLIError("--template cannot hold a literal '{}'", USAGE)
        literal.append(text)
        if name is None:
            continue
        if name == "" or spec or conv:
            raise CLIError(f"--template {template!r}: name a column in every {{...}}, e.g. {{review}}", USAGE)
        literal.append("{}")
        names.append(name)
    if not names:
        raise CLIError("--template needs at least one {column}, e.g. 'Review: {review}'", USAGE)
    check_columns(df, names, "--template")
    return fmt("".join(literal), *[ifr.col(n) for n in names]), list(dict.fromkeys(names))


def load_object(ref: str) -> Any:
    """``module:Name`` or ``path/to/file.py:Name`` (the current directory is importable)."""
    module_name, sep, attr = ref.rpartition(":")
    if not sep or not module_name or not attr:
        raise CLIError(f"--return-format {ref!r}: write module:Model or path/to/file.py:Model", USAGE)
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise CLIError(f"--return-format {ref!r}: no such file: {path}", USAGE)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except CLIError:
        raise
    except Exception as e:
        raise CLIError(f"--return-format {ref!r}: cannot import {module_name}: {type(e).__name__}: {e}",
                       USAGE) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise CLIError(f"--return-format {ref!r}: {module_name} has no {attr!r}", USAGE) from None
