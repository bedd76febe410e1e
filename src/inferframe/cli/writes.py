"""``--out DIR`` and ``--mode``: how a command writes its Parquet output, and what it does to a directory holding data.

The mode is the library's (``DataFrame.write_parquet(mode=...)``), checked before the job runs, so a
refused directory costs no request.

Example:
    >>> import tempfile
    >>> import inferframe as ifr
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = write_out(ifr.from_pydict({"a": [1]}), d, "error")
    ...     try:
    ...         write_out(ifr.from_pydict({"a": [2]}), d, "error")
    ...     except CLIError as e:
    ...         "--mode overwrite" in str(e), e.code
    (True, 2)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

import inferframe as ifr
from inferframe.cli.base import USAGE, CLIError

MODES = ("error", "overwrite", "append")

Mode = Annotated[str, typer.Option(
    "--mode", metavar="MODE", show_default=True,
    help="What --out does to a directory that already holds data: error (refuse it, before any request is sent), "
         "overwrite (replace its parts; the old ones go only once the new ones are in place) or append (add new "
         "parts next to them).")]


def write_out(df: "ifr.DataFrame", out: Path | str, mode: str, progress: Optional[bool] = None) -> list[Any]:
    """Write ``df`` to the Parquet directory ``out`` with ``mode``; the written paths.

    Parameters:
        df: the job's DataFrame (the job runs here).
        out: the directory of ``--out``.
        mode: ``--mode``: error, overwrite or append.
        progress: the progress line (None: on a terminal).
    """
    if mode not in MODES:
        raise CLIError(f"--mode {mode}: expected one of {', '.join(MODES)}", USAGE)
    try:
        return df.write_parquet(str(out), progress=progress, mode=mode).to_pydict()["path"]
    except ifr.OutputExistsError as e:
        shown = ", ".join(e.files[:3]) + (f" and {len(e.files) - 3} more" if len(e.files) > 3 else "")
        raise CLIError(f"{out} already holds data ({shown}); nothing was sent or written. Pass --mode overwrite "
                       "to replace its parts, --mode append to add to them, or --out an empty directory.",
                       USAGE) from None
