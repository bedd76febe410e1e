"""What a job command prints: the run's totals and exit code, the first rows, an estimate.

Example:
    >>> money(0.5), money(0.004), money(None)
    ('$0.5000', '$0.004000', 'unknown price (inferframe.set_prices)')
"""

from __future__ import annotations

from typing import Any, Optional

import typer

from inferframe.cli.base import OK, ROWS_FAILED, echo_error


def totals(name: str) -> dict:
    from inferframe.observe import last_run

    runs = last_run()
    keys = ("rows_done", "errors", "not_run", "cache_hits", "truncated", "input_tokens", "output_tokens", "retries",
            "cached_tokens")
    total: dict[str, Any] = {k: sum(r.get(k) or 0 for r in runs) for k in keys}
    total["cost"] = sum(r.get("cost") or 0.0 for r in runs)
    total["cache_saved"] = sum(r.get("cache_saved") or 0.0 for r in runs)
    total["elapsed_s"] = max([r.get("elapsed_s") or 0.0 for r in runs] or [0.0])
    return total


def count_errors(errors: Any, counts: dict) -> dict:
    """Add the (kind, message) of each error record in ``errors`` (an Arrow struct column) to ``counts``; returns it.

    Example:
        >>> import pyarrow as pa
        >>> failed = {"kind": "not_found", "message": "HTTP 404: no"}
        >>> count_errors(pa.array([None, failed, failed]), {})
        {('not_found', 'HTTP 404: no'): 2}
    """
    import pyarrow.compute as pc

    if errors.null_count == len(errors):
        return counts
    failed = pc.drop_null(errors)
    kinds, messages = pc.struct_field(failed, "kind").to_pylist(), pc.struct_field(failed, "message").to_pylist()
    for said in zip(kinds, messages):
        counts[said] = counts.get(said, 0) + 1
    return counts


def written_errors(paths: list[str], name: str) -> dict:
    """The (kind, message) counts of the ``<name>_error`` column of the Parquet files a job wrote."""
    import pyarrow.parquet as pq

    counts: dict = {}
    for path in paths:
        table = pq.read_table(path, columns=[f"{name}_error"]) if f"{name}_error" in pq.read_schema(path).names else None
        if table is not None:
            count_errors(table.column(0), counts)
    return counts


def most_common(counts: dict) -> str:
    """"; most common: kind (N rows): message" for the most frequent error, "" when there is none.

    Example:
        >>> most_common({("bad_request", "HTTP 400: bad"): 3, ("timeout", "late"): 1})
        '; most common: bad_request (3 rows): HTTP 400: bad'
    """
    if not counts:
        return ""
    (kind, message), n = max(counts.items(), key=lambda kv: kv[1])
    message = message if len(message or "") <= 300 else message[:300] + "..."
    return f"; most common: {kind} ({n:,} row{'s' if n != 1 else ''}): {message}"


def report_totals(total: dict, name: str, rows: Optional[int], errors: Optional[dict] = None) -> int:
    """Print the run's totals on stderr; the exit code: 1 when rows failed or were not run.

    ``errors``: the failed rows' (kind, message) counts (``count_errors``): the most common is named.
    """
    tokens = total["input_tokens"] + total["output_tokens"]
    parts = [
        f"{rows if rows is not None else total['rows_done']:,} rows",
        f"{tokens:,} tokens ({total['input_tokens']:,} in, {total['output_tokens']:,} out)",
        money(total["cost"]),
    ]
    if total.get("cached_tokens"):  # the provider's prompt cache served part of the input
        from inferframe.observe.progress import prompt_cache_note

        parts.append(prompt_cache_note(total["input_tokens"], total["cached_tokens"], total.get("cache_saved") or 0.0))
    parts += [
        f"{total['errors']:,} errors",
        f"{total['cache_hits']:,} cached",
    ]
    if total["not_run"]:
        parts.append(f"{total['not_run']:,} not run (--max-cost)")
    if total["truncated"]:
        parts.append(f"{total['truncated']:,} cut at --max-tokens")
    parts.append(f"{total['elapsed_s']:.1f} s")
    typer.echo("done: " + ", ".join(parts), err=True)
    if total["errors"] or total["not_run"]:
        what = [f"{total['errors']:,} rows failed"] if total["errors"] else []
        what += [f"{total['not_run']:,} rows were not sent (--max-cost reached)"] if total["not_run"] else []
        echo_error(f"{' and '.join(what)}; see the {name}_error column{most_common(errors or {})}")
        return ROWS_FAILED
    return OK


def show_rows(table: Any, columns: list[str], n: int, total_rows: int) -> None:
    """Print the first ``n`` rows of ``columns``; an error record shows as "kind: message"."""
    import pyarrow as pa

    table = table.select([c for c in columns if c in table.column_names]).slice(0, n)
    for i, field in enumerate(table.schema):
        if field.name.endswith("_error") and pa.types.is_struct(field.type):
            text = [None if e is None else f"{e.get('kind')}: {e.get('message')}" for e in table.column(i).to_pylist()]
            table = table.set_column(i, field.name, pa.array(text, pa.string()))
    from inferframe.dataframe.display import render_text

    typer.echo(render_text(table, max_width=60, total=total_rows))
    if total_rows > n:
        typer.echo("(pass --out DIR to keep every row; the answers are cached, so that run sends nothing)", err=True)


def money(v: Optional[float]) -> str:
    if v is None:
        return "unknown price (inferframe.set_prices)"
    if 0 < v < 0.000_001:
        return "< $0.000001"
    return f"${v:,.6f}" if 0 < v < 0.01 else f"${v:,.4f}"


def cache_note(input_tokens: int, cached: Optional[int], saving: Optional[float]) -> str:
    """What a provider's prompt cache could serve of an estimate's input, and save; "" when nothing."""
    if not cached or not input_tokens:
        return ""
    saved = f", saving ~{money(saving)}" if saving else ""
    return f" (a prompt cache could serve ~{cached:,} input tokens, {cached / input_tokens:.0%}{saved})"


def print_estimate(result: dict) -> None:
    for call in result["calls"]:
        if call.get("rows") is None:
            typer.echo(f"{call['call']}: {call.get('note', 'unknown')}")
            continue
        out = call.get("max_output_tokens")
        typer.echo(
            f"{call['call']} ({call.get('provider')}): {call['rows']:,} rows, {call['input_tokens']:,} input tokens, "
            f"{'at most ' + format(out, ',') if out else 'unbounded'} output tokens, {money(call.get('cost_usd'))}"
            f"{cache_note(call['input_tokens'], call.get('cached_tokens'), call.get('cache_saving_usd'))}"
        )
    typer.echo(f"total: {result['input_tokens']:,} input tokens, {money(result['cost_usd'])}"
               f"{' at most' if result['cost_usd'] else ''}"
               f"{cache_note(result['input_tokens'], result.get('cached_tokens'), result.get('cache_saving_usd'))}"
               "; nothing was sent")
