"""``inferframe cache stats|clear|path``: where the response cache is, how big, and clearing it.

Example:
    >>> from typer.testing import CliRunner
    >>> from inferframe.cli.base import app
    >>> CliRunner().invoke(app, ["cache", "stats", "--cache-dir", "/tmp/inferframe-doc-empty"]).output.split()[:2]
    ['entries:', '0']
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from inferframe.cli.base import OK, ROWS_FAILED, cache_app, guard
from inferframe.cli.options import opt


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


CacheDirOption = Annotated[Optional[Path], opt(
    "--cache-dir", metavar="DIR",
    help="The cache's directory (default: INFERFRAME_CACHE_DIR, else $XDG_CACHE_HOME/inferframe or "
         "~/.cache/inferframe).")]


@cache_app.command("stats", short_help="Entries, size on disk and path.", help=(
    "Entries, size on disk and path of the response cache.\n\n\b\nExample:\n  inferframe cache stats"))
def cache_stats(cache_dir: CacheDirOption = None) -> None:
    with guard():
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
    with guard():
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
            cache.clear()  # and gives the space back to the disk
        finally:
            cache.close()
        typer.echo(f"deleted {entries:,} cached answers from {directory}")
    raise typer.Exit(OK)


@cache_app.command("path", short_help="Print the cache's directory.", help=(
    "Print the response cache's directory.\n\n\b\nExample:\n  du -sh \"$(inferframe cache path)\""))
def cache_path(cache_dir: CacheDirOption = None) -> None:
    typer.echo(str(_cache_dir(cache_dir)))
    raise typer.Exit(OK)
