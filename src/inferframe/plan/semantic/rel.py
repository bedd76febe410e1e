"""``Rel``: the few DataFrame-like steps a semantic planner composes, over logical plan nodes (no DataFrame here).

Example:
    >>> import pyarrow as pa
    >>> from inferframe.expressions.expression import col, lit
    >>> from inferframe.plan.logical import InMemory, Source
    >>> t = pa.table({"a": [1, 2]})
    >>> r = Rel(Source(InMemory(t), t.schema)).with_column("b", col("a") + lit(1)).where(col("a") > lit(1))
    >>> r.names
    ['a', 'b']
"""

from __future__ import annotations

import dataclasses

from inferframe.expressions.expression import Expression
from inferframe.expressions.nodes import Alias, Col
from inferframe.plan import logical as lp
from inferframe.plan.ai_stages import project_nodes


@dataclasses.dataclass(frozen=True)
class Rel:
    """A logical plan with ``with_column``, ``select``, ``exclude``, ``where``, ``join``, ``explode`` and ``nearest``."""

    plan: lp.LogicalPlan

    @property
    def names(self) -> list[str]:
        return list(self.plan.schema.names)

    def with_column(self, name: str, expr: Expression) -> "Rel":
        nodes = [Col(n) for n in self.names if n != name] + [Alias(expr._node, name)]
        return Rel(project_nodes(self.plan, nodes))

    def select(self, *names: str) -> "Rel":
        return Rel(lp.Project(self.plan, tuple(Col(n) for n in names)))

    def exclude(self, *names: str) -> "Rel":
        return self.select(*(n for n in self.names if n not in names))

    def where(self, predicate: Expression) -> "Rel":
        return Rel(lp.Filter(self.plan, predicate._node))

    def join(self, other: "Rel", on: str, prefix: str) -> "Rel":
        return Rel(lp.Join(self.plan, other.plan, (on,), (on,), "inner", prefix))

    def explode(self, name: str) -> "Rel":
        return Rel(lp.Explode(self.plan, (name,)))

    def nearest(self, other: "Rel", on: str, other_on: str, k: int, score: str, rank: str, prefix: str) -> "Rel":
        return Rel(lp.Nearest(self.plan, other.plan, on, other_on, k, "cosine", score, rank, prefix))
