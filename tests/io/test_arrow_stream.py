"""Arrow streams in and out: a DataFrame is an Arrow C stream run batch by batch; from_arrow reads any stream lazily."""

from __future__ import annotations

import cloudpickle
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.plan.optimizer import optimize

CALLS: list = []  # list.append is atomic: the UDF's threads need no lock


@ifr.func(return_dtype=ifr.DataType.int64())
def tenfold(x: int) -> int:
    CALLS.append(x)
    return None if x is None else x * 10


@pytest.fixture(autouse=True)
def _calls():
    CALLS.clear()
    yield


def counting_reader(n_batches: int, rows: int = 10):
    """A one-shot reader over ``n_batches`` batches, and the list of batches it has been asked for."""
    pulled = []
    schema = pa.schema([("a", pa.int64()), ("s", pa.string())])

    def batches():
        for i in range(n_batches):
            pulled.append(i)
            start = i * rows
            yield pa.record_batch({"a": list(range(start, start + rows)), "s": [f"r{j}" for j in range(start, start + rows)]},
                                  schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches()), pulled


# --- out: DataFrame.__arrow_c_stream__ --------------------------------------------------------------


def test_pyarrow_reads_a_lazy_dataframe():
    df = ifr.from_pydict({"a": [1, None, 3], "s": ["x", "y", None]}).with_column("b", tenfold(col("a")))
    assert pa.table(df).to_pydict() == {"a": [1, None, 3], "s": ["x", "y", None], "b": [10, None, 30]}
    assert pa.schema(df) == df.schema().to_arrow()


def test_the_export_runs_the_plan_only_as_batches_are_read():
    n = 200_000
    df = ifr.from_pydict({"a": list(range(n))}).into_batches(1000).with_column("b", tenfold(col("a")))
    reader = pa.RecordBatchReader.from_stream(df)
    assert CALLS == []  # exporting runs nothing
    first = reader.read_next_batch()
    assert first.column("b").to_pylist()[:3] == [0, 10, 20]
    assert 0 < len(CALLS) < n  # only batches near the head are computed
    reader.close()


def test_a_requested_schema_casts_the_stream():
    df = ifr.from_pydict({"a": [1, 2]})
    reader = pa.RecordBatchReader.from_stream(df, schema=pa.schema([("a", pa.int32())]))
    assert reader.read_all().schema.field("a").type == pa.int32()


def test_a_collected_dataframe_exports_its_table():
    df = ifr.from_pydict({"a": [1, 2]}).with_column("b", tenfold(col("a"))).collect()
    CALLS.clear()
    assert pa.table(df).to_pydict() == {"a": [1, 2], "b": [10, 20]}
    assert CALLS == []


def test_an_error_in_the_plan_reaches_the_consumer():
    @ifr.func(return_dtype=ifr.DataType.int64())
    def broken(x: int) -> int:
        raise RuntimeError("no luck")

    with pytest.raises(pa.ArrowException, match="no luck"):
        pa.table(ifr.from_pydict({"a": [1]}).with_column("b", broken(col("a"))))


# --- in: from_arrow -----------------------------------------------------------------------------


def test_a_reader_is_read_when_the_plan_runs_and_only_as_far_as_needed():
    reader, pulled = counting_reader(100)
    df = ifr.from_arrow(reader)
    assert pulled == []
    assert df.column_names == ["a", "s"]
    assert df.limit(3).to_pydict() == {"a": [0, 1, 2], "s": ["r0", "r1", "r2"]}
    assert len(pulled) < 10


def test_a_one_shot_stream_says_so_when_run_twice_and_collect_keeps_it():
    reader, _ = counting_reader(3)
    df = ifr.from_arrow(reader).with_column("b", tenfold(col("a")))
    assert "read once" in df.explain()
    assert df.count_rows() == 30
    with pytest.raises(PlanError, match=r"already consumed.*\.collect\(\)"):
        df.to_pydict()
    reader, _ = counting_reader(3)
    kept = ifr.from_arrow(reader).collect()
    assert kept.count_rows() == kept.count_rows() == 30


def test_an_exporter_is_asked_for_a_fresh_stream_every_run():
    class Producer:
        def __init__(self):
            self.opened = 0
            self.table = pa.table({"a": [1, None], "v": pa.array([[1.0, 2.0], None], pa.list_(pa.float32(), 2))})

        def __arrow_c_stream__(self, requested_schema=None):
            self.opened += 1
            return self.table.__arrow_c_stream__(requested_schema)

        def __arrow_c_schema__(self):
            return self.table.schema.__arrow_c_schema__()

    producer = Producer()
    df = ifr.from_arrow(producer)
    assert producer.opened == 0
    assert df.to_pydict() == df.to_pydict() == {"a": [1, None], "v": [[1.0, 2.0], None]}
    assert producer.opened == 2
    assert df.schema().to_arrow().field("v").type == pa.list_(pa.float32(), 2)


def test_an_exporter_without_a_schema_hook_is_opened_once_for_its_schema():
    class StreamOnly:
        def __init__(self):
            self.opened = 0

        def __arrow_c_stream__(self, requested_schema=None):
            self.opened += 1
            return pa.table({"a": [1, 2]}).__arrow_c_stream__(requested_schema)

    producer = StreamOnly()
    df = ifr.from_arrow(producer)
    assert producer.opened == 1
    assert df.to_pydict() == {"a": [1, 2]} and producer.opened == 1  # the first run reads that stream
    assert df.to_pydict() == {"a": [1, 2]} and producer.opened == 2


def test_an_array_exporter_and_a_bare_capsule():
    struct = pa.record_batch({"a": [1, 2], "b": ["x", None]}).to_struct_array()
    assert ifr.from_arrow(struct).to_pydict() == {"a": [1, 2], "b": ["x", None]}
    capsule = pa.table({"a": [7]}).__arrow_c_stream__()
    assert ifr.from_arrow(capsule).to_pydict() == {"a": [7]}


def test_a_pyarrow_dataset_scans_only_the_columns_the_plan_reads():
    data = pads.dataset(pa.table({"a": [1, 2], "b": ["x", "y"], "c": [True, False]}))
    df = ifr.from_arrow(data)
    assert df.select("b").to_pydict() == {"b": ["x", "y"]}
    assert "columns=[b]" in optimize(df.select("b")._plan).tree()
    assert df.where(col("a") > 1).to_pydict() == {"a": [2], "b": ["y"], "c": [False]}


def test_view_and_large_types_become_the_types_the_engine_takes():
    table = pa.table({"s": pa.array(["ab", None], pa.large_string()), "l": pa.array([[1], None], pa.large_list(pa.int64())),
                      "w": pa.array(["xyz", "q"], pa.string_view())})
    for data in (table, table.to_reader()):
        df = ifr.from_arrow(data)
        assert df.schema().to_arrow().types == [pa.string(), pa.list_(pa.int64()), pa.string()]
        out = df.with_column("n", col("s").str.length()).with_column("m", col("w").str.length()).to_pydict()
        assert out["n"] == [2, None] and out["m"] == [3, 1] and out["l"] == [[1], None]


def test_what_is_not_arrow_is_refused_with_the_fix():
    with pytest.raises(ArgumentTypeError, match="__arrow_c_stream__"):
        ifr.from_arrow({"a": [1]})
    with pytest.raises(ArgumentTypeError, match="RecordBatches"):
        ifr.from_arrow([1, 2])
    with pytest.raises(ArgumentTypeError, match="not a table"):
        ifr.from_arrow(pa.array([1, 2]))
    twice = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(PlanError, match="two columns named 'a'"):
        ifr.from_arrow(twice.to_reader())


def test_a_pickled_stream_plan_names_the_fix_when_read_elsewhere():
    reader, pulled = counting_reader(2)
    df = ifr.from_arrow(reader).with_column("b", tenfold(col("a")))
    copy = cloudpickle.loads(cloudpickle.dumps(df))  # as another process would get it
    assert copy.schema() == df.schema()
    with pytest.raises(PlanError, match=r"lives in the process that built this DataFrame.*\.collect\(\)"):
        copy.to_pydict()
    assert pulled == []
    assert df.to_pydict()["b"][:2] == [0, 10]  # the original still reads its stream
