"""General functions over expressions: ``format``, ``concat``, ``when`` and ``unnest``.

Example:
    >>> from inferframe.dataframe import from_pydict
    >>> from inferframe.expressions import col
    >>> df = from_pydict({"name": ["Ada", "Bo"], "n": [3, 1]})
    >>> df.select(format("Hello {}!", col("name")).alias("greeting"),
    ...           when(col("n") > 2, "many", "few").alias("size")).to_pydict()
    {'greeting': ['Hello Ada!', 'Hello Bo!'], 'size': ['many', 'few']}
"""

from __future__ import annotations

from typing import Any

from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, call_expression, col, lit
from inferframe.functions.files import download, file

__all__ = ["concat", "format", "unnest", "when"]


def format(template: str, *args: Any) -> Expression:
    """Fill each ``{}`` in ``template`` with the matching argument's value (as text)."""
    holes = template.count("{}")
    if holes != len(args):
        raise PlanError(f"format(): the template has {holes} '{{}}' placeholders but got {len(args)} arguments; "
                        "give one argument per '{}'.")
    if not args:
        return lit(template)
    return call_expression("format", *args, template=template)


def unnest(expr: Expression) -> Expression:
    """Expand a struct column into one column per field (use inside select())."""
    return expr.unnest()


def concat(*args: Any) -> Expression:
    """Join strings row by row."""
    return call_expression("str.concat", *args)


def when(predicate: Expression, if_true: Any, if_false: Any) -> Expression:
    """``if_true`` where ``predicate`` holds, else ``if_false``."""
    return predicate.if_else(if_true, if_false)


# Method forms used by the seeds: col("url").download(), col("path").file().
Expression.download = lambda self, **kw: download(self, **kw)  # type: ignore[attr-defined]
Expression.file = lambda self: file(self)  # type: ignore[attr-defined]
