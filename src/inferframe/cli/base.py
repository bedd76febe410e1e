"""The command line's frame: the typer app, its exit codes, and the guard that makes every failure one line.

Every failure is one line on stderr (``error: ...``, no traceback) and an exit code scripts can rely on:
0 ok, 1 the job ran but some rows failed, 2 bad usage or input, 3 the service failed, 130 interrupted.

Example:
    >>> from typer.testing import CliRunner
    >>> CliRunner().invoke(app, ["--version"]).output.startswith("inferframe ")
    True
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Annotated, Any, Iterator, Optional

import typer
import typer.core

import inferframe as ifr
from inferframe.errors import (
    BatchAPIError, ExecutionError, InferframeError, LocalServerError, RenamedOptionWarning, ServiceError, UDFError,
)

OK, ROWS_FAILED, USAGE, SERVICE, INTERRUPTED = 0, 1, 2, 3, 130

EXIT_CODES = (
    "\b\nExit codes:\n"
    "  0    ok\n"
    "  1    the job ran but rows failed (their errors: the <name>_error column), or it stopped on a row\n"
    "  2    bad usage or input: unknown option, missing file, unknown column\n"
    "  3    the service failed: bad key, server down, every row refused the same way (ServiceError)\n"
    "  130  interrupted (Ctrl-C)"
)


class CLIError(Exception):
    """A one-line failure of the command line itself, with its exit code."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


def echo_error(message: str) -> None:
    typer.echo("error: " + " ".join(str(message).split()), err=True)


def echo_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:
    """Print a warning as the command line's own line, ``warning: <message>`` on stderr (``warnings.showwarning``).

    Example:
        >>> import sys, contextlib
        >>> with contextlib.redirect_stderr(sys.stdout):
        ...     echo_warning(UserWarning("3 of 3 answers were cut off"), UserWarning, "/x/typer/main.py", 1)
        warning: 3 of 3 answers were cut off
    """
    typer.echo(f"warning: {message}", err=True)


class Group(typer.core.TyperGroup):
    """Runs the CLI so that usage errors are one line too, and returns or exits with the documented codes."""

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        try:
            with warnings.catch_warnings():
                # A warning is a line of its own, as an error is: no file and line of the library or of typer.
                warnings.showwarning = echo_warning
                # An old option name (a DeprecationWarning, hidden by default) is the user's to see here.
                warnings.simplefilter("always", RenamedOptionWarning)
                rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                                  **extra)
            code = rv if isinstance(rv, int) else OK
        except typer.Abort:  # end of input at a confirmation (Ctrl-C is typer.Exit(130))
            echo_error("aborted")
            code = ROWS_FAILED
        except typer.TyperException as e:  # usage errors: unknown option, missing argument, bad value
            ctx = getattr(e, "ctx", None)
            code = getattr(e, "exit_code", USAGE)
            if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
                typer.echo(ctx.get_help())
            else:
                hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
                echo_error(e.format_message() + hint)
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    cls=Group,
    name="inferframe",
    rich_markup_mode=None,
    help=(
        "AI inference as a DataFrame operation, from the shell: ask a model about every row of a "
        "Parquet, CSV or JSON file and write the answers as Parquet.\n\n"
        "\b\nExamples (from the repository root; examples/data/reviews.csv ships with it):\n"
        "  inferframe estimate examples/data/reviews.csv --column review --provider openai --model gpt-5-mini\n"
        "  inferframe prompt examples/data/reviews.csv --column review --labels positive,negative,neutral --limit 5\n"
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
    cls=Group,
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
def guard() -> Iterator[None]:
    """Turn every failure into one line on stderr and its documented exit code."""
    try:
        yield
    except typer.Exit:
        raise
    except CLIError as e:
        echo_error(str(e))
        raise typer.Exit(e.code) from None
    except KeyboardInterrupt as e:  # the library's one line says what was kept and how to resume
        echo_error(str(e) or "interrupted")
        raise typer.Exit(INTERRUPTED) from None
    except (ServiceError, LocalServerError, BatchAPIError) as e:
        echo_error(str(e))
        raise typer.Exit(SERVICE) from None
    except (ExecutionError, UDFError) as e:  # the job ran and stopped on a row (RowFailed, a UDF, the data)
        echo_error(str(e))
        raise typer.Exit(ROWS_FAILED) from None
    except (InferframeError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
            ValueError) as e:  # PlanError and the other errors found before any work: bad usage or input
        if os.environ.get("INFERFRAME_DEBUG"):
            raise
        echo_error(str(e) or type(e).__name__)
        raise typer.Exit(USAGE) from None
    except Exception as e:  # a bug: still one line, the traceback on request
        if os.environ.get("INFERFRAME_DEBUG"):
            raise
        echo_error(f"{type(e).__name__}: {e} (set INFERFRAME_DEBUG=1 for the traceback)")
        raise typer.Exit(ROWS_FAILED) from None


def main(argv: Optional[list[str]] = None) -> int:
    """The ``inferframe`` console script: run the CLI and exit with its code.

    Parameters:
        argv: the arguments (default: ``sys.argv[1:]``).

    Example:
        >>> main(["--version"])
        Traceback (most recent call last):
        SystemExit: 0
    """
    return typer.main.get_command(app).main(args=argv, prog_name="inferframe", standalone_mode=True)
