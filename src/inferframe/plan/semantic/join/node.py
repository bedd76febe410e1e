"""``SemJoin``: sem_join as a logical plan node; when a job reaches it, the statistics its choice needs.

Calling ``sem_join`` builds this node and reads nothing. When a job reaches it, ``choose`` gathers what
the choice needs through the ``Runtime`` the dataframe layer passes in (each side's rows, their first
rows for the token estimate, the k sample's pair checks, a proposed property), chooses by the
estimates (``estimate``) and returns the chosen plan (``plans``), built from ordinary logical nodes
and the AI steps the node was given (``Steps``, built by ``functions.sem_join``: this layer builds no
AI call). Before a run, ``describe`` (what ``explain()`` shows) estimates from what is known without
reading data: an in-memory side's rows, else "?" until the run.

Example:
    >>> import pyarrow as pa
    >>> found = read_proposal(pa.table({"a": [{"property": " Sentiment", "comparison": "equal"}]}))
    >>> found.property, found.relation
    ('sentiment', 'equal')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import pyarrow as pa

from inferframe.ai.join_properties import Split
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression
from inferframe.expressions.nodes import Col
from inferframe.plan import logical as lp
from inferframe.plan.inspect import cheap_total
from inferframe.plan.semantic.join.estimate import line_of
from inferframe.plan.semantic.join.plans import build_plan, choose_k
from inferframe.plan.semantic.rel import Rel
from inferframe.plan.semantic.rounds import in_memory
from inferframe.plan.whole_table import Key, Planned, Runtime, kept

PLANS = ("auto", "projection", "blocking", "nested", "batched", "blocking_batched")
_PEEK = 8  # rows of each side the token estimate reads


class Steps(Protocol):
    """The AI steps of a join, built by ``functions.sem_join`` (plain data: the template and the options; it pickles
    with the plan). Each method builds an AI expression; the planner here decides which to ask, and when.

    ``check``: the yes/no pair check over left's and right's output columns. ``batch``: the batched check's
    raw answer (for estimates). ``model``: the model's name. ``prop(side, property, values)``: a side's property
    answer (raw, error column kept); ``key(values)``: the join key made of column ``KEY``'s answer.
    ``embed(side)``: a side's text embedded. ``round_check(size)``: the batched check's raw answer for a
    request of ``size`` numbered candidates (column ``CANDIDATES``, left's template columns), its errors kept
    (``on_error="null"``: a cut-off answer is split, not raised); ``raise_first``: the user's
    ``on_error="raise"``. ``proposal()``: the proposing call over column ``q``; ``statement``: the predicate
    with its sides written A and B.
    """

    check: Expression
    batch: Expression
    model: str
    raise_first: bool
    statement: str

    def prop(self, side: str, prop: str, values: list | None) -> Expression: ...

    def key(self, values: list | None) -> Expression: ...

    def embed(self, side: str) -> Expression: ...

    def round_check(self, size: int) -> Expression: ...

    def proposal(self) -> Expression: ...


@dataclasses.dataclass(frozen=True)
class JoinSpec:
    """What the user asked of a join, checked (``functions.sem_join``), and what the message parts are.

    ``pair_parts``/``batch_parts``: the check's and the batched check's message, each part a string or
    (side, column) (``("candidates", None)``: the numbered candidates). ``propose``: ask the model for the
    compared property when the job runs (no rule found one). ``detected``/``how``: the property a rule (or
    the model) found, for explain(). ``asked_pairs``/``max_tokens``: the pairs per request asked, and the
    output cap that lowered them to ``pairs_per_request``.
    """

    predicate: str
    on_property: str | None
    property_values: tuple | None
    relation: str
    plan: str
    k: int | None
    target_recall: float
    sample_size: int
    max_nested_pairs: int
    prefix: str
    seed: int
    pairs_per_request: int
    asked_pairs: int
    max_tokens: int | None
    pair_parts: tuple
    batch_parts: tuple
    left_columns: tuple
    right_columns: tuple
    right_names: tuple
    detected: str | None = None
    how: str = "detected"
    propose: bool = False


@dataclasses.dataclass(frozen=True, eq=False)
class SemJoin(Planned):
    """The pairs of ``left`` and ``right`` rows for which the model says the predicate holds; planned when run.

    Parameters:
        left, right: the sides' plans.
        spec: the join's arguments (``JoinSpec``).
        steps: its AI steps (``Steps``).
        key: its identity for the kept choice (``whole_table.kept``).
    """

    left: lp.LogicalPlan
    right: lp.LogicalPlan
    spec: JoinSpec
    steps: Any = dataclasses.field(repr=False)
    key: Key = dataclasses.field(default_factory=Key, repr=False)

    def __post_init__(self):
        names = [*self.left.schema.names, *self.spec.right_names]
        types = [*self.left.schema.types, *self.right.schema.types]
        self._set_schema(pa.schema([pa.field(n, t) for n, t in zip(names, types)]))

    def children(self):
        return (self.left, self.right)

    def with_children(self, children):
        return dataclasses.replace(self, left=children[0], right=children[1])

    def describe(self) -> str:
        done = kept(self)
        if done is not None:
            return done["line"]
        return line_of(self, _Known(self))[1]

    def estimate(self) -> dict:
        """What ``df.estimate()`` lists before the run: the plan chosen from what is known, its calls, tokens and cost
        (None where unknown) and explain()'s line."""
        chosen, line, estimates = line_of(self, _Known(self), with_estimates=True)
        e = estimates.get(chosen) or {"calls": None, "tokens": None, "cost": None}
        return {"call": "SemJoin" + (f" plan={chosen}" if chosen else ""), "calls": e["calls"],
                "input_tokens": e["tokens"], "cost_usd": e["cost"], "note": line.removeprefix("SemJoin ")}

    def choose(self, runtime: Runtime) -> dict:
        """The chosen plan ({"plan": logical plan, "line": explain()'s line}), its statistics gathered by ``runtime``."""
        node = self
        if self.spec.propose:
            found = split_condition(read_proposal(runtime.table(proposal_plan(self.steps))), self.spec.property_values,
                                    self.spec.relation)
            spec = dataclasses.replace(self.spec, propose=False)
            if found is not None:
                prop, values, relation = found
                spec = dataclasses.replace(spec, on_property=prop, property_values=None if values is None else
                                           tuple(values), relation=relation, detected=prop,
                                           how=f"proposed by {self.steps.model}")
            elif spec.plan == "projection":
                raise PlanError(f"sem_join(plan='projection'): {self.steps.model} named no property that "
                                f"{self.spec.predicate!r} compares; pass on_property=..., e.g. on_property='sentiment'.")
            node = dataclasses.replace(self, spec=spec, key=self.key)
        stats = _Run(node, runtime)
        chosen, line = line_of(node, stats)
        return {"plan": build_plan(node, chosen, stats.k_chosen), "line": line}

    def to_physical(self, inputs: tuple) -> Any:
        raise PlanError("internal: SemJoin reached the physical planner unplanned; run the plan through "
                        "plan.semantic.resolve first.")


# --- statistics: known before the run (cheap), or gathered by it --------------------------------------------------
class _Known:
    """What explain() knows before any run: an in-memory side's rows; no sample (k unknown)."""

    def __init__(self, node: SemJoin):
        self.node, self.k_chosen = node, None
        self.n_left, self.n_right = cheap_total(node.left), cheap_total(node.right)

    def rows(self, side: str) -> list[dict] | None:
        plan = self.node.left if side == "left" else self.node.right
        while isinstance(plan, lp.Project) and all(isinstance(e, Col) for e in plan.exprs):
            plan = plan.input
        if isinstance(plan, lp.Source) and isinstance(plan.source, lp.InMemory) and plan.filter is None:
            names = (self.node.left if side == "left" else self.node.right).schema.names
            return plan.source.table.slice(0, _PEEK).select(list(names)).to_pylist()
        return None

    def sample_k(self) -> tuple[int, float] | None:
        return None


class _Run(_Known):
    """What the run gathers: each side's rows counted, their first rows read, the k sample's checks asked."""

    def __init__(self, node: SemJoin, runtime: Runtime):
        self.node, self.runtime, self.k_chosen = node, runtime, None
        self.n_left, self.n_right = runtime.count(node.left), runtime.count(node.right)

    def rows(self, side: str) -> list[dict]:
        return self.runtime.table(lp.Limit(self.node.left if side == "left" else self.node.right, _PEEK)).to_pylist()

    def sample_k(self) -> tuple[int, float]:
        self.k_chosen, recall = choose_k(self.node, self.runtime, self.n_right)
        return self.k_chosen, recall


def split_condition(found: Split | None, values, relation: str) -> tuple[str, list | None, str] | None:
    """(on_property, property_values, relation) for the projection plan where the predicate compares a property.

    "equal" keeps the user's ``relation`` "equal"; "different" needs values (the user's or the phrase's);
    "opposite" is "different" between exactly two values.

    Example:
        >>> split_condition(Split("sentiment", "opposite", ()), ["positive", "negative"], "equal")
        ('sentiment', ['positive', 'negative'], 'different')
    """
    if found is None:
        return None
    values = list(values) if values is not None else (list(found.values) if found.values else None)
    if found.relation == "equal":
        return (found.asked, values, "equal") if relation == "equal" else None
    if values is None or (found.relation == "opposite" and len(values) != 2):
        return None
    return found.asked, values, "different"


def proposal_plan(steps: Steps) -> lp.LogicalPlan:
    """A one-row plan whose column ``a`` is the model's proposed split of the statement."""
    q = pa.table({"q": pa.array([f"Statement: {steps.statement}"], pa.string())})
    return Rel(in_memory(q)).with_column("a", steps.proposal()).select("a").plan


def read_proposal(table: pa.Table) -> Split | None:
    """The proposal's answer as a ``Split`` (None: no property, a failed call, or more than four words)."""
    answer = table.column("a").to_pylist()[0] if table.num_rows else None
    if not answer or answer.get("comparison") not in ("equal", "different", "opposite"):
        return None
    prop = " ".join(str(answer.get("property") or "").lower().split())
    if not prop or len(prop.split()) > 4:
        return None
    return Split(prop, answer["comparison"])
