"""``Annotate``: a pass-through plan node that carries a note for ``explain()`` (e.g. the plan a semantic operator chose).

It changes nothing: its schema is its input's, and it plans to its input's physical operator,
so both runners run the plan exactly as without it.

Example:
    >>> import inferframe as ifr
    >>> node = Annotate(ifr.from_pydict({"a": [1]})._plan, "SemJoin plan=projection est_calls=2")
    >>> print(node.tree())
    * SemJoin plan=projection est_calls=2
      * InMemory rows=1
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inferframe.errors import PlanError
from inferframe.plan.logical import LogicalPlan


@dataclasses.dataclass(frozen=True, eq=False)
class Annotate(LogicalPlan):
    """``input`` unchanged, shown in ``explain()`` as ``note``.

    Parameters:
        input: the plan annotated.
        note: one line, e.g. ``"SemJoin plan=blocking k=7 est_calls=300"``.
    """

    input: LogicalPlan
    note: str

    def __post_init__(self):
        if not isinstance(self.note, str) or not self.note or "\n" in self.note:
            raise PlanError(f"internal: an annotation is one non-empty line, got {self.note!r}.")
        self._set_schema(self.input.schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Annotate(children[0], self.note)

    def describe(self) -> str:
        return self.note

    def to_physical(self, inputs: tuple) -> Any:
        return inputs[0]
