"""``inferframe sql "..."``: a DuckDB SQL query with AI functions over files, printed or written to Parquet.

Example:
    >>> from typer.testing import CliRunner
    >>> from inferframe.cli.base import app
    >>> "--explain" in CliRunner().invoke(app, ["sql", "--help"]).output
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

import inferframe as ifr
from inferframe.cli.base import app, guard
from inferframe.cli.output import show_rows
from inferframe.cli.writes import Mode, write_out
from inferframe.sql.writes import write_of


@app.command(short_help="Run SQL with AI functions over files.", help=(
    "Run one DuckDB SELECT over files ('reviews.parquet', read_csv('x.csv')) with the AI functions "
    "ai_complete, ai_query, ai_classify, ai_extract, ai_filter, ai_score, ai_embed, ai_similarity, "
    "ai_agg and ai_summarize_agg, planned by inferframe: only the rows the query needs are sent, through "
    "the cache and the rate limits. COPY (SELECT ...) TO 'out.parquet' (FORMAT parquet|csv|json) writes one "
    "file atomically. --explain shows the AI calls and their estimated calls, tokens and "
    "dollars, and sends nothing.\n\n\b\nExample:\n"
    "  inferframe sql \"select ai_classify(review, ['pos','neg']) as label from 'reviews.parquet' limit 5\""))
def sql(
    query: Annotated[str, typer.Argument(help="The statement: a SELECT, or COPY (SELECT ...) TO 'file'.")],
    explain: Annotated[bool, typer.Option("--explain", help="Show the plan and the estimate; send nothing.")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="Write every row to this Parquet directory.")] = None,
    show: Annotated[int, typer.Option("--show", help="Rows to print.")] = 20,
    mode: Mode = "error",
) -> None:
    with guard():
        if explain:
            typer.echo("\n".join(ifr.sql("EXPLAIN " + query).to_pydict()["explain"]))
            return
        if out is not None and write_of(query) is not None:  # refused before the statement runs: it writes itself
            raise ifr.PlanError("--out writes a SELECT's rows; this statement writes its own (COPY ... TO 'file'): "
                                "drop --out, or pass the SELECT alone.")
        df = ifr.sql(query)
        if out is not None:
            write_out(df, out, mode)
            typer.echo(f"wrote {out}")
            return
        table = df.to_arrow()
        show_rows(table, table.column_names, show, table.num_rows)
