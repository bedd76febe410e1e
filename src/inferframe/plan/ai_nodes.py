"""Recognise AI calls among expression nodes (the plan's own copy; it only inspects nodes).

Example:
    >>> from inferframe import col
    >>> from inferframe.functions import prompt
    >>> e = prompt(col("q"), model="gemma-3-270m")
    >>> ai_call_of(e._node).udf.name
    'prompt'
    >>> ai_call_of(col("q")._node) is None
    True
"""

from __future__ import annotations

from inferframe.expressions.nodes import Alias, Call, Node, UDFCall
from inferframe.expressions.udf import AISpec


def is_ai_call(node: Node) -> bool:
    """Whether ``node`` itself is a call of an AI function (not one nested inside it).

    Parameters:
        node: any expression node.

    Example:
        >>> from inferframe import col
        >>> from inferframe.functions import prompt
        >>> any(is_ai_call(n) for n in prompt(col("q"), model="gemma-3-270m")._node.walk())
        True
    """
    return isinstance(node, UDFCall) and isinstance(node.udf, AISpec)


def contains_ai(node: Node) -> bool:
    """Whether any node under ``node`` (itself included) is an AI call.

    Parameters:
        node: any expression node.

    Example:
        >>> from inferframe import col
        >>> contains_ai((col("a") + 1)._node)
        False
    """
    return any(is_ai_call(n) for n in node.walk())


def ai_call_of(node: Node) -> UDFCall | None:
    """If ``node`` reads the value of an AI call (``struct.get(call, "value")``, maybe renamed), return that call.

    Parameters:
        node: a projected expression node.

    Example:
        >>> from inferframe import col
        >>> from inferframe.functions import prompt
        >>> ai_call_of(prompt(col("q"), model="gemma-3-270m").alias("a")._node).udf.error_column
        True
    """
    while isinstance(node, Alias):
        node = node.child
    if isinstance(node, Call) and node.function == "struct.get" and dict(node.params).get("field") == "value":
        inner = node.args[0]
        if is_ai_call(inner):
            return inner
    return None
