"""Functions over expressions: ``format``, ``unnest`` and (later) the AI functions.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import format
    >>> df = ifr.from_pydict({"name": ["Ada"]})
    >>> df.select(format("Hello {}!", ifr.col("name")).alias("greeting")).to_pydict()
    {'greeting': ['Hello Ada!']}
"""

from __future__ import annotations

from typing import Any

from inferframe.expressions.expression import Expression, _call, col, lit
from inferframe.functions.ai import classify_text, prompt
from inferframe.functions.embed import embed_image, embed_text
from inferframe.functions.files import decode_image, download, encode_image, file, image, resize_image
from inferframe.functions.similarity import cosine_similarity


def format(template: str, *args: Any) -> Expression:
    """Fill each ``{}`` in ``template`` with the matching argument's value (as text)."""
    holes = template.count("{}")
    if holes != len(args):
        raise ValueError(f"format(): the template has {holes} '{{}}' placeholders but got {len(args)} arguments.")
    if not args:
        return lit(template)
    return _call("format", *args, template=template)


def unnest(expr: Expression) -> Expression:
    """Expand a struct column into one column per field (use inside select())."""
    return expr.unnest()


def concat(*args: Any) -> Expression:
    """Join strings row by row."""
    return _call("str.concat", *args)


def when(predicate: Expression, if_true: Any, if_false: Any) -> Expression:
    """``if_true`` where ``predicate`` holds, else ``if_false``."""
    return predicate.if_else(if_true, if_false)


# Method forms used by the seeds: col("url").download(), col("path").file().
Expression.download = lambda self, **kw: download(self, **kw)  # type: ignore[attr-defined]
Expression.file = lambda self: file(self)  # type: ignore[attr-defined]

__all__ = [
    "classify_text", "col", "concat", "cosine_similarity", "decode_image", "download", "embed_image", "embed_text", "encode_image", "file", "format", "image", "lit", "prompt",
    "resize_image", "unnest", "when",
]
