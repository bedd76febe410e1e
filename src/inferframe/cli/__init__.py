"""The ``inferframe`` command line: one-line AI jobs over Parquet, CSV and JSON files.

Commands: ``prompt``, ``estimate``, ``embed`` (:mod:`~inferframe.cli.jobs`), ``cache stats|clear|path``
(:mod:`~inferframe.cli.cache`), ``runs``, ``report`` (:mod:`~inferframe.cli.history`), ``doctor``
(:mod:`~inferframe.cli.doctor`). The app, its exit codes and the one-line errors are in
:mod:`~inferframe.cli.base`; the options the job commands share in :mod:`~inferframe.cli.options`.

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

# Importing a command module registers its commands with the app, in the order --help lists them.
from inferframe.cli import jobs  # noqa: F401, I001  (prompt, estimate, embed)
from inferframe.cli import cache  # noqa: F401, I001
from inferframe.cli import history  # noqa: F401, I001  (runs, report)
from inferframe.cli import doctor  # noqa: F401, I001
from inferframe.cli import sql  # noqa: F401, I001
from inferframe.cli.base import EXIT_CODES, CLIError, app, main

__all__ = ["CLIError", "EXIT_CODES", "app", "main"]
