"""Plan rewriting in plan/: the Nearest operator through the optimizer, AI stages, and questions asked of a plan."""

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.plan import logical as lp
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.plan.ai_stages import project_nodes
from inferframe.plan.inspect import ai_calls, cheap_total, estimate_inputs, has_ai
from inferframe.plan.optimizer import optimize


def _find(plan, kind):
    if isinstance(plan, kind):
        return plan
    for c in plan.children():
        found = _find(c, kind)
        if found is not None:
            return found
    return None


def _sources(plan):
    if isinstance(plan, lp.Source):
        return [plan]
    return [s for c in plan.children() for s in _sources(c)]


@pytest.fixture
def sides():
    left = ifr.from_pydict({"id": [0, 1, 2], "tag": ["a", "b", "a"], "v": [[1.0, 0.0], [0.0, 1.0], [1.0, 0.5]]})
    right = ifr.from_pydict({"id": [7, 8], "title": ["x", "y"], "v": [[1.0, 0.1], [0.1, 1.0]]})
    return left, right


def test_nearest_is_a_logical_operator_with_a_readable_line(sides):
    left, right = sides
    df = left.nearest(right, on="v", k=1, metric="dot")
    assert isinstance(df._plan, lp.Nearest)
    assert df._plan.children() == (left._plan, right._plan)
    assert "* Nearest k=1 dot on [v ~ right v] -> score, rank" in df._plan.tree()


def test_filter_on_left_columns_moves_below_nearest(sides):
    left, right = sides
    df = left.nearest(right, on="v", k=2).where(col("tag") == "a")
    plan = optimize(df._plan)
    nearest = _find(plan, lp.Nearest)
    assert not isinstance(plan, lp.Filter) and _find(nearest.left, lp.Filter) is not None
    expected = left.nearest(right, on="v", k=2).to_arrow().filter(pc.equal(pc.field("tag"), "a"))
    assert df.to_arrow().equals(expected)


@pytest.mark.parametrize("predicate", [col("rank") == 1, col("title") == "y", col("right.id") == 8])
def test_filter_on_match_columns_stays_above_nearest(sides, predicate):
    left, right = sides
    df = left.nearest(right, on="v", k=2).where(predicate)
    plan = optimize(df._plan)
    assert isinstance(plan, lp.Filter) and isinstance(plan.input, lp.Nearest)


def test_limit_stays_above_nearest(sides):
    left, right = sides
    left = ifr.from_pydict({"id": [0, 1, 2], "v": [None, None, [1.0, 0.0]]})  # the first rows have no match
    df = left.nearest(right, on="v", k=1).limit(1)
    assert isinstance(optimize(df._plan), lp.Limit)
    assert df.to_pydict()["id"] == [2]


def test_pruning_reaches_both_sides_and_keeps_prefixed_names(tmp_path):
    pq.write_table(pa.table({"id": [1, 2], "text": ["q1", "q2"], "big": ["x" * 10, "y" * 10],
                             "v": [[1.0, 0.0], [0.0, 1.0]]}), tmp_path / "left.parquet")
    pq.write_table(pa.table({"id": [7, 8], "title": ["a", "b"], "body": ["...", "..."],
                             "v": [[0.0, 1.0], [1.0, 0.0]]}), tmp_path / "right.parquet")
    left = ifr.read_parquet(str(tmp_path / "left.parquet"))
    right = ifr.read_parquet(str(tmp_path / "right.parquet"))
    df = left.nearest(right, on="v", k=1).select("text", "right.id", "rank")
    left_src, right_src = _sources(optimize(df._plan))
    # "id" stays on the left although unused: without it the right "id" would lose its "right." prefix.
    assert left_src.columns == ("id", "text", "v")
    assert right_src.columns == ("id", "v")
    assert df.to_pydict() == {"text": ["q1", "q2"], "right.id": [8, 7], "rank": [1, 1]}


def test_unused_udf_column_of_the_right_side_is_not_computed(sides):
    left, right = sides
    calls = []

    @ifr.func
    def shout(s: str) -> str:
        calls.append(s)
        return s.upper()

    df = left.nearest(right.with_column("loud", shout(col("title"))), on="v", k=1).select("id", "right.id")
    assert df.to_pydict() == {"id": [0, 1, 2], "right.id": [7, 8, 7]}
    assert calls == []
    out = left.nearest(right.with_column("loud", shout(col("title"))), on="v", k=1).select("loud").to_pydict()
    assert out == {"loud": ["X", "Y", "X"]} and len(calls) == 2


def test_plan_with_nearest_pickles_and_runs(sides):
    left, right = sides
    df = left.nearest(right, on="v", k=2)
    plan = pickle.loads(pickle.dumps(optimize(df._plan)))
    assert isinstance(plan, lp.Nearest) and plan.schema == df._plan.schema
    assert ifr.DataFrame(plan).to_arrow().equals(df.to_arrow())


def test_empty_left_gives_the_schema(sides):
    left, right = sides
    out = left.where(col("id") > 10).nearest(right, on="v").to_arrow()
    assert out.num_rows == 0 and out.schema.names == ["id", "tag", "v", "right.id", "title", "right.v", "score", "rank"]


def test_ai_stages_give_side_columns_and_hoist_nested_calls():
    plan = ifr.from_pydict({"q": ["hi"]})._plan
    first = prompt(col("q"), model="gemma-3-270m", usage_column=True)
    second = prompt(first, model="gemma-3-270m")
    out = project_nodes(plan, [col("q")._node, first.alias("a")._node, second.alias("b")._node])
    assert out.schema.names == ["q", "a", "b", "a_error", "a_usage", "b_error"]
    # Three stages: "a", then for "b" the call it reads is staged again before "b" itself.
    staged = [n for n in out.input.schema.names if n.startswith("__stage_")]
    assert staged == ["__stage_0", "__stage_1", "__stage_2"]
    b_error = dict((e.name(), e) for e in out.exprs)["b_error"]
    assert "input_error" in str(b_error)  # a row failing upstream reports that error (kind "input")


def test_plan_side_ai_call_of_matches_the_functions_copy():
    e = prompt(col("q"), model="gemma-3-270m").alias("a")._node
    assert ai_call_of(e) is not None and ai_call_of(e).udf.name == "prompt"
    assert ai_call_of((col("q") + "!")._node) is None


def test_inspect_sees_ai_calls_on_the_right_side_of_nearest(sides):
    left, right = sides
    docs = right.with_column("summary", prompt(col("title"), model="gemma-3-270m"))
    plan = left.nearest(docs, on="v", k=1)._plan
    assert has_ai(plan) and not has_ai(left._plan)
    assert [call.udf.name for _, call in ai_calls(plan)] == ["prompt"]
    [(call, inputs)] = estimate_inputs(optimize(plan))
    assert inputs.schema.names == ["__p0"]


def test_estimate_inputs_are_none_when_they_depend_on_another_ai_call():
    df = ifr.from_pydict({"q": ["hi"]}).with_column("a", prompt(col("q"), model="gemma-3-270m"))
    df = df.with_column("b", prompt(col("a"), model="gemma-3-270m"))
    found = [inputs for _, inputs in estimate_inputs(optimize(df._plan))]
    assert [x is None for x in found] == [True, False]  # outermost ("b", which reads "a") first
    assert df.estimate()["calls"][0] == {"call": "prompt[gemma-3-270m]", "rows": None,
                                         "note": "depends on another AI call's output"}


def test_cheap_total_asks_the_caller_for_file_counts(tmp_path):
    pq.write_table(pa.table({"a": list(range(10))}), tmp_path / "t.parquet")
    plan = ifr.read_parquet(str(tmp_path / "t.parquet")).limit(4)._plan
    assert cheap_total(plan) == 4  # limit known, count not asked for
    assert cheap_total(ifr.read_parquet(str(tmp_path / "t.parquet"))._plan) is None
    assert cheap_total(ifr.read_parquet(str(tmp_path / "t.parquet"))._plan, lambda source: 10) == 10
    assert cheap_total(ifr.from_pydict({"a": [1, 2]}).where(col("a") > 1)._plan) is None
