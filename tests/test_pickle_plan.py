"""Plans are data: a plan with UDFs and classes pickles and runs unchanged in another process."""

import subprocess
import sys

import cloudpickle
import pyarrow as pa

import inferframe as ifr
from inferframe import col
from inferframe.plan.optimizer import optimize


def test_pickled_plan_runs_in_a_subprocess(tmp_path):
    factor = 3

    @ifr.func
    def scale(x: int) -> int:
        return x * factor

    @ifr.cls
    class Suffix:
        def __init__(self, s: str):
            self.s = s

        def __call__(self, t: str) -> str:
            return t + self.s

    df = (
        ifr.from_pydict({"x": [1, 2, 3], "t": ["a", "b", "c"]})
        .with_column("y", scale(col("x")))
        .with_column("u", Suffix("?")(col("t")))
        .where(col("x") > 1)
    )
    expected = df.to_arrow()
    plan_file = tmp_path / "plan.pkl"
    plan_file.write_bytes(cloudpickle.dumps(optimize(df._plan)))
    out_file = tmp_path / "out.arrow"
    script = f"""
import cloudpickle, pyarrow as pa
from inferframe.runners import get_runner
plan = cloudpickle.loads(open({str(plan_file)!r}, "rb").read())
table = pa.Table.from_batches(list(get_runner().run(plan)), schema=plan.schema)
with pa.OSFile({str(out_file)!r}, "wb") as f:
    with pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    got = pa.ipc.open_file(str(out_file)).read_all()
    assert got.equals(expected)
    assert got.to_pydict()["u"] == ["b?", "c?"]
