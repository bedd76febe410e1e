"""``inferframe cache stats|clear|export|path``: where the response cache is, how big, clearing and exporting it.

Each works on the SQLite file in a directory (``--cache-dir``) or on a PostgreSQL store (``--url``,
or ``INFERFRAME_CACHE_URL``); a store is named without its password.

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

UrlOption = Annotated[Optional[str], opt(
    "--url", metavar="URL", envvar="INFERFRAME_CACHE_URL", show_envvar=True,
    help="A PostgreSQL store, postgresql://user:password@host:5432/db (default: INFERFRAME_CACHE_URL; prefer the "
         "variable: a command line is visible to other users).")]


def _open_url(url: str):
    from inferframe.runtime.cache import open_cache
    from inferframe.session import Session, cache_url_of

    return open_cache(None, cache_url_of(Session().cache_store_of(url)))


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
def cache_stats(cache_dir: CacheDirOption = None, url: UrlOption = None) -> None:
    with guard():
        if url:
            st = _open_url(url).stats()
            typer.echo(f"entries: {st['entries']:,}\nsize:    {_size(st['bytes'])}\nstore:   {st['store']}\n"
                       f"schema:  version {st['schema_version']}\nbatches: {st['pending_batches']:,} pending")
            raise typer.Exit(OK)
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
    url: UrlOption = None,
) -> None:
    with guard():
        if url:
            store = _open_url(url)
            entries = len(store)
            if not yes and not typer.confirm(f"Delete {entries:,} cached answers in {store.name}?", default=False,
                                             err=True):
                typer.echo("nothing deleted", err=True)
                raise typer.Exit(ROWS_FAILED)
            store.clear()
            typer.echo(f"deleted {entries:,} cached answers from {store.name}")
            raise typer.Exit(OK)
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


@cache_app.command("export", short_help="Write every cached answer as JSON lines.", help=(
    "Write every cached answer as one JSON object a line (key, value, input_tokens, output_tokens, "
    "finish_reason, created), to --output or stdout.\n\n\b\nExample:\n  inferframe cache export -o answers.jsonl"))
def cache_export(
    cache_dir: CacheDirOption = None,
    url: UrlOption = None,
    output: Annotated[Optional[Path], opt("--output", "-o", metavar="FILE", help="Where to write (default: stdout).")] = None,
) -> None:
    import json

    with guard():
        if url:
            store = _open_url(url)
        else:
            from inferframe.runtime.cache import ResponseCache

            store = ResponseCache(_cache_dir(cache_dir))
        out = open(output, "w", encoding="utf-8") if output is not None else None
        n = 0
        try:
            for entry in store.export():
                line = json.dumps(entry, ensure_ascii=False)
                if out is not None:
                    out.write(line + "\n")
                else:
                    typer.echo(line)
                n += 1
        finally:
            if out is not None:
                out.close()
        if out is not None:
            typer.echo(f"exported {n:,} cached answers from {store.name} to {output}", err=True)
    raise typer.Exit(OK)


@cache_app.command("path", short_help="Print the cache's directory.", help=(
    "Print the response cache's directory.\n\n\b\nExample:\n  du -sh \"$(inferframe cache path)\""))
def cache_path(cache_dir: CacheDirOption = None) -> None:
    typer.echo(str(_cache_dir(cache_dir)))
    raise typer.Exit(OK)
