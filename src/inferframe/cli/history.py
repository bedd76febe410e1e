"""``inferframe runs`` and ``inferframe report``: the run history, as a table and as an HTML report.

Example:
    >>> _run_row({"run_id": "r1", "status": "ok", "rows": 3, "input_tokens": 10, "output_tokens": 2, "cost": 0.5})
    {'run_id': 'r1', 'status': 'ok', 'rows': 3, 'tokens': 12, 'cost': '$0.5000', 'cached': None}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

import inferframe as ifr
from inferframe.cli.base import OK, USAGE, CLIError, app, guard
from inferframe.cli.options import opt
from inferframe.cli.output import money


def _library(name: str) -> Any:
    fn = getattr(ifr, name, None)
    if fn is None:
        raise CLIError(f"this version of inferframe has no run history (inferframe.{name} is missing)", USAGE)
    return fn


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` without the keywords ``fn`` does not take (or that are None)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return fn(*args, **{k: v for k, v in kwargs.items() if v is not None and (takes_any or k in params)})


HistoryDir = Annotated[Optional[Path], opt(
    "--cache-dir", metavar="DIR", help="The directory of the run history (default: the response cache's).")]


def _run_row(run: dict) -> dict:
    """One run as the table shows it: the columns a person scans, readable."""
    started = run.get("started")
    if hasattr(started, "strftime"):
        started = started.strftime("%Y-%m-%d %H:%M:%S")
    tokens = None
    if run.get("input_tokens") is not None or run.get("output_tokens") is not None:
        tokens = (run.get("input_tokens") or 0) + (run.get("output_tokens") or 0)
    row = {"run_id": run.get("run_id"), "started": None if started is None else str(started)[:19],
           "status": run.get("status"), "rows": run.get("rows"), "tokens": tokens,
           "cost": None if run.get("cost") is None else money(run["cost"]), "errors": run.get("errors"),
           "cached": run.get("cache_hits"), "models": run.get("models")}
    return {k: v for k, v in row.items() if v is not None or k in run or k in ("tokens", "cached")}


@app.command(short_help="The recent runs.", help=(
    "The recent runs, newest first: id, when, status, rows, tokens, cost, errors (inferframe.runs()).\n\n"
    "\b\nExample:\n  inferframe runs --limit 5"))
def runs(
    limit: Annotated[int, opt("--limit", "-n", metavar="N", min=1, show_default=True,
                              help="Show at most N runs.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print every field of the runs as JSON.")] = False,
    cache_dir: HistoryDir = None,
) -> None:
    with guard():
        history = _call(_library("runs"), limit=limit, directory=str(cache_dir) if cache_dir else None)
        if isinstance(history, ifr.DataFrame):
            rows = history.limit(limit).to_pylist()
        else:
            rows = [_as_dict(r) for r in list(history or [])[:limit]]
        if as_json:
            typer.echo(json.dumps(rows, indent=2, default=_json_value))
        elif not rows:
            typer.echo("no runs recorded yet")
        else:
            from inferframe.dataframe.display import render_text

            typer.echo(render_text(ifr.from_pylist([_run_row(r) for r in rows]).to_arrow(), max_width=40))
    raise typer.Exit(OK)


def _json_value(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _as_dict(run: Any) -> dict:
    if isinstance(run, dict):
        return run
    for method in ("as_dict", "to_dict", "model_dump"):
        if hasattr(run, method):
            return getattr(run, method)()
    return {"run": str(run)}


@app.command(short_help="Write the HTML report of a run.", help=(
    "Write the HTML report of a run (default: the newest) with inferframe.report(); prints its path.\n\n"
    "\b\nExample:\n  inferframe report --out report.html"
))
def report(
    run: Annotated[Optional[str], typer.Argument(
        metavar="RUN", show_default=False, help="The run's id (see inferframe runs); default: the newest run.")] = None,
    out: Annotated[Optional[Path], opt(
        "--out", "-o", metavar="PATH",
        help="Where to write the HTML (default: inferframe-report-<run>.html here).")] = None,
    cache_dir: HistoryDir = None,
) -> None:
    with guard():
        path = _call(_library("report"), run, str(out) if out is not None else None,
                     directory=str(cache_dir) if cache_dir else None)
        typer.echo(str(path if path is not None else out))
    raise typer.Exit(OK)
