"""Questions asked of a plan before it runs: does it call a model, where, on what inputs, and how many rows.

Example:
    >>> import inferframe as ifr
    >>> plan = ifr.from_pydict({"a": [1, 2, 3]}).limit(2)._plan
    >>> has_ai(plan), cheap_total(plan)
    (False, 2)
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from inferframe.expressions.nodes import Alias, UDFCall, contains_udf
from inferframe.plan import logical as lp
from inferframe.plan.ai_nodes import contains_ai, is_ai_call
from inferframe.plan.rules.kept_errors import without_kept_errors
from inferframe.plan.whole_table import Planned, WholeTable, kept


def _walk(plan: lp.LogicalPlan) -> Iterator[lp.LogicalPlan]:
    yield plan
    for c in plan.children():
        yield from _walk(c)


def _exprs(node: lp.LogicalPlan) -> tuple:
    """The expressions a node computes: a projection's, or a filter's predicate."""
    return getattr(node, "exprs", None) or ((node.predicate,) if isinstance(node, lp.Filter) else ())


def has_ai(plan: lp.LogicalPlan) -> bool:
    """Whether any projection or filter in the plan calls an AI function.

    Parameters:
        plan: a logical plan.

    Example:
        >>> import inferframe as ifr
        >>> from inferframe import col
        >>> from inferframe.functions import prompt
        >>> has_ai(ifr.from_pydict({"q": ["hi"]}).with_column("a", prompt(col("q"), model="gemma-3-270m"))._plan)
        True
    """
    return _uncomputed(plan) or any(contains_ai(e) for p in _walk(plan) for e in _exprs(p))


def calls_udf(plan: lp.LogicalPlan) -> bool:
    """Whether any projection or filter in the plan calls a UDF or AI function (computing costs more than reading).

    Parameters:
        plan: a logical plan.

    Example:
        >>> import inferframe as ifr
        >>> double = ifr.func(lambda x: x * 2, return_dtype=ifr.DataType.int64())
        >>> calls_udf(ifr.from_pydict({"a": [1]}).with_column("b", double(ifr.col("a")))._plan)
        True
    """
    return _uncomputed(plan) or any(contains_udf(e) for p in _walk(plan) for e in _exprs(p))


def whole_tables(plan: lp.LogicalPlan) -> Iterator[WholeTable]:
    """Every whole-table operator of the plan (sem_topk, sem_agg, sem_dedup), outermost first.

    Example:
        >>> import inferframe as ifr
        >>> list(whole_tables(ifr.from_pydict({"a": [1]})._plan))
        []
    """
    return (p for p in _walk(plan) if isinstance(p, WholeTable))


def _uncomputed(plan: lp.LogicalPlan) -> bool:
    """Whether a whole-table operator of the plan has yet to run, or a semantic node to be planned (either asks a model)."""
    return any(not w.computed for w in whole_tables(plan)) or any(
        isinstance(p, Planned) and kept(p) is None for p in _walk(plan))


def ai_calls(plan: lp.LogicalPlan) -> Iterator[tuple[lp.Project | lp.Filter, UDFCall]]:
    """Every AI call in the plan's projections and filters, with the node that computes it (outermost first).

    Parameters:
        plan: a logical plan.

    Example:
        >>> import inferframe as ifr
        >>> from inferframe import col
        >>> from inferframe.functions import prompt
        >>> df = ifr.from_pydict({"q": ["hi"]}).with_column("a", prompt(col("q"), model="gemma-3-270m"))
        >>> [call.udf.name for _, call in ai_calls(df._plan)]
        ['prompt']
    """
    if isinstance(plan, (lp.Project, lp.Filter)):
        for e in _exprs(plan):
            for n in e.walk():
                if is_ai_call(n):
                    yield plan, n
    for c in plan.children():
        yield from ai_calls(c)


def estimate_inputs(plan: lp.LogicalPlan) -> Iterator[tuple[UDFCall, lp.LogicalPlan | None]]:
    """Each AI call with the plan of its argument values (columns ``__p0``, ``__p1``, ...), for estimating its cost.

    The inputs are None when they depend on another AI call's output, which cannot be known
    without calling that model.

    Parameters:
        plan: an optimized logical plan.

    Example:
        >>> import inferframe as ifr
        >>> from inferframe import col
        >>> from inferframe.functions import prompt
        >>> df = ifr.from_pydict({"q": ["hi"]}).with_column("a", prompt(col("q"), model="gemma-3-270m"))
        >>> [(call.udf.name, inputs.schema.names) for call, inputs in estimate_inputs(df._plan)]
        [('prompt', ['__p0'])]
    """
    for call, inputs, bounded in estimate_bounds(plan):
        yield call, None if bounded else inputs


def _without_ai_filters(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    """The plan with every filter that calls a model taken out: a superset of its rows."""
    if isinstance(plan, lp.Filter) and contains_ai(plan.predicate):
        return _without_ai_filters(plan.input)
    kept = without_kept_errors(plan)  # sem_filter's kept-errors filter: its AI projection goes too
    if kept is not None:
        return _without_ai_filters(kept)
    kids = plan.children()
    if not kids:
        return plan
    new = tuple(_without_ai_filters(k) for k in kids)
    return plan if all(a is b for a, b in zip(new, kids)) else plan.with_children(new)


def estimate_bounds(plan: lp.LogicalPlan) -> Iterator[tuple[UDFCall, lp.LogicalPlan | None, bool]]:
    """Each AI call with the plan of its argument values; a call after filters that ask a model gets the rows before them.

    Yields (call, inputs, bounded): ``bounded`` says the inputs are an upper bound (the rows an AI
    filter would drop are still in them). Inputs are None when they depend on an AI projection.

    Example:
        >>> import inferframe as ifr
        >>> from inferframe import col
        >>> from inferframe.functions import prompt, sem_predicate
        >>> df = ifr.from_pydict({"q": ["hi", "yo"]}).where(sem_predicate("{q} is a greeting", model="gemma-3-270m"))
        >>> df = df.with_column("a", prompt(col("q"), model="gemma-3-270m"))
        >>> [(c.udf.name, bounded) for c, _, bounded in estimate_bounds(df._plan)]
        [('prompt', True), ('sem_filter[score]', False)]
    """
    for node, call in ai_calls(plan):
        below = _without_ai_filters(node.input)
        if any(contains_ai(a) for a in call.args) or has_ai(below):
            yield call, None, False
        else:
            yield call, lp.Project(below, tuple(Alias(a, f"__p{i}") for i, a in enumerate(call.args))), below is not node.input


def cheap_total(plan: lp.LogicalPlan, count_source: Callable[[Any], int | None] = lambda source: None) -> int | None:
    """Rows the job will produce, when knowable without reading data (for the progress bar).

    Parameters:
        plan: an optimized logical plan.
        count_source: rows of a file source from its metadata, or None (the caller's reader:
            counting may read footers, which the plan layer does not do itself).

    Example:
        >>> import inferframe as ifr
        >>> cheap_total(ifr.from_pydict({"a": [1, 2, 3]})._plan)
        3
    """
    if isinstance(plan, (lp.Project, lp.IntoBatches)):
        return cheap_total(plan.input, count_source)
    if isinstance(plan, lp.Limit):
        inner = cheap_total(plan.input, count_source)
        return plan.n if inner is None else min(plan.n, inner)
    if isinstance(plan, lp.Source) and plan.filter is None:
        n = plan.source.table.num_rows if isinstance(plan.source, lp.InMemory) else count_source(plan.source)
        if n is not None and plan.limit is not None:
            n = min(n, plan.limit)
        return n
    return None


def source_rows(plan: lp.LogicalPlan, count_source: Callable[[Any], int | None]) -> int | None:
    """Rows of a plan that only reads a source (no filter, no limit), from its table or its files' metadata; else None.

    Parameters:
        plan: an optimized logical plan.
        count_source: rows of a file source from its metadata, or None (the caller's reader).

    Example:
        >>> import inferframe as ifr
        >>> source_rows(ifr.from_pydict({"a": [1, 2, 3]})._plan, lambda s: None), source_rows(ifr.from_pydict({"a": [1]}).limit(1)._plan, lambda s: None)
        (3, None)
    """
    if not isinstance(plan, lp.Source) or plan.filter is not None or plan.limit is not None:
        return None
    if isinstance(plan.source, lp.InMemory):
        return plan.source.table.num_rows
    return count_source(plan.source)


def ai_notes(plan: lp.LogicalPlan, count_source: Callable[[Any], int | None] = lambda source: None) -> list[str]:
    """One line per AI call in projections and filters: its label, and its plan and estimated calls where it says.

    A call's config may have ``explain(rows)`` (rows: the rows reaching it when known cheaply, else None).

    Example:
        >>> import inferframe as ifr
        >>> from inferframe import col
        >>> from inferframe.functions import prompt
        >>> ai_notes(ifr.from_pydict({"q": ["hi"]}).with_column("a", prompt(col("q"), model="gemma-3-270m"))._plan)
        ['prompt[gemma-3-270m]: up to 1 calls (one per row)']
    """
    out = []
    for p in _walk(plan):
        if isinstance(p, WholeTable):
            out.append(f"{p.note}: {p.calls(None if has_ai(p.input) else cheap_total(p.input, count_source))}")
        exprs = getattr(p, "exprs", None) or ((p.predicate,) if isinstance(p, lp.Filter) else ())
        for n in (n for e in exprs for n in e.walk() if is_ai_call(n)):
            rows = cheap_total(p.input, count_source)
            call = getattr(n.udf, "call", None)
            explain = getattr(call.config, "explain", None) if call is not None else None
            if callable(explain):
                out.append(f"{call.label}: {explain(rows)}")
            else:
                label = call.label if call is not None else n.udf.name
                out.append(f"{label}: " + ("calls unknown until run" if rows is None else f"up to {rows} calls (one per row)"))
    return out


def row_steps(plan: lp.LogicalPlan) -> Iterator[str]:
    """Each projection, filter, aggregation and explode of the plan as ``explain()`` names it (sources and limits left out).

    What is done to the rows around a job's AI calls: the run history tells pipelines apart by it.

    Example:
        >>> import inferframe as ifr
        >>> list(row_steps(ifr.from_pydict({"a": [1]}).where(ifr.col("a") > 0).limit(1)._plan))
        ['Filter gt(col(a), lit(0))']
    """
    if isinstance(plan, (lp.Project, lp.Filter, lp.Aggregate, lp.Explode)):
        yield plan.describe()
    for child in plan.children():
        yield from row_steps(child)
