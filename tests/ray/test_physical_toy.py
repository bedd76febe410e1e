"""A logical operator written in one place (here) runs on both runners: the physical planner plans it
(its ``to_physical`` gives a ``MapBatches``), and neither runner has a line about it.
"""

import dataclasses
import functools
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import ray

import inferframe as ifr
from inferframe import col
from inferframe.dataframe.dataframe import DataFrame
from inferframe.plan import logical as lp
from inferframe.plan import physical as pp

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the toy's code travels to the workers


def _shout(batch: pa.RecordBatch, column: str, schema: pa.Schema) -> pa.RecordBatch:
    loud = pc.utf8_upper(batch.column(column))
    pid = pa.array([os.getpid()] * batch.num_rows, pa.int64())
    return pa.RecordBatch.from_arrays([*batch.columns, loud, pid], schema=schema)


@dataclasses.dataclass(frozen=True, eq=False)
class Shout(lp.LogicalPlan):
    """The toy: ``<column>_loud`` (upper case) and ``pid`` (the process that ran it) added to every row."""

    input: lp.LogicalPlan
    column: str

    def __post_init__(self):
        self._set_schema(self.input.schema.append(pa.field(f"{self.column}_loud", pa.string()))
                         .append(pa.field("pid", pa.int64())))

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Shout(children[0], self.column)

    def to_physical(self, inputs):
        fn = functools.partial(_shout, column=self.column, schema=self.schema)
        return pp.MapBatches(inputs=inputs, schema=self.schema, fn=fn, name="shout")


def _toy_pipeline() -> DataFrame:
    words = ifr.from_pydict({"id": list(range(200)), "w": [f"word{i % 13}" if i % 17 else None for i in range(200)]})
    return DataFrame(Shout(words.where(col("id") % 3 != 0)._plan, "w")).where(col("id") < 150).sort("id", desc=True)


def test_a_toy_operator_defined_once_runs_on_the_local_and_the_ray_runner(ray_cluster):
    df = _toy_pipeline()
    assert "MapBatches shout" in pp.plan_physical(df._optimized()).tree()
    try:
        ifr.set_runner_native()
        local = df.to_arrow()
        ifr.set_runner_ray()
        on_ray = df.to_arrow()
    finally:
        ifr.set_runner_native()
    expected_ids = [i for i in range(149, -1, -1) if i % 3]
    for table in (local, on_ray):
        assert table.column("id").to_pylist() == expected_ids
        assert table.column("w_loud").to_pylist() == [w.upper() if w else None for w in table.column("w").to_pylist()]
    assert local.drop_columns(["pid"]).equals(on_ray.drop_columns(["pid"]))
    # Where it ran: in this process locally, in Ray workers on Ray.
    assert set(local.column("pid").to_pylist()) == {os.getpid()}
    assert os.getpid() not in set(on_ray.column("pid").to_pylist())
