"""Translate shell-style glob patterns into regular expressions over relative paths.

Supported syntax: ``*`` (any run of characters within one path component),
``?`` (one character), ``[abc]`` / ``[!abc]`` (character classes) and ``**``
(any number of directories). A wildcard never matches a component that starts
with ``.`` or ``_``: such files are hidden (Spark/Hadoop write ``_SUCCESS`` and
``.crc`` files, inferframe writes its temporary directory as ``._inferframe_tmp_*``).
Name a hidden component literally (``data/_meta/*.json``) to match it.

Example::

    >>> bool(glob_to_regex("**/*.csv").fullmatch("a/b/c.csv"))
    True
"""

from __future__ import annotations

import re

__all__ = ["GLOB_CHARS", "has_glob", "split_glob", "glob_to_regex", "is_hidden"]

GLOB_CHARS = "*?["

# A wildcard at the start of a component must not reveal hidden entries.
_NOT_HIDDEN = r"(?![._])"


def has_glob(path: str) -> bool:
    """Return True if ``path`` contains a glob wildcard.

    Args:
        path: a path or URI.

    Example::

        >>> has_glob("data/*.parquet"), has_glob("data/x.parquet")
        (True, False)
    """
    return any(ch in path for ch in GLOB_CHARS)


def split_glob(path: str) -> tuple[str, str]:
    """Split ``path`` into the literal directory before the first wildcard and the pattern.

    Args:
        path: a path containing at least one wildcard.

    Returns:
        ``(base, pattern)``; ``base`` is ``""`` when the wildcard is in the first component.

    Example::

        >>> split_glob("data/2024/*/x-?.csv")
        ('data/2024', '*/x-?.csv')
    """
    first = min(path.index(ch) for ch in GLOB_CHARS if ch in path)
    cut = path.rfind("/", 0, first)
    if cut < 0:
        return "", path
    # Keep the root slash of absolute paths such as "/*.csv".
    base = path[:cut] if cut > 0 else "/"
    return base, path[cut + 1 :]


def is_hidden(relative_path: str) -> bool:
    """Return True if any component of ``relative_path`` starts with ``.`` or ``_``.

    Args:
        relative_path: a ``/``-separated path relative to a listed directory.

    Example::

        >>> is_hidden("a/_tmp/b.parquet"), is_hidden("a/b.parquet")
        (True, False)
    """
    return any(part[:1] in (".", "_") for part in relative_path.split("/") if part)


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob pattern to a regex that must match a whole relative path.

    Args:
        pattern: ``/``-separated glob, relative to the directory being listed.

    Example::

        >>> bool(glob_to_regex("*.csv").fullmatch("_x.csv"))
        False
    """
    parts = [p for p in pattern.split("/") if p]
    out: list[str] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            if last:
                out.append(rf"{_NOT_HIDDEN}[^/]+(?:/{_NOT_HIDDEN}[^/]+)*")
            else:
                # Zero or more directories, each followed by its own separator.
                out.append(rf"(?:{_NOT_HIDDEN}[^/]+/)*")
            continue
        out.append(_component_to_regex(part))
        if not last:
            out.append("/")
    return re.compile("".join(out))


def _component_to_regex(part: str) -> str:
    out = [_NOT_HIDDEN] if part[0] in GLOB_CHARS else []
    i = 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            # "a**b" inside a component behaves like "*": no directory crossing.
            while i + 1 < len(part) and part[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end, cls = _parse_class(part, i)
            if end < 0:
                out.append(re.escape(ch))
            else:
                out.append(cls)
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _parse_class(part: str, start: int) -> tuple[int, str]:
    """Return (index of closing ']', regex class) or (-1, '') if the class is unterminated."""
    j = start + 1
    negate = j < len(part) and part[j] == "!"
    if negate:
        j += 1
    # A ']' right after '[' or '[!' is a literal member, as in fnmatch.
    if j < len(part) and part[j] == "]":
        j += 1
    end = part.find("]", j)
    if end < 0:
        return -1, ""
    body = part[start + 1 + (1 if negate else 0) : end]
    # Escape what regex classes treat specially but globs do not ('^' only matters first).
    body = body.replace("\\", r"\\").replace("[", r"\[").replace("]", r"\]")
    if body.startswith("^"):
        body = "\\" + body
    return end, "[" + ("^/" if negate else "") + body + "]"
