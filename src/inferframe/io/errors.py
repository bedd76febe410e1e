"""The errors inferframe.io raises beyond the builtin ones (defined with every other error in inferframe.errors).

Example::

    >>> issubclass(SchemaMismatchError, ValueError)
    True
"""

from __future__ import annotations

from inferframe.errors import SchemaMismatchError

__all__ = ["SchemaMismatchError"]
