"""One name for each meaning across the public AI functions, SQL and the CLI, and the old names kept one release.

| meaning | the name | old names (deprecated) |
|---|---|---|
| instructions sent with every call | ``system_message`` (CLI ``--system-message``) | ``instructions`` (sem_join); CLI ``--system`` |
| labelled demonstrations | ``examples`` | ``property_examples`` (sem_join) |
| how many examples of each label | ``examples_per_label`` | ``per_label`` (classify_text(method="embedding")) |
| the labels | ``labels`` (CLI ``--labels``); ``prompt(return_format=[...])`` | ``choices`` (prompt); CLI ``--choices`` |
| an embedding model serving another operator | ``embed_model`` | ``proxy_model`` (sem_filter's cascade); ``model`` (classify_text(method="embedding")); ``embed_options={"model": ...}`` |
| that embedding's other options | ``embed_options`` (provider, base_url, dimensions: what a model name cannot carry) | |
| the output column's name | ``column`` | ``score_column``, ``rank_column`` (sem_rank, nearest) |
| what a failed row does | ``on_error`` ("null" or "raise") | SQL ``fail_on_error => true`` |
| an accuracy target | ``target_<metric>``: ``target_accuracy`` (classify), ``target_recall`` / ``target_precision`` (filters, joins) | |
| keep failed rows' errors | ``error_column`` (default True everywhere: a failed row is kept, its error in ``<name>_error``) | |

``model`` names the model whose output the column is: the chat model of ``prompt``, the embedding
model of ``embed_text``/``embed_image``. An embedding model that serves a chat operator (blocking,
a cascade's first stage, nearest examples) is ``embed_model``.

Every old name still works for one release with a ``RenamedOptionWarning`` (a DeprecationWarning) at
the user's line; the old and the new name together is a PlanError. Nothing inside the package uses an
old name: ``tests/test_option_names.py`` scans the source for them.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     opts = renamed("sem_join", {"instructions": "Be strict."})
    >>> opts, seen[0].category.__name__
    ({'system_message': 'Be strict.'}, 'RenamedOptionWarning')
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from inferframe.errors import PlanError, RenamedOptionWarning, warn_user

# Python keyword options: old name -> the one name
ALIASES = MappingProxyType({
    "instructions": "system_message",
    "property_examples": "examples",
    "proxy_model": "embed_model",
    "score_column": "column",
    "rank_column": "column",
    "per_label": "examples_per_label",
    "choices": "return_format",  # prompt(choices=[...]): a list of labels is a return format
})
# CLI flags: the one flag -> its old flag
CLI_ALIASES = MappingProxyType({
    "--system-message": "--system",
    "--labels": "--choices",
})
# SQL named arguments: old name -> the one name (fail_on_error => true is on_error => 'raise')
SQL_ALIASES = MappingProxyType({"fail_on_error": "on_error"})


def _warn(where: str, old: str, new: str) -> None:
    prefix = f"{where}: " if where else ""
    warn_user(f"{prefix}{old} is deprecated and will be removed in the next release; use {new}.", RenamedOptionWarning)


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
        _warn(f"{fn}()", f"{old}=", f"{new}=")
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


def take(fn: str, options: dict, new: str, current: Any, default: Any = None, old: tuple[str, ...] = ()) -> Any:
    """The value of the keyword ``new`` (``current``), or of an old name of it popped from ``options`` (a DeprecationWarning).

    Parameters:
        fn: the function's name, for messages.
        options: the function's ``**options``; the old names are removed from it.
        new: the one name, a keyword parameter of the function.
        current: its value as called; ``default``: its default (an old name given beside a set ``new`` is a PlanError).
        old: old names of ``new`` in this function only, beside ``ALIASES``' (e.g. ``model`` for
            classify_text(method="embedding")'s ``embed_model``).

    Example:
        >>> import warnings
        >>> opts = {"score_column": "s", "model": "m"}
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     take("sem_rank", opts, "column", "sem_rank", "sem_rank"), opts
        ('s', {'model': 'm'})
    """
    for name in [o for o, n in ALIASES.items() if n == new and o in options] + [o for o in old if o in options]:
        if current != default:
            raise PlanError(f"{fn}(): pass {new}= only; {name}= is its old name.")
        _warn(f"{fn}()", f"{name}=", f"{new}=")
        current = options.pop(name)
    return current


def score_and_rank(fn: str, column: str | None, options: dict) -> tuple[str, str]:
    """The names of a search's score and rank columns: ``column`` and ``<column>_rank`` (default ``score``, ``rank``).

    The old ``score_column=``/``rank_column=`` (``options``: the function's ``**options``) still name them, with a
    warning; any other option is a PlanError.

    Example:
        >>> score_and_rank("nearest", None, {}), score_and_rank("nearest", "sim", {})
        (('score', 'rank'), ('sim', 'sim_rank'))
    """
    old = {name: options.pop(name) for name in ("score_column", "rank_column") if name in options}
    if options:
        raise PlanError(f"{fn}() takes no option {', '.join(f'{n}=' for n in sorted(options))}.")
    if old and column is not None:
        raise PlanError(f"{fn}(): pass column= only; {', '.join(f'{n}=' for n in old)} "
                        f"{'is its old name' if len(old) == 1 else 'are its old names'}.")
    for name in old:
        _warn(f"{fn}()", f"{name}=", "column= (the rank goes to <column>_rank)")
    if column is not None:
        return column, f"{column}_rank"
    return old.get("score_column", "score"), old.get("rank_column", "rank")


def embedding_options(fn: str, embed_model: str | None, embed_options: dict | None) -> dict:
    """``embed_text``'s options for an embedding that serves another operator (sem_join's blocking, sem_sim_join).

    ``embed_model`` names the model; ``embed_options`` keeps what a model name cannot carry (provider,
    base_url, dimensions, device, ...). Its old ``"model"`` key still names the model, with a warning.

    Example:
        >>> embedding_options("sem_join", "all-MiniLM-L6-v2", {"device": "cpu"})
        {'device': 'cpu', 'model': 'all-MiniLM-L6-v2'}
    """
    opts = dict(embed_options or {})
    if "model" in opts:
        if embed_model is not None:
            raise PlanError(f"{fn}(): pass embed_model= only; embed_options={{'model': ...}} is its old place.")
        _warn(f"{fn}()", "embed_options={'model': ...}", "embed_model=")
        embed_model = opts.pop("model")
    if embed_model is not None:
        opts["model"] = embed_model
    return opts


def sql_renamed(fn: str, options: dict) -> dict:
    """A SQL call's named options with the old SQL names turned into the one names (a DeprecationWarning each).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     sql_renamed("ai_complete", {"fail_on_error": True, "model": "m"})
        {'model': 'm', 'on_error': 'raise'}
    """
    out = dict(options)
    for old, new in SQL_ALIASES.items():
        if old not in out:
            continue
        if new in out:
            raise PlanError(f"{fn}(): pass {new} => ... only; {old} is its old name.")
        value = out.pop(old)
        if not isinstance(value, bool):
            raise PlanError(f"{fn}(): {old} => {value!r} must be true or false.")
        _warn(f"{fn}()", f"{old} => {str(value).lower()}", f"{new} => 'raise'" if value else "nothing (the default)")
        if value:  # else the call's own default (a refusal that recurs on every row stops the query)
            out[new] = "raise"
    return out


def cli_flag(new: str, value: Any, old_value: Any) -> Any:
    """The value of the CLI flag ``new``, or of its old flag (``CLI_ALIASES``) with a warning; both given is a PlanError.

    Example:
        >>> cli_flag("--labels", "a,b", None)
        'a,b'
    """
    if old_value is None:
        return value
    old = CLI_ALIASES[new]
    if value is not None:
        raise PlanError(f"give {new} only; {old} is its old name.")
    _warn("", old, new)
    return old_value
