"""``SemJoin``: sem_join as a logical plan node, and its planner (estimates, plan choice); ``join_plans`` builds
the chosen plan and draws the k sample.

Calling ``sem_join`` builds this node and reads nothing. When a job reaches it, ``choose`` gathers what
the choice needs through the ``Runtime`` the dataframe layer passes in (each side's rows, their first
rows for the token estimate, the k sample's pair checks, a proposed property) and returns the chosen
plan, built from ordinary logical nodes (``Rel``) and the AI steps the node was given (``Steps``,
built by ``functions.sem_join``: this layer builds no AI call). Before a run, ``describe`` (what
``explain()`` shows) estimates from what is known without reading data: an in-memory side's rows,
else "?" until the run.

| plan | what runs | model calls |
|---|---|---|
| ``projection`` | each side's property once per row, then a hash join on it | rows(left) + rows(right) |
| ``blocking`` | embeddings, the ``k`` nearest right rows per left row, a yes/no check per candidate | sample + rows(left) * k |
| ``nested`` | every pair, a yes/no check each | rows(left) * rows(right) |
| ``batched`` | every pair, ``pairs_per_request`` right rows per request | rows(left) * ceil(rows(right) / pairs_per_request) |
| ``blocking_batched`` | blocking's ``k`` candidates per left row, asked as in ``batched`` | sample + rows(left) * ceil(k / pairs_per_request) |

Example:
    >>> _fmt(_estimate(None, {"tokens": None, "cost": None}))
    'est_calls=? est_tokens=? est_cost=?'
    >>> _choose({"nested": _estimate(16, _FREE), "batched": _estimate(4, _FREE)}, {})
    'batched'
"""

from __future__ import annotations

from types import MappingProxyType
import dataclasses
import math
from typing import Any, Protocol

import pyarrow as pa

from inferframe.ai.join_properties import Split
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression
from inferframe.expressions.nodes import Col
from inferframe.plan import logical as lp
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.plan.inspect import cheap_total
from inferframe.plan.semantic.join_plans import DEFAULT_K, build_plan, choose_k
from inferframe.plan.whole_table import Key, Planned, Runtime, kept

PLANS = ("auto", "projection", "blocking", "nested", "batched", "blocking_batched")
_FREE = MappingProxyType({"tokens": 0, "cost": 0.0})
_PEEK = 8  # rows of each side the token estimate reads


class Steps(Protocol):
    """The AI steps of a join, built by ``functions.sem_join`` (plain data: it pickles with the plan).

    ``check``: the yes/no pair check over left's and right's output columns. ``batch``: the batched check's
    raw answer (for estimates). ``prop(side, property, values)``: a side's property answer (raw, error column
    kept); ``key(values)``: the join key made of column ``KEY``'s answer. ``embed(side)``: a side's text
    embedded. ``guard(plan, value, keep, what, shared)``: the checks' failures counted (a ``WholeTable``).
    ``batches(left, right, k, per_request)``: the batched asking over left (a ``WholeTable``: left's columns
    and ``RROW``). ``proposal()``: a one-row plan whose ``a`` column is the proposed split;
    ``read_proposal(table)``: that answer as a ``Split`` or None.
    """

    check: Expression
    batch: Expression
    model: str

    def prop(self, side: str, prop: str, values: list | None) -> Expression: ...

    def key(self, values: list | None) -> Expression: ...

    def embed(self, side: str) -> Expression: ...

    def guard(self, plan: lp.LogicalPlan, value: str, keep: list, what: str, shared: dict | None) -> lp.LogicalPlan: ...

    def batches(self, left: lp.LogicalPlan, right: lp.LogicalPlan, k: int | None, per_request: int) -> lp.LogicalPlan: ...

    def proposal(self) -> lp.LogicalPlan: ...

    def read_proposal(self, table: pa.Table) -> Split | None: ...


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
        return _line(self, _Known(self))[1]

    def estimate(self) -> dict:
        """What ``df.estimate()`` lists before the run: the plan chosen from what is known, its calls, tokens and cost
        (None where unknown) and explain()'s line."""
        chosen, line, estimates = _line(self, _Known(self), with_estimates=True)
        e = estimates.get(chosen) or {"calls": None, "tokens": None, "cost": None}
        return {"call": "SemJoin" + (f" plan={chosen}" if chosen else ""), "calls": e["calls"],
                "input_tokens": e["tokens"], "cost_usd": e["cost"], "note": line.removeprefix("SemJoin ")}

    def choose(self, runtime: Runtime) -> dict:
        """The chosen plan ({"plan": logical plan, "line": explain()'s line}), its statistics gathered by ``runtime``."""
        node = self
        if self.spec.propose:
            found = split_condition(self.steps.read_proposal(runtime.table(self.steps.proposal())), self.spec.property_values,
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
        chosen, line = _line(node, stats)
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


# --- estimates and choice ---------------------------------------------------------------------------------------
def _line(node: SemJoin, stats: _Known, with_estimates: bool = False) -> tuple:
    """The plan chosen with ``stats`` (None: chosen when the job runs) and explain()'s ``SemJoin ...`` line (and each
    plan's estimate, ``with_estimates``)."""
    s, steps = node.spec, node.steps
    n_left, n_right = stats.n_left, stats.n_right
    known = n_left is not None and n_right is not None
    lrows, rrows = stats.rows("left"), stats.rows("right")
    per_check = _per_call(steps.check, _pair_rows(s, lrows, rrows))
    estimates: dict[str, dict] = {}
    if s.on_property is not None:
        per_prop = _per_call(steps.prop("left", s.on_property, _list(s.property_values)), _side_rows(s, lrows))
        estimates["projection"] = _estimate(_sum(n_left, n_right), per_prop)
    k_est = s.k or (None if n_right is None else min(n_right, DEFAULT_K))
    sampled = 0 if s.k else (None if n_left is None else min(s.sample_size, n_left))
    estimates["blocking"] = _estimate(_blocking_calls(sampled, n_left, n_right, k_est), per_check)
    estimates["nested"] = _estimate(_mul(n_left, n_right), per_check)
    per_batch = _per_call(steps.batch, _batch_rows(s, lrows, rrows))
    estimates["batched"] = _estimate(_mul(n_left, None if n_right is None else
                                          math.ceil(n_right / s.pairs_per_request)), per_batch)
    blocking_batched = lambda k_: _add(_estimate(_mul(sampled, n_right), per_check),  # noqa: E731
                                       _estimate(_mul(n_left, None if k_ is None else
                                                      math.ceil(k_ / s.pairs_per_request)), per_batch))
    estimates["blocking_batched"] = blocking_batched(k_est)
    skipped = _not_considered(estimates, _mul(n_left, n_right), s.max_nested_pairs)
    if s.propose:
        chosen = None
    elif s.plan != "auto":
        chosen = s.plan
    else:
        chosen = _choose(estimates, skipped) if known else None
    note = f" on_property={s.detected} ({s.how})" if s.detected else ""
    fitted = f" pairs_per_request={s.pairs_per_request}" + (
        f" (of {s.asked_pairs}: what max_tokens={s.max_tokens} holds)" if s.pairs_per_request != s.asked_pairs else "")
    if chosen in ("batched", "blocking_batched"):
        note += fitted
    if chosen in ("blocking", "blocking_batched"):
        if s.k:
            note += f" k={s.k}"
        else:
            found = stats.sample_k()
            if found is None:
                note += f" k=? (chosen on a sample of {s.sample_size} left rows when the job runs)"
            else:
                k, recall = found
                estimates["blocking"] = _estimate(_blocking_calls(sampled, n_left, n_right, k), per_check)
                estimates["blocking_batched"] = blocking_batched(k)
                note += f" k={k} (sample of {sampled} left rows: recall {recall:.2f}, target {s.target_recall})"
    if chosen is None:
        why = (f"the compared property is proposed by {steps.model} when the job runs" if s.propose else
               "rows unknown before the run")
        line = f"SemJoin plan=auto (chosen when the job runs: {why})"
        others = estimates.items()
    else:
        line = f"SemJoin plan={chosen}{note} {_fmt(estimates[chosen])}"
        if s.plan != "auto":
            line += f" (plan={s.plan!r} given)"
        others = [(n, e) for n, e in estimates.items() if n != chosen]
    shown = [f"{name}: {_fmt(e)}" + (f" (not considered: {skipped[name]})" if name in skipped else "")
             for name, e in others]
    if shown:
        line += " | " + " | ".join(shown)
    return (chosen, line, estimates) if with_estimates else (chosen, line)


def _list(values) -> list | None:
    return None if values is None else list(values)


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _mul(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b


def _blocking_calls(sampled, n_left, n_right, k) -> int | None:
    if None in (sampled, n_left, n_right, k):
        return None
    return sampled * n_right + (n_left - sampled) * k


def _pair_rows(s: JoinSpec, a: list[dict] | None, b: list[dict] | None) -> list[tuple]:
    """The message parts of up to 8 pairs (first rows of each side), for estimating a check's tokens."""
    if not a or not b:
        return []
    return [tuple(p if isinstance(p, str) else (x if p[0] == "left" else b[i % len(b)])[p[1]] for p in s.pair_parts)
            for i, x in enumerate(a)]


def _side_value(s: JoinSpec, row: dict) -> str:
    """The right side's message as text (as ``side_message`` writes it)."""
    names = s.right_columns
    if len(names) == 1:
        return str(row[names[0]])
    return "\n".join(f"{c}: {row[c]}" for c in names)


def _batch_rows(s: JoinSpec, a: list[dict] | None, b: list[dict] | None) -> list[tuple]:
    """The batched check's message parts for up to 8 left rows, each with right's first chunk."""
    if not a or not b:
        return []
    numbered = "\n".join(f"{i + 1}. {_side_value(s, r)}" for i, r in enumerate(b[:s.pairs_per_request]))
    return [tuple(p if isinstance(p, str) else (numbered if p[0] == "candidates" else r[p[1]]) for p in s.batch_parts)
            for r in a]


def _side_rows(s: JoinSpec, rows: list[dict] | None) -> list[tuple]:
    out = []
    names = s.left_columns
    for r in rows or []:
        if len(names) == 1:
            out.append((r[names[0]],))
        else:
            parts: list = []
            for i, c in enumerate(names):
                parts += [("\n" if i else "") + f"{c}: ", r[c]]
            out.append(tuple(parts))
    return out


def _per_call(expr: Expression, rows: list[tuple]) -> dict:
    """Input tokens and dollars of one call of ``expr``'s AI call, averaged over ``rows`` (None where unknown)."""
    from inferframe.ai.requests import estimate_call

    node = expr._node
    while ai_call_of(node) is None and node.children():  # e.g. the short answer's .str.lower(): its first argument
        node = node.children()[0]
    priced = ai_call_of(node).udf.call.priced()
    if not rows or not priced:
        return {"tokens": 0 if not priced else None, "cost": 0.0 if not priced else None}
    est = estimate_call(priced[0][0], rows)
    n = est.get("rows") or len(rows)
    cost = est.get("cost_usd")
    return {"tokens": (est.get("input_tokens") or 0) / n, "cost": None if cost is None else cost / n}


def _estimate(calls: int | None, per: dict) -> dict:
    tokens = None if per["tokens"] is None or calls is None else round(calls * per["tokens"])
    cost = None if per["cost"] is None or calls is None else calls * per["cost"]
    return {"calls": calls, "tokens": tokens, "cost": cost}


def _add(a: dict, b: dict) -> dict:
    return {key: None if a[key] is None or b[key] is None else a[key] + b[key] for key in a}


def _fmt(e: dict) -> str:
    calls = "?" if e["calls"] is None else str(e["calls"])
    tokens = "?" if e["tokens"] is None else str(e["tokens"])
    cost = "?" if e["cost"] is None else f"${e['cost']:.4f}"
    return f"est_calls={calls} est_tokens={tokens} est_cost={cost}"


def _not_considered(estimates: dict, pairs: int | None, max_nested_pairs: int) -> dict[str, str]:
    """The plans "auto" leaves out, each with the reason explain() shows.

    The all-pairs plans only within ``max_nested_pairs``; the batched ones only where there is no
    property to project on: asking one property per row gives a consistent labelling, and a
    numbered-list answer asks more of a model.
    """
    out = {}
    for name in estimates:
        if name in ("nested", "batched") and pairs is not None and pairs > max_nested_pairs:
            out[name] = f"{pairs} pairs > max_nested_pairs={max_nested_pairs}"
        elif "batched" in name and "projection" in estimates:
            out[name] = "a property to project on"
    return out


def _choose(estimates: dict, skipped: dict) -> str:
    """The cheapest plan not ``skipped``: by dollars where every price is known and some is not zero, else by calls
    (ties: the earlier of projection, nested, batched, blocking, blocking_batched)."""
    names = [n for n in ("projection", "nested", "batched", "blocking", "blocking_batched")
             if n in estimates and n not in skipped]
    costs = [estimates[n]["cost"] for n in names]
    if all(c is not None for c in costs) and any(costs):
        return min(names, key=lambda n: estimates[n]["cost"])
    return min(names, key=lambda n: estimates[n]["calls"])


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
