"""``WholeTable``: a lazy operator that needs every row of its input at once and asks the model in rounds of its own.

``sem_topk``, ``sem_agg``, ``sem_dedup`` and ``sem_cluster_by`` are such operators, and so are sem_join's
counted checks and its batched asking: their algorithm (a quickselect, a fold, a union-find, the rounds
of split batches) decides its next questions from the last answers, so it runs in rounds of small jobs
rather than as a per-batch stage. The node holds the operator's planner (``op``, an ``Operator`` of
``plan.semantic``: topk, agg, cluster, join's guard and batches), which runs when the job reaches it.
The node keeps it lazy like every other operator: ``explain()`` shows it with the plan and the calls it
expects, and a run computes it first (``plan.semantic.resolve``, bottom up), once.

The node is plain data: it pickles with plain pickle (its planner is plain data too: no closure) and
holds no lock. Its result is kept on the plan that owns it (``kept``): on the node's ``Key``, the one
object its copies share (the optimizer's, the plans built on top of it), so showing and then writing
the result asks the model nothing again and stays the same rows. The result is not part of a pickle,
and no table of the process holds it: another DataFrame (a new plan, or a pickled copy) computes its
own, and the result goes with the last plan holding the node. Whoever runs it (the dataframe layer)
passes a ``Runtime``, which makes one thread compute it while another waits.

Example:
    >>> import inferframe as ifr
    >>> node = ifr.from_pydict({"a": ["x", "y"]}).sem_topk("{a} is big", k=1, model="gemma-3-270m")._plan
    >>> print(node.tree())
    * SemTopK '{a} is big' k=1 plan=auto -> quick est_calls=4
      * InMemory rows=2
    >>> kept(node) is None
    True
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, Protocol

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.plan.logical import LogicalPlan

class Key:
    """The identity of a node that computes once, and the holder of what it computed: shared by its copies.

    Its ``id`` survives a pickle round trip (the copy is equal: the same operator); its ``result`` does
    not (a copy starts with nothing computed).

    Parameters:
        id: the identity (None: a new one).

    Example:
        >>> import pickle
        >>> k = Key()
        >>> k.result = {"stats": {}}
        >>> copy = pickle.loads(pickle.dumps(k))
        >>> copy == k, Key() == k, copy.result
        (True, False, None)
    """

    __slots__ = ("id", "result", "__weakref__")

    def __init__(self, id: str | None = None):
        self.id = id or uuid.uuid4().hex
        self.result: dict | None = None  # what a run computed for the node holding this key; never pickled

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __reduce__(self):
        return Key, (self.id,)

    def __repr__(self) -> str:
        return f"Key({self.id[:8]})"


def kept(node: Any) -> dict | None:
    """What a run computed for ``node`` (a ``WholeTable``: {"table", "stats"}; a ``Planned`` node: {"plan", "line"}),
    or None before its run. It is kept on the node's ``Key``, shared by the node's copies in this plan.

    Example:
        >>> import inferframe as ifr
        >>> node = ifr.from_pydict({"a": ["x"]}).sem_topk("{a} is big", k=1, model="gemma-3-270m")._plan
        >>> kept(node) is None
        True
    """
    return node.key.result


def keep(node: Any, **values: Any) -> dict:
    """Keep ``values`` as ``node``'s computed result, on its ``Key``; returns them.

    Example:
        >>> import inferframe as ifr
        >>> node = ifr.from_pydict({"a": ["x"]}).sem_topk("{a} is big", k=1, model="gemma-3-270m")._plan
        >>> keep(node, stats={"calls": 0})["stats"], kept(node) is not None
        ({'calls': 0}, True)
    """
    node.key.result = dict(values)
    return node.key.result


class Runtime(Protocol):
    """What resolving a plan needs from the layer that runs jobs (the dataframe layer passes one in).

    ``table(plan)``: the plan's rows, run as one job (resolved as any run is). ``count(plan)``: its rows
    (from metadata where possible). ``once(key, make)``: call ``make()`` holding the key's lock (one
    computation per key).
    """

    def table(self, plan: LogicalPlan) -> pa.Table: ...

    def count(self, plan: LogicalPlan) -> int: ...

    def once(self, key: Key, make: Callable[[], None]) -> None: ...


class Operator(Protocol):
    """A whole-table operator's planner (``plan.semantic.topk``/``agg``/``cluster``, ``join.guard``/``join.batches``):
    plain data that pickles.

    ``note``: one line naming it (``'SemTopK "{review} is best" k=10 plan=auto'``). ``run(runtime, input)``: its (table, stats) over its resolved input plan, the input collected and its
    rounds asked through ``runtime``. ``calls(rows)``: the expected calls in words (rows None: unknown
    before the run). ``line(input, stats)``: explain()'s line, with the plan chosen for the input's rows
    where they are known without reading data (or the one that ran, ``stats`` after the run) and its estimate.
    """

    note: str

    def run(self, runtime: "Runtime", input: LogicalPlan) -> "tuple[pa.Table, dict]": ...

    def calls(self, rows: int | None) -> str: ...

    def line(self, input: LogicalPlan, stats: dict | None) -> str: ...


class Planned(LogicalPlan):
    """A node whose physical plan is chosen when the job runs (sem_join): ``choose(runtime)`` gathers the statistics
    and returns ``{"plan": the chosen logical plan, "line": explain()'s line}``; ``key`` is its identity."""

    key: Key

    def choose(self, runtime: "Runtime") -> dict:
        raise NotImplementedError

    def estimate(self) -> dict:
        """Before the run: {"call": its label, "calls", "input_tokens", "cost_usd" (None where unknown), "note"}."""
        return {"call": self.describe(), "calls": None, "input_tokens": None, "cost_usd": None, "note": ""}


@dataclasses.dataclass(frozen=True, eq=False)
class WholeTable(LogicalPlan):
    """The rows ``op`` makes of all of ``input``'s rows, computed once when a plan above it first runs.

    Parameters:
        input: the plan whose rows the operator reads.
        out_schema: the result's columns (known before the run).
        op: the operator's planner (an ``Operator``: sem_topk's, sem_agg's, sem_dedup's, sem_join's guard or
            batches), run in this layer through the ``Runtime`` it is given.
        key: the node's identity for its kept result; shared by the copies the optimizer makes.
    """

    input: LogicalPlan
    out_schema: pa.Schema
    op: Operator = dataclasses.field(repr=False)
    key: Key = dataclasses.field(default_factory=Key, repr=False)

    def __post_init__(self):
        note = getattr(self.op, "note", None)
        if not isinstance(note, str) or not note or "\n" in note:
            raise PlanError(f"internal: a whole-table operator's note is one non-empty line, got {note!r}.")
        self._set_schema(self.out_schema)

    @property
    def note(self) -> str:
        """One line naming the operator, e.g. ``'SemTopK "{review} is best" k=10 plan=auto'``."""
        return self.op.note

    def calls(self, rows: int | None) -> str:
        """The expected model calls for ``rows`` input rows (None: unknown before the run), in words."""
        return self.op.calls(rows)

    def run(self, runtime: "Runtime", input: LogicalPlan) -> "tuple[pa.Table, dict]":
        """Its (result table, stats) over its resolved ``input``: the operator's planner, through ``runtime``."""
        return self.op.run(runtime, input)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return dataclasses.replace(self, input=children[0])

    def describe(self) -> str:
        done = kept(self)
        return self.op.line(self.input, None if done is None else done["stats"]) + (" (computed)" if done else "")

    @property
    def computed(self) -> bool:
        """Whether a run has computed it (its rows are kept on it: reading them asks the model nothing)."""
        return kept(self) is not None

    @property
    def stats(self) -> dict | None:
        """What the operator asked in its run (``sem_stats``); None before it ran."""
        return (kept(self) or {}).get("stats")

    def to_physical(self, inputs: tuple) -> Any:
        raise PlanError(f"internal: {self.note} reached the physical planner uncomputed; run the plan through "
                        "plan.semantic.resolve first.")
