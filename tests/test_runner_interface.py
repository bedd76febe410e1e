"""One physical planner for every runner, behind one ``Runner`` base class (issue 24, points 2 and 3).

The planner (``plan/physical.py``) is the only code that turns logical node types into operators;
runners only decide where operators run, and nothing probes a runner or its services with
getattr/hasattr: what a DataFrame may ask of a runner is the base class.
"""

import ast
import inspect
import pathlib
import re

import pyarrow as pa

import inferframe as ifr
from inferframe import col
from inferframe.execution.executor import execute
from inferframe.plan import logical as lp
from inferframe.plan import physical as pp
from inferframe.runners import LocalRunner, Runner, get_runner

ROOT = pathlib.Path(ifr.__file__).parent
PLAN_NODES = {name for name, value in vars(lp).items()
              if inspect.isclass(value) and (issubclass(value, lp.LogicalPlan) or value is lp.InMemory)}


def _isinstance_over_plan_nodes(path: pathlib.Path) -> list[str]:
    """Each ``isinstance(x, <logical plan node class>)`` in ``path``, as 'file:line'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" and len(node.args) == 2:
            named = {n.attr if isinstance(n, ast.Attribute) else n.id
                     for n in ast.walk(node.args[1]) if isinstance(n, (ast.Attribute, ast.Name))}
            if named & PLAN_NODES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_isinstance_over_plan_nodes_outside_the_plan_layer():
    """Runners, executor, DataFrame and every other layer see physical operators, never logical node types."""
    found = [hit for path in ROOT.rglob("*.py") if path.relative_to(ROOT).parts[0] != "plan"
             for hit in _isinstance_over_plan_nodes(path)]
    assert found == []


def test_in_the_plan_layer_only_rules_inspection_and_the_planner_match_node_types():
    # semantic/: the semantic operators' planner (plan choice at run time) is a planner too.
    allowed = ("rules/", "inspect.py", "logical.py", "physical.py", "semantic/")
    found = [hit for path in (ROOT / "plan").rglob("*.py") for hit in _isinstance_over_plan_nodes(path)]
    assert [hit for hit in found if not hit.removeprefix("plan/").startswith(allowed)] == []
    # The physical planner matches by a table of node types, not a ladder: one isinstance (an in-memory source).
    assert [hit for hit in found if hit.startswith("plan/physical.py")] == ["plan/physical.py:" + str(
        next(i for i, line in enumerate((ROOT / "plan" / "physical.py").read_text().splitlines(), 1)
             if "isinstance(node.source, lp.InMemory)" in line))]


def test_no_getattr_or_hasattr_probe_on_a_runner_or_its_services():
    probe = re.compile(r"""\b(getattr|hasattr)\(\s*(self\.)?(ctx\.)?(runner|_runner|services|get_runner\(\))\s*,"""
                       r"""|\b(getattr|hasattr)\([^)]*["'](writes_in_workers|to_dataset|write_parts|execute|batch_done|batch_started|worker_env|counters)["']""")
    bad = []
    for path in ROOT.rglob("*.py"):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if probe.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert bad == []


def test_every_logical_node_type_has_a_physical_operator():
    nodes = {value for value in vars(lp).values() if inspect.isclass(value) and issubclass(value, lp.LogicalPlan)}
    assert nodes - {lp.LogicalPlan} <= set(pp._RULES)


def test_the_runners_are_runners_and_the_base_says_what_a_dataframe_may_ask():
    from inferframe.runners.ray_runner import RayRunner

    assert issubclass(LocalRunner, Runner) and issubclass(RayRunner, Runner) and isinstance(get_runner(), Runner)
    assert RayRunner.writes_in_workers and not LocalRunner.writes_in_workers
    assert LocalRunner().to_dataset(ifr.from_pydict({"a": [1]})._plan) is None
    assert Runner.__abstractmethods__ == frozenset({"execute"})


def test_a_filter_on_a_udf_plans_a_udf_stage_then_drops_its_column():
    @ifr.func(return_dtype=ifr.DataType.int64())
    def double(x):
        return 2 * x

    df = ifr.from_pydict({"a": [1, 2, 3]}).where(double(col("a")) > 2).with_column("b", double(col("a")))
    op = pp.plan_physical(df._optimized())
    assert [line.strip() for line in op.tree().splitlines()] == [
        "* Project [col(a), col(__udf_1) as b]",
        "* UDFStage double -> __udf_1",
        "* Project [col(a)]",
        "* Filter gt(col(__udf_0), lit(2))",
        "* UDFStage double -> __udf_0",
        "* ReadTable rows=3",
    ]
    assert op.input.input.schema.names == ["a"]  # the first stage's column is gone before the second stage
    assert pa.Table.from_batches(list(execute(op))).to_pydict() == {"a": [2, 3], "b": [4, 6]}


def test_a_runner_written_against_the_base_class_runs_dataframes(monkeypatch, tmp_path):
    """A new runner implements ``execute`` only; the DataFrame runs, counts and writes through it."""
    import pyarrow.parquet as pq

    seen = []

    class Tracing(Runner):
        name = "tracing"

        def execute(self, op):
            seen.append(op.describe())
            return execute(op)

    monkeypatch.setattr("inferframe.runners.get_runner", lambda: Tracing())
    df = ifr.from_pydict({"a": [3, 1, 2]}).sort("a")
    assert df.to_pydict() == {"a": [1, 2, 3]}
    assert df.count_rows() == 3
    paths = df.write_parquet(str(tmp_path / "out")).to_pydict()["path"]
    assert pq.read_table(paths).to_pydict() == {"a": [1, 2, 3]}
    # Run, count, write: the sort each time; then the table of written paths (one file) is read.
    assert seen == ["Exchange sort [a asc]"] * 3 + ["ReadTable rows=1"]
