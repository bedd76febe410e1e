"""The options the job commands share, and turning them into a prompt's keyword options.

Keys are never options (they would land in shell history): ``--api-key-env NAME`` names the variable.

Example:
    >>> ai_options(max_tokens=16, stop=["\\\\n"], temperature=None)
    {'max_tokens': 16, 'stop': ['\\n']}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from inferframe.cli.base import USAGE, CLIError
from inferframe.functions._vocabulary import CLI_ALIASES


def opt(*names: str, help: str, metavar: Optional[str] = None, show_default: bool = False, **kw: Any) -> Any:
    return typer.Option(*names, metavar=metavar, help=help, show_default=show_default, **kw)


Input = Annotated[str, typer.Argument(
    metavar="INPUT", show_default=False,
    help="A Parquet, CSV/TSV or JSON(L) file, a directory of them, or a glob (quote it: 'data/*.parquet'); "
         "s3:// and other URIs work too.")]
Column = Annotated[Optional[str], opt("--column", "-c", metavar="COLUMN",
                                      help="The text column to send, one row per request.")]
Template = Annotated[Optional[str], opt(
    "--template", "-t", metavar="TEXT",
    help="The message built from columns instead of --column, e.g. 'Review ({stars} stars): {review}'; "
         "\\n is a newline.")]
SystemMessage = Annotated[Optional[str], opt(
    "--system-message", "-s", metavar="TEXT",
    help="Instructions sent with every row (the system message); @FILE reads them from a file; \\n is a newline.")]
Name = Annotated[str, opt("--as", metavar="NAME", show_default=True,
                          help="The answer column's name (failed rows: <name>_error).")]
OnError = Annotated[Optional[str], opt(
    "--on-error", metavar="null|raise",
    help="null (default): a failed row's answer is empty and its error goes to <name>_error; raise: the first "
         "failed row stops the job (exit 1).")]
ErrorColumn = Annotated[Optional[bool], opt("--error-column/--no-error-column",
                                            help="Keep failed rows' errors in <name>_error (default: yes).")]
Model = Annotated[Optional[str], opt("--model", "-m", metavar="MODEL",
                                     help="The model; default: the provider's (gemma-3-270m on the local model).")]
Provider = Annotated[Optional[str], opt(
    "--provider", "-p", metavar="PROVIDER",
    help="local, openai, lm_studio, ollama, vllm, openrouter or a plugin's name; default: openai when "
         "OPENAI_API_KEY is set, else the embedded local model.")]
BaseUrl = Annotated[Optional[str], opt(
    "--base-url", metavar="URL",
    help="The server's URL for an OpenAI-compatible provider (default: OPENAI_BASE_URL or the provider's own).")]
ApiKeyEnv = Annotated[Optional[str], opt(
    "--api-key-env", metavar="NAME",
    help="Read the API key from this environment variable instead of the provider's own (OPENAI_API_KEY). "
         "Keys are never taken as options: they would land in shell history.")]
ApiKeyRefused = Annotated[Optional[str], typer.Option("--api-key", hidden=True)]
ReturnFormat = Annotated[Optional[str], opt(
    "--return-format", metavar="MODULE:MODEL",
    help="A Pydantic model for typed answers, e.g. models:Ticket or models.py:Ticket (the answer column "
         "becomes a struct).")]
Labels = Annotated[Optional[str], opt(
    "--labels", metavar="LABELS",
    help="Comma-separated labels; every answer is one of them, e.g. positive,negative,neutral. Chosen by each "
         "label's calibrated probability where the server gives log-probabilities (the embedded model), else by "
         "constrained generation; the answer's probability goes to <name>_confidence.")]
# The old flags: hidden, they still work one release with a warning (functions/_vocabulary.py's CLI_ALIASES).
OldSystemMessage = Annotated[Optional[str], typer.Option(CLI_ALIASES["--system-message"], hidden=True)]
OldLabels = Annotated[Optional[str], typer.Option(CLI_ALIASES["--labels"], hidden=True)]
Format = Annotated[Optional[str], opt(
    "--format", "-f", metavar="FORMAT",
    help="Read the input as parquet, csv, tsv or json (JSON lines or an array) whatever its name.")]
Batch = Annotated[bool, typer.Option(
    "--batch", help="Send through the OpenAI Batch API: half price, answers within 24 h; the command waits.")]
MaxCost = Annotated[Optional[float], opt(
    "--max-cost", metavar="DOLLARS", min=0,
    help="Stop sending once the job has cost this much (requests in flight still finish); rows not sent "
         "are errors of kind budget.")]
MaxTokens = Annotated[Optional[int], opt("--max-tokens", metavar="N", min=1,
                                         help="At most this many output tokens per answer.")]
Temperature = Annotated[Optional[float], opt("--temperature", metavar="T", min=0, help="Sampling temperature.")]
Stop = Annotated[Optional[list[str]], opt("--stop", metavar="TEXT",
                                          help="Stop generating at this text (repeatable); \\n is a newline.")]
Limit = Annotated[Optional[int], opt("--limit", "-n", metavar="N", min=0, help="Only the first N rows.")]
MaxConcurrency = Annotated[Optional[int], opt(
    "--max-concurrency", metavar="N", min=1,
    help="At most this many requests in flight (default: sized from the rate limit).")]
Rpm = Annotated[Optional[float], opt(
    "--rpm", metavar="N", min=0, help="Requests per minute (default: learned from the server's rate-limit headers).")]
Cache = Annotated[Optional[str], opt("--cache", metavar="POLICY",
                                     help="read_write (default), read_only, refresh (ask again) or off.")]
CacheDir = Annotated[Optional[Path], opt(
    "--cache-dir", metavar="DIR",
    help="The response cache's directory (default: INFERFRAME_CACHE_DIR or ~/.cache/inferframe).")]
Out = Annotated[Optional[Path], opt(
    "--out", "-o", metavar="DIR",
    help="Write the input's columns and the answers to this directory as Parquet (atomic: all or nothing).")]
Progress = Annotated[Optional[bool], opt("--progress/--no-progress",
                                         help="The progress line (default: on a terminal).")]


def unescape(text: Optional[str]) -> Optional[str]:
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


def api_key_from_env(env_name: Optional[str]) -> Optional[str]:
    """The value of the environment variable ``--api-key-env`` names; None without the option."""
    if env_name is None:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise CLIError(f"--api-key-env {env_name}: the environment variable {env_name} is not set", USAGE)
    return value


def refuse_api_key(value: Optional[str]) -> None:
    if value is not None:
        raise CLIError("keys are not taken as options (they would land in shell history): export OPENAI_API_KEY=... "
                       "or name another variable with --api-key-env NAME", USAGE)


def ai_options(*, batch: bool = False, max_cost: Optional[float] = None, max_tokens: Optional[int] = None,
               temperature: Optional[float] = None, stop: Optional[list[str]] = None,
               max_concurrency: Optional[int] = None, rpm: Optional[float] = None, cache: Optional[str] = None,
               cache_dir: Optional[Path] = None, base_url: Optional[str] = None,
               api_key: Optional[str] = None, on_error: Optional[str] = None,
               error_column: Optional[bool] = None) -> dict:
    """The prompt's keyword options from the command's, leaving out those not given (the function checks them)."""
    options: dict[str, Any] = {}
    if batch:
        options["batch"] = True
    for name, value in [("max_cost", max_cost), ("max_tokens", max_tokens), ("temperature", temperature),
                        ("max_concurrency", max_concurrency), ("rpm", rpm), ("cache", cache),
                        ("base_url", base_url), ("api_key", api_key), ("on_error", on_error),
                        ("error_column", error_column)]:
        if value is not None:
            options[name] = value
    if cache_dir is not None:
        options["cache_dir"] = str(cache_dir)
    if stop:
        options["stop"] = [unescape(s) for s in stop]
    return options
