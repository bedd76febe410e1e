"""Expressions: immutable nodes, the user-facing Expression, and vectorised evaluation."""

from inferframe.expressions.expression import Expression, col, lit, to_node
from inferframe.expressions.nodes import Node

__all__ = ["Expression", "Node", "col", "lit", "to_node"]
