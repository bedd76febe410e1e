"""``inferframe doctor``: check the installation (see :mod:`inferframe.doctor`).

Example:
    >>> from typer.testing import CliRunner
    >>> from inferframe.cli.base import app
    >>> "--quick" in CliRunner().invoke(app, ["doctor", "--help"]).output
    True
"""

from __future__ import annotations

from typing import Annotated

import typer

from inferframe.cli.base import app


@app.command(short_help="Check the installation.", help=(
    "Check the installation and print what works and what does not, each with its fix: Python and "
    "packages, the embedded model server (starts, answers, tokens/s), the embedding model, the response "
    "cache, the run history, Ray, headless Chromium, and the names (never values) of the environment "
    "variables that are set. Exits 0 when the demo would work. --spark MASTER_URL checks only what Spark jobs "
    "there need: Java, and that the executors import this inferframe (one tiny task).\n\n\b\nExample:\n"
    "  inferframe doctor --quick\n  inferframe doctor --spark spark://host:7077"))
def doctor(
    quick: Annotated[bool, typer.Option("--quick", help="Do not start a Ray cluster.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
    spark: Annotated[str | None, typer.Option("--spark", metavar="MASTER_URL", help=(
        "Check a Spark master instead: a session there, and one task that reports its Python and inferframe "
        "version."))] = None,
) -> None:
    from inferframe.doctor import main as doctor_main

    raise typer.Exit(doctor_main(["--quick"] * quick + ["--json"] * as_json + (["--spark", spark] if spark else [])))
