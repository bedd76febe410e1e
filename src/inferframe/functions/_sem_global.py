"""What the whole-table semantic operators' API builders (``sem_topk``, ``sem_agg``, ``sem_dedup``) share.

Each checks its arguments, builds its AI steps and wraps its planner (``plan.semantic``: topk, agg,
cluster) in a lazy ``WholeTable`` node (``operator``); the planner asks the model, in rounds
(``plan.semantic.rounds``: this layer runs no round).

Example:
    >>> from inferframe.functions.templates import parse_template
    >>> t = parse_template("{name} and {city} are the same business", "sem_dedup")
    >>> criterion(t), document(t, {"name": "Joes", "city": "Leeds"})
    ('name and city are the same business', 'name: Joes; city: Leeds')
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.nodes import column_not_found
from inferframe.functions._input_types import check_input
from inferframe.functions.templates import Field, Template
from inferframe.plan.semantic import rounds
from inferframe.plan.whole_table import Operator, WholeTable

__all__ = ["check_columns", "criterion", "document", "model_name", "operator", "sealed"]


def check_columns(df: Any, t: Template, fn: str, extra: tuple = ()) -> None:
    """A column the template reads (or in ``extra``) that ``df`` lacks, or one it reads that is not text, is a PlanError, before anything runs."""
    missing = [c for c in [*t.columns(), *extra] if c not in df.column_names]
    if missing:
        found = column_not_found(missing[0], df.schema().to_arrow())  # its "Did you mean" and the columns
        raise PlanError(f"{fn}(): the DataFrame has no column {missing[0]!r}; name one of its columns in the "
                        f"template. {found}")
    schema = df.schema().to_arrow()
    for name in t.columns():  # the one input rule of AI functions: a {field} reads text
        check_input(fn, schema.field(name), template=True)


def operator(df: Any, schema: pa.Schema, op: Operator) -> Any:
    """A lazy DataFrame (of ``df``'s class) of the rows ``op`` (a planner of ``plan.semantic``) makes of all of ``df``'s rows."""
    return type(df)(WholeTable(df._plan, schema, op))


def sealed(options: dict) -> dict:
    """``options`` with an ``api_key`` turned into a provider spec holding only its handle: the key never enters a plan's pickle.

    The operators' rounds capture their options in the plan; a key among them would travel in clear.

    Example:
        >>> out = sealed({"provider": "openai", "api_key": "sk-secret", "model": "gpt-5-mini"})
        >>> "api_key" in out, "sk-secret" in repr(out), out["provider"].key_ref is not None
        (False, False, True)
    """
    if not isinstance(options.get("api_key"), str):
        return options
    from inferframe.providers.registry import resolve
    from inferframe.session import current

    out = dict(options)
    out["provider"] = resolve(out.get("provider"), default=current().provider, model=out.get("model"),
                              api_key=out.pop("api_key"))
    return out


def model_name(options: dict) -> str:
    """The model an operator's calls use, for the quality guard's message (the embedded model when none is named)."""
    return str(options.get("model") or "gemma-3-270m")


def criterion(t: Template) -> str:
    """The template with every field written as its column's name: ``"review is the most enthusiastic"``."""
    return "".join(p.column if isinstance(p, Field) else p for p in t.parts).strip()


def document(t: Template, row: dict) -> str:
    """One row's values of the template's columns: the value alone for one column, ``"a: ...; b: ..."`` for several."""
    return rounds.document(tuple(t.columns()), row)
