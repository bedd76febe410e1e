"""Arrow stream sources on the Ray runner: the driver reads the stream into the object store, the tasks its blocks.

A plan holding a stream still pickles (exchanges ship their logical node, source included): the stream
travels as a stand-in that only the driver's copy never needs to read.
"""

import polars as pl
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col


@pytest.fixture
def on_ray(ray_cluster):
    ifr.set_runner_ray()
    yield
    ifr.set_runner_native()


@ifr.func(return_dtype=ifr.DataType.int64())
def doubled(x):
    return None if x is None else 2 * x


def test_stream_sources_run_on_ray_as_locally(on_ray):
    n = 150_000  # more than one block of the driver's read
    lazy = pl.LazyFrame({"id": list(range(n)), "g": [i % 5 for i in range(n)]})
    df = ifr.from_polars(lazy).with_column("d", doubled(col("id"))).where(col("g") < 3)
    grouped = df.groupby("g").agg(col("d").sum().alias("total")).sort("g")
    ifr.set_runner_native()
    local = grouped.to_arrow()
    ifr.set_runner_ray()
    assert grouped.to_arrow().equals(local)
    assert df.count_rows() == 3 * n // 5

    reader = pa.table({"a": [1, 2, None]}).to_reader()
    once = ifr.from_arrow(reader).with_column("d", doubled(col("a")))
    assert once.sort("a").to_pydict() == {"a": [1, 2, None], "d": [2, 4, None]}
