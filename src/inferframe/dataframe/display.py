"""Render a small table for ``show()``: text on terminals, HTML in notebooks."""

from __future__ import annotations

import datetime
import html
import io
import json

import pyarrow as pa

from inferframe.datatype import compact
from inferframe.errors import PlanError
from inferframe.observe.progress import in_notebook  # noqa: F401  (it lives there: the progress line needs it too)


def _cell(value, max_width: int | None) -> str:
    if value is None:
        text = "None"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, bytes):
        text = repr(value)
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list) and len(value) > 4 and all(isinstance(v, float) for v in value[:8]):
        # A vector: a few values at a readable precision, and its length.
        text = "[" + ", ".join(f"{v:.4f}" for v in value[:2]) + f", …] ({len(value)})"
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, default=str, ensure_ascii=False)
    elif isinstance(value, (datetime.date, datetime.datetime)):
        text = value.isoformat()
    else:
        text = str(value)
    text = text.replace("\n", "\\n")
    if max_width is not None and len(text) > max_width:
        text = text[: max(1, max_width - 1)] + "…"
    return text


def render_text(table: pa.Table, *, max_width: int | None = 30, total: int | None = None, format: str | None = None) -> str:
    """A boxed text table with column names and types; long values end in '…'.

    Parameters:
        table: the rows to show.
        max_width: longest cell, in characters (None: no limit).
        total: how many rows the full result has, when known.
        format: "fancy" (rounded box, default), "simple", "markdown" or "plain".
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    styles = {None: box.ROUNDED, "fancy": box.ROUNDED, "simple": box.SIMPLE, "markdown": box.MARKDOWN, "plain": None, "grid": box.SQUARE}
    if format not in styles:
        raise PlanError(f"show(format=...) takes one of {', '.join(repr(k) for k in styles if k)}, got {format!r}")
    t = Table(box=styles[format], show_lines=False, header_style="bold")
    for field in table.schema:
        t.add_column(f"{field.name}\n{compact(field.type)}", overflow="fold", max_width=(max_width + 2) if max_width else None)
    for row in table.to_pylist():
        t.add_row(*[_cell(row[name], max_width) for name in table.column_names])
    buf = io.StringIO()
    Console(file=buf, width=10_000, color_system=None, force_terminal=False, soft_wrap=True).print(t)
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    shown = f"(Showing first {table.num_rows} of {total} rows)" if total is not None and total > table.num_rows else f"({table.num_rows} rows)"
    return "\n".join(lines + [shown])


def render_html(table: pa.Table, *, max_width: int | None = 30) -> str:
    head = "".join(f"<th>{html.escape(f.name)}<br><small>{html.escape(compact(f.type))}</small></th>" for f in table.schema)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(row[n], max_width))}</td>" for n in table.column_names) + "</tr>"
        for row in table.to_pylist()
    )
    return f"<table class='inferframe'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table><small>({table.num_rows} rows)</small>"


