"""The base class of every logical plan node: an immutable node with an output schema and children,
rebuilt with new children by the optimizer, described one line per node by ``explain()``, and
planned into a physical operator (``to_physical``) when it is not one of the built-in nodes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__all__ = ["LogicalPlan"]


class LogicalPlan:
    """Base class: immutable node with a schema and children."""

    def children(self) -> tuple["LogicalPlan", ...]:
        return ()

    def with_children(self, children: tuple["LogicalPlan", ...]) -> "LogicalPlan":
        return self

    @property
    def schema(self) -> pa.Schema:
        return self._schema  # type: ignore[attr-defined]

    def _set_schema(self, schema: pa.Schema) -> None:
        object.__setattr__(self, "_schema", schema)

    def describe(self) -> str:
        return type(self).__name__

    def to_physical(self, inputs: tuple) -> Any:
        """This node's physical operator over its planned ``inputs`` (``plan.physical``), for a node the planner does not know.

        The built-in nodes are planned by ``plan.physical``; an operator defined elsewhere returns,
        e.g., a ``MapBatches`` here and runs on every runner. None: no physical operator.
        """
        return None

    def tree(self, indent: int = 0) -> str:
        pad = "  " * indent
        lines = [f"{pad}* {self.describe()}"]
        for c in self.children():
            lines.append(c.tree(indent + 1))
        return "\n".join(lines)

    def __setstate__(self, state):
        self.__dict__.update(state)
