"""Build a projection: stage AI calls into struct columns with their ``_error``/``_usage``/``_confidence`` side columns, and expand ``unnest()``.

An AI call returns a struct (value, error, usage). Projecting ``<name>`` from it would
call the model once per field, so the call is computed once into a temporary column
(``__stage_<i>``) and the value and side columns are read from that column.

Example:
    >>> import inferframe as ifr
    >>> from inferframe import col
    >>> from inferframe.functions import prompt
    >>> plan = ifr.from_pydict({"q": ["hi"]})._plan
    >>> project_nodes(plan, [col("q")._node, prompt(col("q"), model="gemma-3-270m").alias("a")._node]).schema.names
    ['q', 'a', 'a_error']
"""

from __future__ import annotations

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.nodes import Alias, Call, Col, Node, UDFCall, Unnest, contains_agg, contains_udf
from inferframe.plan import logical as lp
from inferframe.plan.ai_nodes import ai_call_of


def struct_field(node: Node, name: str) -> Node:
    """The expression reading field ``name`` of the struct ``node``.

    Parameters:
        node: an expression of struct type.
        name: the field to read.

    Example:
        >>> from inferframe import col
        >>> str(struct_field(col("s")._node, "value"))
        "struct.get(col(s), field='value')"
    """
    return Call("struct.get", (node,), (("field", name),))


# The media functions: each turns the value it reads into the next form of the same value.
MEDIA_STEPS = frozenset({"download", "decode_image", "resize_image", "encode_image"})


class _Stages:
    """The plan so far, growing one ``__stage_<i>`` column per staged expression."""

    def __init__(self, plan: lp.LogicalPlan) -> None:
        self.plan = plan
        self.count = 0

    def stage(self, expr: Node) -> str:
        """Compute ``expr`` once into a new temporary column on top of the plan so far; return its name."""
        tmp = f"__stage_{self.count}"
        self.count += 1
        self.plan = lp.Project(self.plan, tuple(Col(c) for c in self.plan.schema.names) + (Alias(expr, tmp),))
        return tmp

    def hoist(self, call: UDFCall) -> tuple[str, list[Node]]:
        """Stage an AI call and, first, the AI calls feeding it; return its column and its error column.

        A row whose input failed upstream (an AI call feeding this one, or a column ``x`` read
        with its ``x_error`` beside it) is an error of this call too, of kind "input" with the
        upstream message (``ai.input_error``): a failed input never looks like a success.
        """
        upstream: list[tuple[str, Node]] = []
        schema = self.plan.schema

        def inner(node: Node) -> Node:
            nested = ai_call_of(node)
            if nested is None:
                return node
            tmp, errs = self.hoist(nested)
            upstream.append((nested.udf.name, errs[0]))
            return struct_field(Col(tmp), "value")

        for name in sorted({c for a in call.args for c in a.referenced_columns()}):
            if _is_error_column(schema, f"{name}_error"):
                upstream.append((name, Col(f"{name}_error")))
        new_call = call.with_children(tuple(a.transform_up(inner) for a in call.args))
        tmp = self.stage(new_call)
        own = struct_field(Col(tmp), "error")
        if not upstream:
            return tmp, [own]
        if call.udf.name in MEDIA_STEPS:
            # Reading, decoding or resizing the same value: a failed step upstream keeps its own kind.
            return tmp, [Call("fill_null", (own, *(err for _, err in upstream)))]
        params = (("labels", tuple(label for label, _ in upstream)), ("raise", call.udf.on_error == "raise"))
        return tmp, [Call("ai.input_error", (own, *(err for _, err in upstream)), params)]


def _is_error_column(schema: pa.Schema, name: str) -> bool:
    """Whether ``name`` is an AI call's error column (struct with kind and message) in ``schema``."""
    i = schema.get_field_index(name)
    t = schema.field(i).type if i >= 0 else None
    return t is not None and pa.types.is_struct(t) and {"kind", "message"} <= {t.field(j).name for j in range(t.num_fields)}


def project_nodes(plan: lp.LogicalPlan, nodes: list[Node]) -> lp.LogicalPlan:
    """Project ``nodes`` over ``plan``, adding AI side columns and expanding ``unnest()`` markers.

    Parameters:
        plan: the input plan.
        nodes: the output expressions, in order; an AI call with ``error_column``/``usage_column``/
            ``confidence_column`` also adds ``<name>_error``/``<name>_usage``/``<name>_confidence``
            (replacing a column of that name).

    Example:
        >>> import inferframe as ifr
        >>> from inferframe import col
        >>> plan = ifr.from_pydict({"s": [{"x": 1, "y": 2}]})._plan
        >>> project_nodes(plan, [Unnest(col("s")._node)]).schema.names
        ['x', 'y']
    """
    stages = _Stages(plan)
    out: list[Node] = []
    side: dict[str, Node] = {}
    for n in nodes:
        call = ai_call_of(n)
        if call is not None and (call.udf.error_column or call.udf.usage_column or call.udf.confidence_column):
            # Run the AI call once into a struct, then split value, error, usage and confidence out of it.
            tmp, errors = stages.hoist(call)
            name = n.name()
            out.append(Alias(struct_field(Col(tmp), "value"), name))
            if call.udf.error_column:
                err = errors[0] if len(errors) == 1 else Call("fill_null", tuple(errors))
                side[f"{name}_error"] = Alias(err, f"{name}_error")
            if call.udf.usage_column:
                side[f"{name}_usage"] = Alias(struct_field(Col(tmp), "usage"), f"{name}_usage")
            if call.udf.confidence_column:
                side[f"{name}_confidence"] = Alias(struct_field(Col(tmp), "confidence"), f"{name}_confidence")
        elif isinstance(n, Unnest) and contains_udf(n.child):
            # Compute a struct with a UDF once, then split it, instead of calling the UDF per field.
            out.append(Unnest(Col(stages.stage(n.child))))
        else:
            out.append(n)
    staged = stages.plan
    nodes = out if staged is not plan else nodes
    # A side column replaces an existing column of the same name (re-running with_column).
    nodes = [side.pop(n.name(), n) if not isinstance(n, Unnest) else n for n in nodes] + list(side.values())
    return lp.Project(staged, tuple(_expand(nodes, staged.schema)))


def _expand(nodes: list[Node], schema: pa.Schema) -> list[Node]:
    """Replace each ``unnest(struct)`` by one column per field; refuse aggregations."""
    expanded: list[Node] = []
    for n in nodes:
        if isinstance(n, Unnest):
            f = n.child.to_field(schema)
            if not pa.types.is_struct(f.type):
                raise PlanError(f"unnest() needs a struct column, but {n.child} is {f.type}.")
            for i in range(f.type.num_fields):
                expanded.append(Alias(struct_field(n.child, f.type.field(i).name), f.type.field(i).name))
        else:
            if contains_agg(n):
                raise PlanError(f"{n} is an aggregation; use it in agg() or groupby(...).agg(), not in select().")
            expanded.append(n)
    return expanded
