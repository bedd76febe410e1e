"""OpenAI's rate-limit headers read into neutral records: the ``x-ratelimit-{limit,remaining,reset}-*``
headers as ``LimitHints`` (with their reset durations such as ``6m0s``), and the ``retry-after-ms`` /
``retry-after`` wait hint. Servers that speak the OpenAI API send these; the runtime's limiter reads
only the hints.

Example:
    >>> parse_reset("6m0s"), retry_after({"retry-after-ms": "250"})
    (360.0, 0.25)
"""

from __future__ import annotations

import re
from typing import Mapping

from inferframe.providers.interface import LimitHints

__all__ = ["limit_hints", "parse_reset", "retry_after"]


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?$")


def parse_reset(value: str) -> float | None:
    """Parse OpenAI's reset durations such as '1s', '6m0s', '20ms', '0.5s'."""
    m = _DURATION.match(value.strip())
    if not m or not any(m.groups()):
        try:
            return float(value)
        except ValueError:
            return None
    h, mnt, s, ms = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mnt * 60 + s + ms / 1000


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The server's wait hint: ``retry-after-ms`` or ``retry-after`` seconds."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra:
        try:
            return float(ra)
        except ValueError:
            return None
    return None


def limit_hints(headers: Mapping[str, str] | None) -> LimitHints | None:
    """OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` headers as neutral hints.

    Example:
        >>> limit_hints({"x-ratelimit-limit-requests": "1200", "x-ratelimit-remaining-requests": "19",
        ...              "x-ratelimit-reset-requests": "50ms"})
        LimitHints(requests_limit=1200.0, requests_remaining=19.0, tokens_limit=None, tokens_remaining=None, requests_reset=0.05, tokens_reset=None)
        >>> limit_hints({"x-request-id": "req_1"}), limit_hints({"x-ratelimit-limit-requests": "n/a"})
        (None, None)
    """
    if not headers:
        return None
    get = headers.get
    found = [get(name) for name in _LIMIT_HEADERS]
    if not any(found):  # the usual answer of a server that sends none: no closures, no dataclass (issue 36)
        return None

    def num(v: str | None) -> float | None:
        try:
            return float(v) if v else None
        except ValueError:
            return None

    hints = LimitHints(num(found[0]), num(found[1]), num(found[2]), num(found[3]),
                       parse_reset(found[4]) if found[4] else None, parse_reset(found[5]) if found[5] else None)
    return hints if hints != LimitHints() else None


_LIMIT_HEADERS = ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-limit-tokens",
                  "x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
