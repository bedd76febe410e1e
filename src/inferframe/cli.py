"""The ``inferframe`` command line: one-line AI jobs over Parquet, CSV and JSON files.

Commands: ``prompt``, ``embed``, ``estimate``, ``cache stats|clear|path``, ``runs``, ``report``.
Every failure is one line on stderr (``error: ...``, no traceback) and an exit code scripts can
rely on: 0 ok, 1 the job ran but some rows failed, 2 bad usage or input, 3 the service failed,
130 interrupted. Keys come from the environment (``OPENAI_API_KEY``, or ``--api-key-env NAME``),
never from an option.

Example:
    >>> from typer.testing import CliRunner
    >>> result = CliRunner().invoke(app, ["cache", "path", "--cache-dir", "/tmp/inferframe-doc-cache"])
    >>> result.exit_code, result.output.strip()
    (0, '/tmp/inferframe-doc-cache')
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import json
import os
import string
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import typer
import typer.core

import inferframe as ifr
from inferframe.errors import (
    BatchAPIError, ExecutionError, InferframeError, LocalServerError, PathNotFoundError, ServiceError, UDFError,
)

OK, ROWS_FAILED, USAGE, SERVICE, INTERRUPTED = 0, 1, 2, 3, 130

EXIT_CODES = (
    "\b\nExit codes:\n"
    "  0    ok\n"
    "  1    the job ran but rows failed (their errors: the <name>_error column), or it stopped on a row\n"
    "  2    bad usage or input: unknown option, missing file, unknown column\n"
    "  3    the service failed: bad key, server down (ServiceError)\n"
    "  130  interrupted (Ctrl-C)"
)


class CLIError(Exception):
    """A one-line failure of the command line itself, with its exit code."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


def _echo_error(message: str) -> None:
    typer.echo("error: " + " ".join(str(message).split()), err=True)


class _Group(typer.core.TyperGroup):
    """Runs the CLI so that usage errors are one line too, and returns or exits with the documented codes."""

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                              **extra)
            code = rv if isinstance(rv, int) else OK
        except typer.Abort:  # end of input at a confirmation (Ctrl-C is typer.Exit(130))
            _echo_error("aborted")
            code = ROWS_FAILED
        except typer.TyperException as e:  # usage errors: unknown option, missing argument, bad value
            ctx = getattr(e, "ctx", None)
            code = getattr(e, "exit_code", USAGE)
            if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
                typer.echo(ctx.get_help())
            else:
                hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
                _echo_error(e.format_message() + hint)
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    cls=_Group,
    name="inferframe",
    rich_markup_mode=None,
    help=(
        "AI inference as a DataFrame operation, from the shell: ask a model about every row of a "
        "Parquet, CSV or JSON file and write the answers as Parquet.\n\n"
        "\b\nExamples:\n"
        "  inferframe estimate reviews.csv --column review --provider openai --model gpt-5-mini\n"
        "  inferframe prompt reviews.csv --column review --choices positive,negative,neutral --out scored/\n"
        "  inferframe embed docs.parquet --column text --out docs_embedded/\n"
        "  inferframe cache stats\n\n"
        "With no --provider and no OPENAI_API_KEY the embedded local model (Gemma 3 270M on llama.cpp) "
        "answers; --provider openai uses OPENAI_API_KEY and OPENAI_BASE_URL from the environment "
        "(--api-key-env NAME reads the key from another variable; keys are never options). Answers are "
        "cached: a rerun sends nothing.\n\n" + EXIT_CODES
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
cache_app = typer.Typer(
    cls=_Group,
    rich_markup_mode=None,
    help="The response cache: where it is, how big, and clearing it.\n\n\b\nExample:\n  inferframe cache stats",
    short_help="The response cache: stats, clear, path.",
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"inferframe {ifr.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    pass


# --- errors and exit codes ------------------------------------------------------------------

@contextlib.contextmanager
def _guard() -> Iterator[None]:
    """Turn every failure into one line on stderr and its documented exit code."""
    try:
        yield
    except typer.Exit:
        raise
    except CLIError as e:
        _echo_error(str(e))
        raise typer.Exit(e.code) from None
    except KeyboardInterrupt as e:  # the library's one line says what was kept and how to resume
        _echo_error(str(e) or "interrupted")
        raise typer.Exit(INTERRUPTED) from None
    except (ServiceError, LocalServerError, BatchAPIError) as e:
        _echo_error(str(e))
        raise typer.Exit(SERVICE) from None
    except (ExecutionError, UDFError) as e:  # the job ran and stopped on a row (RowFailed, a UDF, the data)
        _echo_error(str(e))
        raise typer.Exit(ROWS_FAILED) from None
    except (InferframeError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
            ValueError) as e:  # PlanError and the other errors found before any work: bad usage or input
        if os.environ.get("INFERFRAME_DEBUG"):
            raise
        _echo_error(str(e) or type(e).__name__)
        raise typer.Exit(USAGE) from None
    except Exception as e:  # a bug: still one line, the traceback on request
        if os.environ.get("INFERFRAME_DEBUG"):
            raise
        _echo_error(f"{type(e).__name__}: {e} (set INFERFRAME_DEBUG=1 for the traceback)")
        raise typer.Exit(ROWS_FAILED) from None


# --- reading the input ----------------------------------------------------------------------

_FORMATS = {
    ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "json",
    ".ndjson": "json",
}
_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4")
_GLOB_CHARS = set("*?[")


def _suffix(name: str) -> str:
    name = name.lower().rstrip("/")
    for ext in _COMPRESSED:
        if name.endswith(ext):
            name = name[: -len(ext)]
    return Path(name).suffix


def _format_of(path: str) -> tuple[str, list[str] | None]:
    """The reader for ``path`` (a file, directory or glob), and for a directory the extensions to keep."""
    fmt = _FORMATS.get(_suffix(path))
    if fmt is not None:
        return fmt, None
    is_glob = bool(_GLOB_CHARS & set(path))
    if not is_glob and "://" not in path and not Path(path).exists():
        raise PathNotFoundError(f"no such file or directory: {path}")
    if not is_glob and ("://" in path or Path(path).is_dir()):
        from inferframe.io.paths import resolve_paths

        _, files = resolve_paths(path)
        counts = Counter(_FORMATS[_suffix(f)] for f in files if _suffix(f) in _FORMATS)
        if counts:
            fmt = counts.most_common(1)[0][0]
            return fmt, [e for e, f in _FORMATS.items() if f == fmt]
        raise ValueError(f"no .parquet, .csv or .json(l) files in {path}; pass --format to read other names.")
    raise ValueError(f"cannot tell the format of {path!r} from its name; pass --format parquet|csv|tsv|json.")


def _read(path: str, fmt: Optional[str]) -> ifr.DataFrame:
    extensions = None
    if fmt is None:
        fmt, extensions = _format_of(path)
    elif not (_GLOB_CHARS & set(path)) and "://" not in path and not Path(path).exists():
        raise PathNotFoundError(f"no such file or directory: {path}")
    if extensions is None and Path(path).is_dir():
        extensions = [e for e, f in _FORMATS.items() if f == fmt]
    opts: dict[str, Any] = {"extensions": extensions} if extensions else {}
    if fmt == "parquet":
        return ifr.read_parquet(path, **opts)
    if fmt in ("csv", "tsv"):
        return ifr.read_csv(path, **({"delimiter": "\t"} if fmt == "tsv" else {}), **opts)
    if fmt == "json":
        if Path(path).is_file() and _starts_with(path, "["):  # a JSON array, not JSON lines
            with open(path, encoding="utf-8") as f:
                rows = json.load(f)
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise ValueError(f"{path}: a JSON file must hold one object per line, or an array of objects.")
            return ifr.from_pylist(rows)
        return ifr.read_json(path, **opts)
    raise ValueError(f"unknown --format {fmt!r}; use parquet, csv, tsv or json.")


def _starts_with(path: str, char: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head[:1] == char.encode()


def _check_columns(df: ifr.DataFrame, names: list[str], option: str) -> None:
    have = df.column_names
    for name in names:
        if name not in have:
            close = difflib.get_close_matches(name, have, n=3, cutoff=0.5)  # as the library's ColumnNotFoundError
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise CLIError(f"unknown column {name!r} ({option}).{hint} The input has: {', '.join(have)}", USAGE)


def _unescape(text: Optional[str]) -> Optional[str]:
    r"""``\n``, ``\t`` and ``\\`` in an option's text: a shell passes them literally."""
    if text is None:
        return None
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "nt\\":
            out.append({"n": "\n", "t": "\t", "\\": "\\"}[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _text_or_file(text: Optional[str], option: str) -> Optional[str]:
    """An option's text, or the contents of the file named after ``@``."""
    if text is None or not text.startswith("@"):
        return _unescape(text)
    path = Path(text[1:]).expanduser()
    if not path.is_file():
        raise CLIError(f"{option} {text}: no such file: {path}", USAGE)
    return path.read_text(encoding="utf-8")


def _template(df: ifr.DataFrame, template: str) -> tuple[ifr.Expression, list[str]]:
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
    _check_columns(df, names, "--template")
    return fmt("".join(literal), *[ifr.col(n) for n in names]), list(dict.fromkeys(names))


def _load_object(ref: str) -> Any:
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


def _api_key(env_name: Optional[str]) -> Optional[str]:
    if env_name is None:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise CLIError(f"--api-key-env {env_name}: the environment variable {env_name} is not set", USAGE)
    return value


# --- shared options -------------------------------------------------------------------------

def _opt(*names: str, help: str, metavar: Optional[str] = None, show_default: bool = False, **kw: Any) -> Any:
    return typer.Option(*names, metavar=metavar, help=help, show_default=show_default, **kw)


Input = Annotated[str, typer.Argument(
    metavar="INPUT", show_default=False,
    help="A Parquet, CSV/TSV or JSON(L) file, a directory of them, or a glob (quote it: 'data/*.parquet'); "
         "s3:// and other URIs work too.")]
Column = Annotated[Optional[str], _opt("--column", "-c", metavar="COLUMN",
                                       help="The text column to send, one row per request.")]
Template = Annotated[Optional[str], _opt(
    "--template", "-t", metavar="TEXT",
    help="The message built from columns instead of --column, e.g. 'Review ({stars} stars): {review}'; "
         "\\n is a newline.")]
System = Annotated[Optional[str], _opt(
    "--system", "-s", metavar="TEXT",
    help="Instructions sent with every row; @FILE reads them from a file; \\n is a newline.")]
Name = Annotated[str, _opt("--as", metavar="NAME", show_default=True,
                           help="The answer column's name (failed rows: <name>_error).")]
Model = Annotated[Optional[str], _opt("--model", "-m", metavar="MODEL",
                                      help="The model; default: the provider's (gemma-3-270m on the local model).")]
Provider = Annotated[Optional[str], _opt(
    "--provider", "-p", metavar="PROVIDER",
    help="local, openai, lm_studio, ollama, vllm, openrouter or a plugin's name; default: openai when "
         "OPENAI_API_KEY is set, else the embedded local model.")]
BaseUrl = Annotated[Optional[str], _opt(
    "--base-url", metavar="URL",
    help="The server's URL for an OpenAI-compatible provider (default: OPENAI_BASE_URL or the provider's own).")]
ApiKeyEnv = Annotated[Optional[str], _opt(
    "--api-key-env", metavar="NAME",
    help="Read the API key from this environment variable instead of the provider's own (OPENAI_API_KEY). "
         "Keys are never taken as options: they would land in shell history.")]
ApiKeyRefused = Annotated[Optional[str], typer.Option("--api-key", hidden=True)]
ReturnFormat = Annotated[Optional[str], _opt(
    "--return-format", metavar="MODULE:MODEL",
    help="A Pydantic model for typed answers, e.g. models:Ticket or models.py:Ticket (the answer column "
         "becomes a struct).")]
Choices = Annotated[Optional[str], _opt(
    "--choices", metavar="LABELS",
    help="Comma-separated labels; every answer is one of them, e.g. positive,negative,neutral.")]
Format = Annotated[Optional[str], _opt(
    "--format", "-f", metavar="FORMAT",
    help="Read the input as parquet, csv, tsv or json (JSON lines or an array) whatever its name.")]
Batch = Annotated[bool, typer.Option(
    "--batch", help="Send through the OpenAI Batch API: half price, answers within 24 h; the command waits.")]
MaxCost = Annotated[Optional[float], _opt(
    "--max-cost", metavar="DOLLARS", min=0,
    help="Stop sending once the job has cost this much (requests in flight still finish); rows not sent "
         "are errors of kind budget.")]
MaxTokens = Annotated[Optional[int], _opt("--max-tokens", metavar="N", min=1,
                                          help="At most this many output tokens per answer.")]
Temperature = Annotated[Optional[float], _opt("--temperature", metavar="T", min=0, help="Sampling temperature.")]
Stop = Annotated[Optional[list[str]], _opt("--stop", metavar="TEXT",
                                           help="Stop generating at this text (repeatable); \\n is a newline.")]
Limit = Annotated[Optional[int], _opt("--limit", "-n", metavar="N", min=0, help="Only the first N rows.")]
MaxConcurrency = Annotated[Optional[int], _opt(
    "--max-concurrency", metavar="N", min=1,
    help="At most this many requests in flight (default: sized from the rate limit).")]
Rpm = Annotated[Optional[float], _opt(
    "--rpm", metavar="N", min=0, help="Requests per minute (default: learned from the server's rate-limit headers).")]
Cache = Annotated[Optional[str], _opt("--cache", metavar="POLICY",
                                      help="read_write (default), read_only, refresh (ask again) or off.")]
CacheDir = Annotated[Optional[Path], _opt(
    "--cache-dir", metavar="DIR",
    help="The response cache's directory (default: INFERFRAME_CACHE_DIR or ~/.cache/inferframe).")]
Out = Annotated[Optional[Path], _opt(
    "--out", "-o", metavar="DIR",
    help="Write the input's columns and the answers to this directory as Parquet (atomic: all or nothing).")]
Progress = Annotated[Optional[bool], _opt("--progress/--no-progress",
                                          help="The progress line (default: on a terminal).")]


def _refuse_api_key(value: Optional[str]) -> None:
    if value is not None:
        raise CLIError("keys are not taken as options (they would land in shell history): export OPENAI_API_KEY=... "
                       "or name another variable with --api-key-env NAME", USAGE)


def _ai_options(*, batch: bool = False, max_cost: Optional[float] = None, max_tokens: Optional[int] = None,
                temperature: Optional[float] = None, stop: Optional[list[str]] = None,
                max_concurrency: Optional[int] = None, rpm: Optional[float] = None, cache: Optional[str] = None,
                cache_dir: Optional[Path] = None, base_url: Optional[str] = None,
                api_key: Optional[str] = None) -> dict:
    options: dict[str, Any] = {}
    if batch:
        options["batch"] = True
    for name, value in [("max_cost", max_cost), ("max_tokens", max_tokens), ("temperature", temperature),
                        ("max_concurrency", max_concurrency), ("rpm", rpm), ("cache", cache),
                        ("base_url", base_url), ("api_key", api_key)]:
        if value is not None:
            options[name] = value
    if cache_dir is not None:
        options["cache_dir"] = str(cache_dir)
    if stop:
        options["stop"] = [_unescape(s) for s in stop]
    return options


def _prompt_job(input: str, column: Optional[str], template: Optional[str], system: Optional[str], name: str,
                model: Optional[str], provider: Optional[str], return_format: Optional[str], choices: Optional[str],
                fmt: Optional[str], limit: Optional[int], options: dict) -> tuple[ifr.DataFrame, list[str]]:
    """The DataFrame of one prompt job, and the input columns its messages use."""
    from inferframe.functions import prompt

    if column is None and template is None:
        raise CLIError("give the text to send: --column NAME, or --template 'text with {column}s'", USAGE)
    if column is not None and template is not None:
        raise CLIError("give either --column or --template, not both", USAGE)
    if return_format is not None and choices is not None:
        raise CLIError("give either --return-format or --choices, not both", USAGE)
    df = _read(input, fmt)
    if name in df.column_names:
        raise CLIError(f"the input already has a column {name!r}; name the answers with --as NAME", USAGE)
    if column is not None:
        _check_columns(df, [column], "--column")
        message, used = ifr.col(column), [column]
    else:
        message, used = _template(df, _unescape(template))
    if limit is not None:
        df = df.limit(limit)
    fmt_obj = _load_object(return_format) if return_format is not None else None
    if choices is not None:
        labels = [c.strip() for c in choices.split(",") if c.strip()]
        if len(labels) < 2:
            raise CLIError(f"--choices {choices!r}: give at least two comma-separated labels", USAGE)
        options["choices"] = labels
    expr = prompt(message, fmt_obj, system_message=_text_or_file(system, "--system"), provider=provider, model=model,
                  **options)
    return df.with_column(name, expr), used


# --- output ---------------------------------------------------------------------------------

def _totals(name: str) -> dict:
    from inferframe.observe import last_run

    runs = last_run()
    keys = ("rows_done", "errors", "not_run", "cache_hits", "truncated", "input_tokens", "output_tokens", "retries",
            "cached_tokens")
    total: dict[str, Any] = {k: sum(r.get(k) or 0 for r in runs) for k in keys}
    total["cost"] = sum(r.get("cost") or 0.0 for r in runs)
    total["cache_saved"] = sum(r.get("cache_saved") or 0.0 for r in runs)
    total["elapsed_s"] = max([r.get("elapsed_s") or 0.0 for r in runs] or [0.0])
    return total


def _report_totals(total: dict, name: str, rows: Optional[int]) -> int:
    """Print the run's totals on stderr; the exit code: 1 when rows failed or were not run."""
    tokens = total["input_tokens"] + total["output_tokens"]
    parts = [
        f"{rows if rows is not None else total['rows_done']:,} rows",
        f"{tokens:,} tokens ({total['input_tokens']:,} in, {total['output_tokens']:,} out)",
        _money(total["cost"]),
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
        _echo_error(f"{' and '.join(what)}; see the {name}_error column")
        return ROWS_FAILED
    return OK


def _show(table: Any, columns: list[str], n: int, total_rows: int) -> None:
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


# --- commands -------------------------------------------------------------------------------

@app.command(short_help="Ask a model about every row of a file.", help=(
    "Ask a model about every row; write the input's columns and the answers as Parquet (--out DIR), or "
    "print the first rows. The run's totals (rows, tokens, cost, errors) go to stderr at the end.\n\n"
    "\b\nExamples:\n"
    "  # the embedded local model, no key needed\n"
    "  inferframe prompt reviews.csv --column review --choices positive,negative,neutral --limit 20\n"
    "  # a hosted model, typed answers from a Pydantic model in models.py, at most $1.50\n"
    "  export OPENAI_API_KEY=...\n"
    "  inferframe prompt 'tickets/*.parquet' --column text --return-format models:Ticket \\\n"
    "      --provider openai --model gpt-5-mini --max-cost 1.50 --out tickets_out/\n"
    "  # a message from several columns\n"
    "  inferframe prompt reviews.csv --template 'Review ({stars} stars): {review}' \\\n"
    "      --system 'Summarise in five words.' --max-tokens 16 --out summaries/\n\n"
    + EXIT_CODES
))
def prompt(
    input: Input,
    column: Column = None,
    template: Template = None,
    system: System = None,
    name: Name = "answer",
    model: Model = None,
    provider: Provider = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    return_format: ReturnFormat = None,
    choices: Choices = None,
    out: Out = None,
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
) -> None:
    with _guard():
        _refuse_api_key(api_key)
        options = _ai_options(batch=batch, max_cost=max_cost, max_tokens=max_tokens, temperature=temperature,
                              stop=stop, max_concurrency=max_concurrency, rpm=rpm, cache=cache, cache_dir=cache_dir,
                              base_url=base_url, api_key=_api_key(api_key_env))
        df, used = _prompt_job(input, column, template, system, name, model, provider, return_format, choices, fmt,
                               limit, options)
        if strip:
            if df.schema()[name] != ifr.DataType.string():
                raise CLIError("--strip works on text answers, not with --return-format or --choices", USAGE)
            df = df.with_column(name, ifr.col(name).str.strip())
        code = _run(df, name, used, out, show, progress)
    raise typer.Exit(code)


def _run(df: ifr.DataFrame, name: str, used: list[str], out: Optional[Path], show: int,
         progress: Optional[bool]) -> int:
    """Run the job: write ``out`` or print the first rows; then the totals."""
    if out is not None:
        written = df.write_parquet(str(out), progress=progress).to_pydict()["path"]
        total = _totals(name)
        typer.echo(f"wrote {len(written)} Parquet file{'s' if len(written) != 1 else ''} to {out}", err=True)
        return _report_totals(total, name, None)
    import pyarrow as pa

    first, rows, failed = [], 0, False
    for batch in df.iter_batches(progress):  # the whole job runs; only the rows shown are kept
        if rows < show:
            first.append(batch.slice(0, show - rows))
        rows += batch.num_rows
        if f"{name}_error" in batch.schema.names:
            failed = failed or batch.column(f"{name}_error").null_count < batch.num_rows
    total = _totals(name)
    if first:
        _show(pa.Table.from_batches(first), used + [name] + ([f"{name}_error"] if failed else []), show, rows)
    return _report_totals(total, name, rows)


@app.command(short_help="Tokens and dollars of a prompt job; sends nothing.", help=(
    "Tokens and dollars of a prompt job before running it: reads the input and builds every request, but "
    "sends nothing (no API key needed). Takes the options of prompt.\n\n"
    "\b\nExample:\n"
    "  inferframe estimate reviews.csv --column review --system 'Classify the sentiment.' \\\n"
    "      --provider openai --model gpt-5-mini --max-tokens 5\n\n"
    "Output tokens are bounded by --max-tokens (unbounded without it); the cost is in dollars at the "
    "built-in prices (unknown for other models).\n\n" + EXIT_CODES
))
def estimate(
    input: Input,
    column: Column = None,
    template: Template = None,
    system: System = None,
    name: Name = "answer",
    model: Model = None,
    provider: Provider = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    return_format: ReturnFormat = None,
    choices: Choices = None,
    fmt: Format = None,
    batch: Batch = False,
    max_cost: MaxCost = None,
    max_tokens: MaxTokens = None,
    temperature: Temperature = None,
    stop: Stop = None,
    limit: Limit = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON.")] = False,
    api_key: ApiKeyRefused = None,
) -> None:
    with _guard():
        _refuse_api_key(api_key)
        key = _api_key(api_key_env) if api_key_env else _placeholder_key(provider, base_url)
        options = _ai_options(batch=batch, max_cost=max_cost, max_tokens=max_tokens, temperature=temperature,
                              stop=stop, base_url=base_url, api_key=key)
        df, _ = _prompt_job(input, column, template, system, name, model, provider, return_format, choices, fmt,
                            limit, options)
        result = df.estimate()
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        else:
            _print_estimate(result)
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


def _money(v: Optional[float]) -> str:
    if v is None:
        return "unknown price (inferframe.set_prices)"
    if 0 < v < 0.000_001:
        return "< $0.000001"
    return f"${v:,.6f}" if 0 < v < 0.01 else f"${v:,.4f}"


def _cache_note(input_tokens: int, cached: Optional[int], saving: Optional[float]) -> str:
    """What a provider's prompt cache could serve of an estimate's input, and save; "" when nothing."""
    if not cached or not input_tokens:
        return ""
    saved = f", saving ~{_money(saving)}" if saving else ""
    return f" (a prompt cache could serve ~{cached:,} input tokens, {cached / input_tokens:.0%}{saved})"


def _print_estimate(result: dict) -> None:
    money = _money

    for call in result["calls"]:
        if call.get("rows") is None:
            typer.echo(f"{call['call']}: {call.get('note', 'unknown')}")
            continue
        out = call.get("max_output_tokens")
        typer.echo(
            f"{call['call']} ({call.get('provider')}): {call['rows']:,} rows, {call['input_tokens']:,} input tokens, "
            f"{'at most ' + format(out, ',') if out else 'unbounded'} output tokens, {money(call.get('cost_usd'))}"
            f"{_cache_note(call['input_tokens'], call.get('cached_tokens'), call.get('cache_saving_usd'))}"
        )
    typer.echo(f"total: {result['input_tokens']:,} input tokens, {money(result['cost_usd'])}"
               f"{' at most' if result['cost_usd'] else ''}"
               f"{_cache_note(result['input_tokens'], result.get('cached_tokens'), result.get('cache_saving_usd'))}"
               "; nothing was sent")


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
    column: Annotated[str, _opt("--column", "-c", metavar="COLUMN", help="The text column to embed.")],
    out: Annotated[Path, _opt("--out", "-o", metavar="DIR",
                              help="Write the input's columns and the vectors to this directory as Parquet (atomic).")],
    name: Annotated[str, _opt("--as", metavar="NAME", show_default=True, help="The vector column's name.")] = "embedding",
    model: Annotated[Optional[str], _opt("--model", "-m", metavar="MODEL",
                                         help="The embedding model (default: the packaged all-MiniLM-L6-v2).")] = None,
    provider: Annotated[Optional[str], _opt(
        "--provider", "-p", metavar="PROVIDER",
        help="sentence_transformers (default: in this process), or an OpenAI-compatible provider: openai, lm_studio, "
             "vllm, local, ...")] = None,
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = None,
    dimensions: Annotated[Optional[int], _opt("--dimensions", metavar="N", min=1,
                                              help="Ask the server for shorter vectors.")] = None,
    fmt: Format = None,
    limit: Limit = None,
    batch: Batch = False,
    max_cost: MaxCost = None,
    cache: Cache = None,
    cache_dir: CacheDir = None,
    progress: Progress = None,
    api_key: ApiKeyRefused = None,
) -> None:
    with _guard():
        from inferframe.functions import embed_text

        _refuse_api_key(api_key)
        options = _ai_options(batch=batch, max_cost=max_cost, cache=cache, cache_dir=cache_dir, base_url=base_url,
                              api_key=_api_key(api_key_env))
        df = _read(input, fmt)
        _check_columns(df, [column], "--column")
        if name in df.column_names:
            raise CLIError(f"the input already has a column {name!r}; name the vectors with --as NAME", USAGE)
        if limit is not None:
            df = df.limit(limit)
        df = df.with_column(name, embed_text(ifr.col(column), provider=provider, model=model, dimensions=dimensions,
                                             **options))
        written = df.write_parquet(str(out), progress=progress).to_pydict()["path"]
        typer.echo(f"wrote {len(written)} Parquet file{'s' if len(written) != 1 else ''} to {out}", err=True)
        if f"{name}_error" in df.column_names:  # over an API: errors as data and totals
            code = _report_totals(_totals(name), name, None)
        else:  # in this process: a failure stops the job, so every row has its vector
            typer.echo(f"done: {ifr.read_parquet(str(out)).count_rows():,} rows", err=True)
            code = OK
    raise typer.Exit(code)


# --- cache ----------------------------------------------------------------------------------

def _cache_dir(cache_dir: Optional[Path]) -> Path:
    from inferframe.runtime.cache import default_cache_dir

    return cache_dir.expanduser() if cache_dir is not None else default_cache_dir()


def _cache_files(directory: Path) -> list[Path]:
    return [p for p in (directory / n for n in ("responses.sqlite", "responses.sqlite-wal", "responses.sqlite-shm"))
            if p.exists()]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"


CacheDirOption = Annotated[Optional[Path], _opt(
    "--cache-dir", metavar="DIR",
    help="The cache's directory (default: INFERFRAME_CACHE_DIR, else $XDG_CACHE_HOME/inferframe or "
         "~/.cache/inferframe).")]


@cache_app.command("stats", short_help="Entries, size on disk and path.", help=(
    "Entries, size on disk and path of the response cache.\n\n\b\nExample:\n  inferframe cache stats"))
def cache_stats(cache_dir: CacheDirOption = None) -> None:
    with _guard():
        directory = _cache_dir(cache_dir)
        entries = 0
        if (directory / "responses.sqlite").exists():
            from inferframe.runtime.cache import ResponseCache

            cache = ResponseCache(directory)
            try:
                entries = len(cache)
            finally:
                cache.close()
        size = sum(p.stat().st_size for p in _cache_files(directory))
        typer.echo(f"entries: {entries:,}\nsize:    {_size(size)}\npath:    {directory}")
    raise typer.Exit(OK)


@cache_app.command("clear", short_help="Delete every cached answer.", help=(
    "Delete every cached answer (the next run pays for them again); asks first unless --yes. "
    "Answering no exits with code 1.\n\n\b\nExample:\n  inferframe cache clear --yes"
))
def cache_clear(
    cache_dir: CacheDirOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    with _guard():
        directory = _cache_dir(cache_dir)
        if not (directory / "responses.sqlite").exists():
            typer.echo(f"the cache at {directory} is empty")
            raise typer.Exit(OK)
        from inferframe.runtime.cache import ResponseCache

        cache = ResponseCache(directory)
        try:
            entries = len(cache)
            if not yes and not typer.confirm(f"Delete {entries:,} cached answers in {directory}?", default=False,
                                             err=True):
                typer.echo("nothing deleted", err=True)
                raise typer.Exit(ROWS_FAILED)
            cache.clear()
            with contextlib.suppress(Exception):  # give the space back; another process may hold the file
                cache._db.execute("VACUUM")
        finally:
            cache.close()
        typer.echo(f"deleted {entries:,} cached answers from {directory}")
    raise typer.Exit(OK)


@cache_app.command("path", short_help="Print the cache's directory.", help=(
    "Print the response cache's directory.\n\n\b\nExample:\n  du -sh \"$(inferframe cache path)\""))
def cache_path(cache_dir: CacheDirOption = None) -> None:
    typer.echo(str(_cache_dir(cache_dir)))
    raise typer.Exit(OK)


# --- run history ----------------------------------------------------------------------------

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


HistoryDir = Annotated[Optional[Path], _opt(
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
           "cost": None if run.get("cost") is None else _money(run["cost"]), "errors": run.get("errors"),
           "cached": run.get("cache_hits"), "models": run.get("models")}
    return {k: v for k, v in row.items() if v is not None or k in run or k in ("tokens", "cached")}


@app.command(short_help="The recent runs.", help=(
    "The recent runs, newest first: id, when, status, rows, tokens, cost, errors (inferframe.runs()).\n\n"
    "\b\nExample:\n  inferframe runs --limit 5"))
def runs(
    limit: Annotated[int, _opt("--limit", "-n", metavar="N", min=1, show_default=True,
                               help="Show at most N runs.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print every field of the runs as JSON.")] = False,
    cache_dir: HistoryDir = None,
) -> None:
    with _guard():
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
    out: Annotated[Optional[Path], _opt(
        "--out", "-o", metavar="PATH",
        help="Where to write the HTML (default: inferframe-report-<run>.html here).")] = None,
    cache_dir: HistoryDir = None,
) -> None:
    with _guard():
        path = _call(_library("report"), run, str(out) if out is not None else None,
                     directory=str(cache_dir) if cache_dir else None)
        typer.echo(str(path if path is not None else out))
    raise typer.Exit(OK)


@app.command(short_help="Check the installation.", help=(
    "Check the installation and print what works and what does not, each with its fix: Python and "
    "packages, the embedded model server (starts, answers, tokens/s), the embedding model, the response "
    "cache, the run history, Ray, headless Chromium, and the names (never values) of the environment "
    "variables that are set. Exits 0 when the demo would work.\n\n\b\nExample:\n  inferframe doctor --quick"))
def doctor(
    quick: Annotated[bool, typer.Option("--quick", help="Do not start a Ray cluster.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    from inferframe.doctor import main as doctor_main

    raise typer.Exit(doctor_main(["--quick"] * quick + ["--json"] * as_json))


def main(argv: Optional[list[str]] = None) -> int:
    """The ``inferframe`` console script: run the CLI and exit with its code."""
    return typer.main.get_command(app).main(args=argv, prog_name="inferframe", standalone_mode=True)


if __name__ == "__main__":
    main()
