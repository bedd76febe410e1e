"""The job commands: ``prompt`` (ask a model about every row), ``estimate`` (its tokens and dollars, sending
nothing) and ``embed`` (a vector per row).

Example:
    >>> from typer.testing import CliRunner
    >>> from inferframe.cli.base import app
    >>> result = CliRunner().invoke(app, ["prompt", "/no/such/reviews.csv", "-c", "review"])
    >>> result.exit_code
    2
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

import inferframe as ifr
from inferframe.cli.base import EXIT_CODES, OK, USAGE, CLIError, app, guard
from inferframe.cli.inputs import (check_columns, check_text_column, load_object, read_input, template_message,
                                   text_or_file)
from inferframe.cli.options import (
    ApiKeyEnv, ApiKeyRefused, BaseUrl, Batch, Cache, CacheDir, Column, ErrorColumn, Format, Input, Labels, Limit,
    MaxConcurrency, MaxCost, MaxTokens, Model, Name, OldLabels, OldSystemMessage, OnError, Out, Progress, Provider,
    ReturnFormat, Rpm, Stop, SystemMessage, Temperature, Template, ai_options, api_key_from_env, opt, refuse_api_key,
    unescape,
)
from inferframe.cli.output import count_errors, print_estimate, report_totals, show_rows, totals, written_errors
from inferframe.cli.writes import Mode, write_out
from inferframe.functions._vocabulary import cli_flag


def prompt_job(input: str, column: Optional[str], template: Optional[str], system: Optional[str], name: str,
               model: Optional[str], provider: Optional[str], return_format: Optional[str], labels: Optional[str],
               fmt: Optional[str], limit: Optional[int], options: dict) -> tuple[ifr.DataFrame, list[str]]:
    """The DataFrame of one prompt job, and the input columns its messages use."""
    from inferframe.functions import classify_text, prompt

    if column is None and template is None:
        raise CLIError("give the text to send: --column NAME, or --template 'text with {column}s'", USAGE)
    if column is not None and template is not None:
        raise CLIError("give either --column or --template, not both", USAGE)
    if return_format is not None and labels is not None:
        raise CLIError("give either --return-format or --labels, not both", USAGE)
    df = read_input(input, fmt)
    if name in df.column_names:
        raise CLIError(f"the input already has a column {name!r}; name the answers with --as NAME", USAGE)
    if column is not None:
        check_columns(df, [column], "--column")
        check_text_column(df, column, "prompt")
        message, used = ifr.col(column), [column]
    else:
        message, used = template_message(df, unescape(template))
    if limit is not None:
        df = df.limit(limit)
    fmt_obj = load_object(return_format) if return_format is not None else None
    system_message = text_or_file(system, "--system-message")
    if labels is not None:
        given, labels = labels, [c.strip() for c in labels.split(",") if c.strip()]
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise CLIError(f"--labels {given!r}: give at least two distinct comma-separated labels", USAGE)
        # Label scoring where the server gives log-probabilities (the embedded llama.cpp model): each label's
        # probability, calibrated on the rows (classify_text's calibrate="auto"); constrained generation elsewhere.
        expr = classify_text(message, labels, system_message=system_message, provider=provider, model=model,
                             **options)
        return df.with_column(name, expr), used
    expr = prompt(message, fmt_obj, system_message=system_message, provider=provider, model=model, **options)
    return df.with_column(name, expr), used


@app.command(short_help="Ask a model about every row of a file.", help=(
    "Ask a model about every row; write the input's columns and the answers as Parquet (--out DIR), or "
    "print the first rows. The run's totals (rows, tokens, cost, errors) go to stderr at the end.\n\n"
    "\b\nExamples:\n"
    "  # the embedded local model, no key needed\n"
    "  inferframe prompt examples/data/reviews.csv --column review --labels positive,negative,neutral --limit 20\n"
    "  # a hosted model, typed answers from a Pydantic model in models.py, at most $1.50\n"
    "  export OPENAI_API_KEY=...\n"
    "  inferframe prompt 'tickets/*.parquet' --column text --return-format models:Ticket \\\n"
    "      --provider openai --model gpt-5-mini --max-cost 1.50 --out tickets_out/\n"
    "  # a message from several columns\n"
    "  inferframe prompt examples/data/reviews.csv --template 'Review ({stars} stars): {review}' \\\n"
    "      --system-message 'Summarise in five words.' --max-tokens 16 --out summaries/\n\n"
    + EXIT_CODES
))
def prompt(
    input: Input,
    column: Column = None,
    template: Template = None,
    system_message: SystemMessage = None,
    name: Name = "answer",
    model: Model = None,
    provider: Provider = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    return_format: ReturnFormat = None,
    labels: Labels = None,
    on_error: OnError = None,
    error_column: ErrorColumn = None,
    out: Out = None,
    mode: Mode = "error",
    fmt: Format = None,
    batch: Batch = False,
    max_cost: MaxCost = None,
    max_tokens: MaxTokens = None,
    temperature: Temperature = None,
    stop: Stop = None,
    limit: Limit = None,
    max_concurrency: MaxConcurrency = None,
    rpm: Rpm = None,
    cache: Cache = None,
    cache_dir: CacheDir = None,
    strip: Annotated[bool, typer.Option("--strip", help="Strip whitespace around text answers.")] = False,
    show: Annotated[int, typer.Option("--show", metavar="N", min=0, help="Rows to print (without --out).")] = 10,
    progress: Progress = None,
    api_key: ApiKeyRefused = None,
    old_system_message: OldSystemMessage = None,
    old_labels: OldLabels = None,
) -> None:
    with guard():
        refuse_api_key(api_key)
        system_message = cli_flag("--system-message", system_message, old_system_message)
        labels = cli_flag("--labels", labels, old_labels)
        options = ai_options(batch=batch, max_cost=max_cost, max_tokens=max_tokens, temperature=temperature,
                             stop=stop, max_concurrency=max_concurrency, rpm=rpm, cache=cache, cache_dir=cache_dir,
                             base_url=base_url, api_key=api_key_from_env(api_key_env), on_error=on_error,
                             error_column=error_column)
        df, used = prompt_job(input, column, template, system_message, name, model, provider, return_format, labels,
                              fmt, limit, options)
        if strip:
            if df.schema()[name] != ifr.DataType.string():
                raise CLIError("--strip works on text answers, not with --return-format or --labels", USAGE)
            df = df.with_column(name, ifr.col(name).str.strip())
        code = _run(df, name, used, out, show, progress, mode)
    raise typer.Exit(code)


def _run(df: ifr.DataFrame, name: str, used: list[str], out: Optional[Path], show: int,
         progress: Optional[bool], mode: str = "error") -> int:
    """Run the job: write ``out`` or print the first rows; then the totals."""
    if out is not None:
        written = write_out(df, out, mode, progress)
        total = totals(name)
        typer.echo(f"wrote {len(written)} Parquet file{'s' if len(written) != 1 else ''} to {out}", err=True)
        return report_totals(total, name, None, written_errors(written, name) if total["errors"] else None)
    import pyarrow as pa

    first, rows, errors = [], 0, {}
    for batch in df.iter_batches(progress):  # the whole job runs; only the rows shown are kept
        if rows < show:
            first.append(batch.slice(0, show - rows))
        rows += batch.num_rows
        if f"{name}_error" in batch.schema.names:
            count_errors(batch.column(f"{name}_error"), errors)  # the exit line names the most common
    total = totals(name)
    if first:
        show_rows(pa.Table.from_batches(first), used + [name] + ([f"{name}_error"] if errors else []), show, rows)
    return report_totals(total, name, rows, errors)


@app.command(short_help="Tokens and dollars of a prompt job; sends nothing.", help=(
    "Tokens and dollars of a prompt job before running it: reads the input and builds every request, but "
    "sends nothing (no API key needed). Takes the options of prompt.\n\n"
    "\b\nExample:\n"
    "  inferframe estimate examples/data/reviews.csv --column review --system-message 'Classify the sentiment.' \\\n"
    "      --provider openai --model gpt-5-mini --max-tokens 5\n\n"
    "Output tokens are bounded by --max-tokens (unbounded without it); the cost is in dollars at the "
    "built-in prices (unknown for other models).\n\n" + EXIT_CODES
))
def estimate(
    input: Input,
    column: Column = None,
    template: Template = None,
    system_message: SystemMessage = None,
    name: Name = "answer",
    model: Model = None,
    provider: Provider = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    return_format: ReturnFormat = None,
    labels: Labels = None,
    fmt: Format = None,
    batch: Batch = False,
    max_cost: MaxCost = None,
    max_tokens: MaxTokens = None,
    temperature: Temperature = None,
    stop: Stop = None,
    limit: Limit = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON.")] = False,
    api_key: ApiKeyRefused = None,
    old_system_message: OldSystemMessage = None,
    old_labels: OldLabels = None,
) -> None:
    with guard():
        refuse_api_key(api_key)
        system_message = cli_flag("--system-message", system_message, old_system_message)
        labels = cli_flag("--labels", labels, old_labels)
        key = api_key_from_env(api_key_env) if api_key_env else _placeholder_key(provider, base_url)
        options = ai_options(batch=batch, max_cost=max_cost, max_tokens=max_tokens, temperature=temperature,
                             stop=stop, base_url=base_url, api_key=key)
        df, _ = prompt_job(input, column, template, system_message, name, model, provider, return_format, labels,
                           fmt, limit, options)
        result = df.estimate()
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        else:
            print_estimate(result)
    raise typer.Exit(OK)


def _placeholder_key(provider: Optional[str], base_url: Optional[str]) -> Optional[str]:
    """A stand-in key so a hosted provider can be estimated without one: estimate sends nothing."""
    if provider is None:
        return None
    from inferframe.providers.registry import REGISTRY

    info = REGISTRY.get(provider)
    if info.needs_key and not (info.key_env and os.environ.get(info.key_env)):
        return "estimate-only-never-sent"
    return None


@app.command(short_help="Embed a text column; write Parquet.", help=(
    "Embed every row's text into a fixed-size float32 vector column; write the input's columns and the "
    "vectors as Parquet.\n\n"
    "\b\nExamples:\n"
    "  # the packaged all-MiniLM-L6-v2, in this process, no key\n"
    "  inferframe embed docs.parquet --column text --out docs_embedded/\n"
    "  # over an API (OPENAI_API_KEY from the environment)\n"
    "  inferframe embed docs.parquet --column text --provider openai \\\n"
    "      --model text-embedding-3-small --out docs_embedded/\n\n" + EXIT_CODES
))
def embed(
    input: Input,
    column: Annotated[str, opt("--column", "-c", metavar="COLUMN", help="The text column to embed.")],
    out: Annotated[Path, opt("--out", "-o", metavar="DIR",
                             help="Write the input's columns and the vectors to this directory as Parquet (atomic).")],
    mode: Mode = "error",
    name: Annotated[str, opt("--as", metavar="NAME", show_default=True, help="The vector column's name.")] = "embedding",
    model: Annotated[Optional[str], opt("--model", "-m", metavar="MODEL",
                                        help="The embedding model (default: the packaged all-MiniLM-L6-v2).")] = None,
    provider: Annotated[Optional[str], opt(
        "--provider", "-p", metavar="PROVIDER",
        help="sentence_transformers (default: in this process), or an OpenAI-compatible provider: openai, lm_studio, "
             "vllm, local, ...")] = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    dimensions: Annotated[Optional[int], opt("--dimensions", metavar="N", min=1,
                                             help="Ask the server for shorter vectors.")] = None,
    fmt: Format = None,
    limit: Limit = None,
    batch: Batch = False,
    max_cost: MaxCost = None,
    cache: Cache = None,
    cache_dir: CacheDir = None,
    on_error: OnError = None,
    error_column: ErrorColumn = None,
    progress: Progress = None,
    api_key: ApiKeyRefused = None,
) -> None:
    with guard():
        from inferframe.functions import embed_text

        refuse_api_key(api_key)
        options = ai_options(batch=batch, max_cost=max_cost, cache=cache, cache_dir=cache_dir, base_url=base_url,
                             api_key=api_key_from_env(api_key_env), on_error=on_error, error_column=error_column)
        df = read_input(input, fmt)
        check_columns(df, [column], "--column")
        check_text_column(df, column, "embed")
        if name in df.column_names:
            raise CLIError(f"the input already has a column {name!r}; name the vectors with --as NAME", USAGE)
        if limit is not None:
            df = df.limit(limit)
        df = df.with_column(name, embed_text(ifr.col(column), provider=provider, model=model, dimensions=dimensions,
                                             **options))
        written = write_out(df, out, mode, progress)
        typer.echo(f"wrote {len(written)} Parquet file{'s' if len(written) != 1 else ''} to {out}", err=True)
        if f"{name}_error" in df.column_names:  # over an API: errors as data and totals
            total = totals(name)
            code = report_totals(total, name, None, written_errors(written, name) if total["errors"] else None)
        else:  # in this process: a failure stops the job, so every row has its vector
            typer.echo(f"done: {ifr.read_parquet(str(out)).count_rows():,} rows", err=True)
            code = OK
    raise typer.Exit(code)
