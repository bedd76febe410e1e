"""``JoinSteps``: the AI steps a ``SemJoin`` node is planned with (``plan.semantic.join.Steps``), built when sem_join() is called.

The planner in ``plan/`` builds no AI call: it asks these steps for the pair check, a side's property,
the embeddings, the failure guard and the batched asking. Building them reads no data and sends no
request; the batched asking reads the right side when its job runs. The steps are plain data (the
template, the options): they pickle with the plan.

Example:
    >>> from inferframe.functions.templates import parse_template
    >>> t = parse_template("{r:left} and {r:right} agree", "sem_join", sides=True)
    >>> steps = JoinSteps(t, {"r:left": "r", "r:right": "right.r"}, {"model": "gemma-3-270m"}, None, {}, {}, 8, ("r",),
    ...                   ("right.r",))
    >>> steps.model
    'gemma-3-270m'
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.ai.join_properties import Split
from inferframe.expressions.expression import Expression, col
from inferframe.functions.embed import embed_text
from inferframe.functions.general import concat
from inferframe.functions.sem_join import (PROPOSE_INSTRUCTIONS, CLASSIFY_ONLY, PROPOSAL_SCHEMA, batch_check, pair_check,
                                           property_key, side_message, side_property)
from inferframe.functions.sem_join_batches import ask_in_batches, expected_calls
from inferframe.functions.sem_join_guard import guarded_plan
from inferframe.functions.templates import Template
from inferframe.plan import logical as lp
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.plan.semantic.join_plans import CANDIDATES, KEY, LVEC, RANK, ROW, RROW, RVEC, SCORE
from inferframe.plan.whole_table import WholeTable
from inferframe.providers import secrets


@dataclasses.dataclass
class JoinSteps:
    """The AI steps of one join (``plan.semantic.join.Steps``).

    Parameters:
        template: the join's template.
        column_of: the column each field reads in the joined rows, by ``Field.key``.
        options: ``classify_text``'s options for every model call.
        check_instructions: the pair check's (and batched check's) system message, or None (the default).
        property_options: the property's extra options (its ``instructions``, ``examples``).
        embed_options: ``embed_text``'s options for blocking.
        pairs_per_request: right rows per batched request (already fitted to the answer's max_tokens).
        left_names: left's columns; right_names: right's columns as the join names them.
    """

    template: Template
    column_of: dict
    options: dict
    check_instructions: str | None
    property_options: dict
    embed_options: dict
    pairs_per_request: int
    left_names: tuple
    right_names: tuple

    def __post_init__(self):
        self.check = pair_check(self.template, self.column_of, instructions=self.check_instructions, **self.options)
        self.batch = batch_check(self.template, CANDIDATES, self.pairs_per_request,
                                 instructions=self.check_instructions, raw=True, **self.options)
        self.model = call_of(self.check).config.model
        # A key given as an option stays out of the plan's pickle: its handle travels, as an AI call's does.
        self.options, self.embed_options = dict(self.options), dict(self.embed_options)
        self.key_refs = {name: secrets.put(opts.pop("api_key")) for name, opts in
                         (("options", self.options), ("embed_options", self.embed_options))
                         if isinstance(opts.get("api_key"), str)}

    def _options(self, name: str = "options") -> dict:
        """The options as the user gave them (the key read back from its handle)."""
        opts = dict(getattr(self, name))
        if name in self.key_refs:
            opts["api_key"] = secrets.get(self.key_refs[name])
        return opts

    def prop(self, side: str, prop: str, values: list | None) -> Expression:
        return side_property(self.template, side, prop, values, raw=True, **{**self._options(), **self.property_options})

    def key(self, values: list | None) -> Expression:
        return property_key(col(KEY), values)

    def embed(self, side: str) -> Expression:
        parts = side_message(self.template, side)
        return embed_text(parts[0] if len(parts) == 1 else concat(*parts), **self._options("embed_options"))

    def guard(self, plan: lp.LogicalPlan, value: str, keep: list, what: str, shared: dict | None) -> lp.LogicalPlan:
        return guarded_plan(plan, value, keep, what, shared)

    def batches(self, left: lp.LogicalPlan, right: lp.LogicalPlan, k: int | None, per_request: int) -> lp.LogicalPlan:
        """Each left row's candidates (every right row, or its ``k`` nearest), ``per_request`` per request, asked in
        rounds (``ask_in_batches``); the pairs found, left's columns then right's. Right is read when it runs."""
        opts = dict(self._options(), instructions=self.check_instructions)
        label = f"sem_join.batch[{self.model}]"
        schema = pa.schema([*left.schema, *(pa.field(n, t) for n, t in zip(self.right_names, right.schema.types))])
        template, steps = self.template, self

        def compute(source):
            lt = source.to_arrow()
            rt = type(source)(right).to_arrow()
            texts = [_side_value(r, template) for r in rt.select(template.columns("right")).to_pylist()]
            if k is None:
                candidates = [list(range(rt.num_rows))] * lt.num_rows
            else:
                candidates = steps._nearest_ids(source, lt, rt, k)
            found, stats = ask_in_batches(source, lt, candidates, texts, template, per_request, opts, label)
            lpart = lt.take(pa.array([i for i, _ in found], pa.int64()))
            rpart = rt.take(pa.array([r for _, r in found], pa.int64()))
            return pa.Table.from_arrays([*lpart.columns, *rpart.columns], schema=schema), stats

        what = "every right row" if k is None else f"its {k} nearest right rows"
        calls = expected_calls(lambda n: None if n is None or k is None else n * math.ceil(k / per_request))
        return WholeTable(left, schema, f"SemJoinBatches {label} per_request={per_request} candidates={what}",
                          compute, calls)

    def _nearest_ids(self, source: Any, lt: pa.Table, rt: pa.Table, k: int) -> list[list[int]]:
        """Each left row's ``k`` nearest right rows (their row numbers), nearest first."""
        frame = type(source)
        numbered = lt.append_column(ROW, pa.array(np.arange(lt.num_rows), pa.int64()))
        rnum = rt.append_column(RROW, pa.array(np.arange(rt.num_rows), pa.int64()))
        lv = frame(lp.Source(lp.InMemory(numbered), numbered.schema)).with_column(LVEC, self.embed("left"))
        rv = frame(lp.Source(lp.InMemory(rnum), rnum.schema)).with_column(RVEC, self.embed("right"))
        near = (lv.select(ROW, LVEC).nearest(rv.select(RROW, RVEC), on=LVEC, other_on=RVEC, k=k, score_column=SCORE,
                                             rank_column=RANK).select(ROW, RROW, RANK).to_pydict())
        out: list[list[tuple[int, int]]] = [[] for _ in range(lt.num_rows)]
        for row, rrow, rank in zip(near[ROW], near[RROW], near[RANK]):
            out[row].append((rank, rrow))
        return [[r for _, r in sorted(c)] for c in out]

    def proposal(self) -> lp.LogicalPlan:
        """A one-row plan whose column ``a`` is the model's proposed split of the statement."""
        from inferframe.functions.ai import prompt

        opts = {k: v for k, v in self._options().items() if k not in CLASSIFY_ONLY and k not in ("on_error", "instructions")}
        q = pa.table({"q": pa.array([f"Statement: {statement(self.template)}"], pa.string())})
        answer = prompt(col("q"), return_format=PROPOSAL_SCHEMA, system_message=PROPOSE_INSTRUCTIONS, **opts)
        from inferframe.plan.semantic.rel import Rel

        return Rel(lp.Source(lp.InMemory(q), q.schema)).with_column("a", answer).select("a").plan

    def read_proposal(self, table: pa.Table) -> Split | None:
        """The proposal's answer as a ``Split`` (None: no property, a failed call, or more than four words)."""
        answer = table.column("a").to_pylist()[0] if table.num_rows else None
        if not answer or answer.get("comparison") not in ("equal", "different", "opposite"):
            return None
        prop = " ".join(str(answer.get("property") or "").lower().split())
        if not prop or len(prop.split()) > 4:
            return None
        return Split(prop, answer["comparison"])


def call_of(expr: Expression) -> Any:
    """The AI call an expression makes (its first argument's, through e.g. ``.str.lower()``)."""
    node = expr._node
    while ai_call_of(node) is None and node.children():
        node = node.children()[0]
    return ai_call_of(node).udf.call


def statement(template: Template) -> str:
    """The predicate with its sides' fields written "A" and "B" (for the model that proposes a property)."""
    return "".join(("A" if p.side == "left" else "B") if hasattr(p, "side") else p for p in template.parts)


def _side_value(row: dict, template: Template) -> str:
    """The right side's message as text (as ``side_message`` writes it)."""
    names = template.columns("right")
    if len(names) == 1:
        return str(row[names[0]])
    return "\n".join(f"{c}: {row[c]}" for c in names)
