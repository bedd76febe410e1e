"""Exceptions raised by inferframe.io beyond the builtin ones.

Example::

    >>> issubclass(SchemaMismatchError, ValueError)
    True
"""

from __future__ import annotations

__all__ = ["SchemaMismatchError"]


class SchemaMismatchError(ValueError):
    """A file's column cannot be cast to the type the scan's schema expects.

    The message names the offending file, the column, both types, and the file
    (or explicit schema) the scan's schema came from.

    Example::

        >>> raise SchemaMismatchError("column 'x' is string in b.parquet, int64 in a.parquet")
        Traceback (most recent call last):
        ...
        inferframe.io.errors.SchemaMismatchError: column 'x' is string in b.parquet, int64 in a.parquet
    """
