"""One row of the doctor's table, and the exit code a table gives.

Example:
    >>> exit_code([Check("x", "fail", "broken", "fix it", needed=False)])
    0
"""

from __future__ import annotations

import dataclasses
import importlib.metadata

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"


@dataclasses.dataclass
class Check:
    """One line of the doctor's table."""

    name: str
    status: str
    found: str
    fix: str = ""
    needed: bool = False  # the demo needs it: a failure makes the exit code 1
    log_tail: str = ""


def exit_code(checks: list[Check]) -> int:
    """0 when every check the demo needs passed, else 1."""
    return 1 if any(c.needed and c.status == FAIL for c in checks) else 0


def version_of(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
