"""One name for each meaning across the public AI functions, and the old names kept one release as deprecated aliases.

| meaning | the name | old names (deprecated) |
|---|---|---|
| instructions sent with every call | ``system_message`` | ``instructions`` (sem_join) |
| labelled demonstrations | ``examples`` | ``property_examples`` (sem_join) |
| the in-process embedding model | ``embed_model`` | ``proxy_model`` (sem_filter's cascade) |
| the output column's name | ``column`` | ``score_column``, ``rank_column`` (sem_rank) |
| an accuracy target | ``target_<metric>``: ``target_accuracy`` (classify), ``target_recall`` / ``target_precision`` (filters, joins) | |
| keep failed rows' errors | ``error_column`` (default True everywhere: a failed row is kept, its error in ``<name>_error``) | |

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     opts = renamed("sem_join", {"instructions": "Be strict."})
    >>> opts, seen[0].category.__name__
    ({'system_message': 'Be strict.'}, 'DeprecationWarning')
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from inferframe.errors import PlanError, warn_user

# old name -> the one name
ALIASES = MappingProxyType({
    "instructions": "system_message",
    "property_examples": "examples",
    "proxy_model": "embed_model",
    "score_column": "column",
    "rank_column": "column",
})


def renamed(fn: str, options: dict) -> dict:
    """``options`` with every deprecated name replaced by its one name (a DeprecationWarning each); both given is a PlanError.

    Parameters:
        fn: the function's name, for messages.
        options: the keyword options as the user passed them.
    """
    out = dict(options)
    for old, new in ALIASES.items():
        if old not in out:
            continue
        if new in out:
            raise PlanError(f"{fn}(): pass {new}= only; {old}= is its old name.")
        warn_user(f"{fn}(): {old}= is deprecated and will be removed in the next release; use {new}=.",
                  DeprecationWarning)
        out[new] = out.pop(old)
    return out


def deprecated(fn: str, old: str, value: Any, new: str, current: Any) -> Any:
    """The value of ``new`` given a keyword argument ``old`` that may also be set (a DeprecationWarning when it is).

    Example:
        >>> deprecated("sem_rank", "score_column", None, "column", "score")
        'score'
    """
    if value is None:
        return current
    return renamed(fn, {old: value})[new]


def take(fn: str, options: dict, new: str, current: Any, default: Any = None) -> Any:
    """The value of the keyword ``new`` (``current``), or of an old name of it popped from ``options`` (a DeprecationWarning).

    Parameters:
        fn: the function's name, for messages.
        options: the function's ``**options``; the old names are removed from it.
        new: the one name, a keyword parameter of the function.
        current: its value as called; ``default``: its default (an old name given beside a set ``new`` is a PlanError).

    Example:
        >>> import warnings
        >>> opts = {"score_column": "s", "model": "m"}
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     take("sem_rank", opts, "column", "sem_rank", "sem_rank"), opts
        ('s', {'model': 'm'})
    """
    for old in [o for o, n in ALIASES.items() if n == new and o in options]:
        if current != default:
            raise PlanError(f"{fn}(): pass {new}= only; {old}= is its old name.")
        current = renamed(fn, {old: options.pop(old)})[new]
    return current
