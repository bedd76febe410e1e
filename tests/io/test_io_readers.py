"""Scanning: round trips, pushdown equivalence, streaming, schema unification, pickling."""

from __future__ import annotations

import gc
import gzip
import json
import os
import pathlib
import pickle
import time
import uuid

import cloudpickle
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferframe.errors import UnreadableFileError
from inferframe.io import (
    GLOB_SCHEMA,
    ScanSource,
    SchemaMismatchError,
    estimate_rows,
    open_source,
    scan,
    source_schema,
)

N = 5000


def sample_table(n: int = N, offset: int = 0) -> pa.Table:
    ids = list(range(offset, offset + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "group": pa.array([f"g{i % 7}" for i in ids]),
            "score": pa.array([None if i % 11 == 0 else i * 0.5 for i in ids], pa.float64()),
        }
    )


def collect(batches) -> pa.Table:
    batches = list(batches)
    return pa.Table.from_batches(batches) if batches else None


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("pq")
    # Three files, many small row groups each, so statistics can prune.
    for i in range(3):
        pq.write_table(sample_table(N, offset=i * N), root / f"f{i}.parquet", row_group_size=500)
    (root / "_SUCCESS").write_text("")
    return root


@pytest.fixture(scope="module")
def parquet_full(parquet_dir) -> pa.Table:
    return pq.read_table([str(p) for p in sorted(parquet_dir.glob("*.parquet"))])


def expected(table: pa.Table, columns, filter, limit) -> pa.Table:
    if filter is not None:
        table = table.filter(filter)
    if columns is not None:
        table = table.select(columns)
    if limit is not None:
        table = table.slice(0, limit)
    return table


# ---- parquet ---------------------------------------------------------------------


def test_parquet_round_trip(parquet_dir):
    src = open_source("parquet", str(parquet_dir))
    assert [os.path.basename(p) for p in src.paths] == ["f0.parquet", "f1.parquet", "f2.parquet"]
    full = pq.read_table([str(p) for p in sorted(parquet_dir.glob("*.parquet"))])
    assert collect(scan(src)).equals(full)
    assert source_schema(src) == full.schema.remove_metadata()
    assert estimate_rows(src) == 3 * N


@pytest.mark.parametrize(
    ("columns", "filter", "limit"),
    [
        (["score", "id"], pc.field("id") > 7400, None),
        (["group"], pc.field("group") == "g3", 50),
        (None, pc.field("score").is_null(), None),
        (["id"], None, 12345),
        ([], pc.field("id") < 10, None),
        (["id"], (pc.field("id") >= 4990) & (pc.field("id") < 5010), 15),
    ],
)
def test_parquet_pushdown_matches_full_read(parquet_dir, columns, filter, limit):
    src = open_source("parquet", str(parquet_dir / "*.parquet"))
    full = pq.read_table([str(p) for p in sorted(parquet_dir.glob("*.parquet"))])
    got = collect(scan(src, columns=columns, filter=filter, limit=limit, batch_size=700))
    want = expected(full, columns, filter, limit)
    assert got.num_rows == want.num_rows
    assert got.select(want.column_names).equals(want) if columns else got.equals(want)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lo=st.integers(-10, 3 * N + 10),
    width=st.integers(0, 3 * N),
    limit=st.none() | st.integers(0, 3 * N),
    batch_size=st.integers(50, 4000),
)
def test_parquet_pushdown_property(parquet_dir, parquet_full, lo, width, limit, batch_size):
    src = open_source("parquet", str(parquet_dir))
    full = parquet_full
    flt = (pc.field("id") >= lo) & (pc.field("id") < lo + width)
    batches = list(
        scan(src, columns=["id", "group"], filter=flt, limit=limit, batch_size=batch_size)
    )
    assert all(0 < b.num_rows <= batch_size for b in batches)
    want = expected(full, ["id", "group"], flt, limit)
    got = pa.Table.from_batches(batches, schema=want.schema)
    assert got.equals(want)


def test_scan_streams_many_batches(parquet_dir):
    src = open_source("parquet", str(parquet_dir / "f0.parquet"))
    batches = list(scan(src, batch_size=500))
    assert len(batches) == N // 500
    assert all(b.num_rows == 500 for b in batches)


def test_scan_is_lazy_generator(parquet_dir):
    src = open_source("parquet", str(parquet_dir))
    it = scan(src, batch_size=100)
    first = next(it)
    assert first.num_rows == 100
    it.close()


def corrupt_tail(src_path: pathlib.Path, dst_path: pathlib.Path, first_bad_group: int) -> None:
    """Overwrite the data pages of row groups >= first_bad_group with garbage."""
    md = pq.read_metadata(src_path)
    data = bytearray(src_path.read_bytes())
    for i in range(first_bad_group, md.num_row_groups):
        group = md.row_group(i)
        for c in range(group.num_columns):
            col = group.column(c)
            start = col.data_page_offset
            data[start : start + col.total_compressed_size] = b"\xff" * col.total_compressed_size
    dst_path.write_bytes(bytes(data))


def test_limit_stops_before_reading_later_row_groups(tmp_path):
    table = pa.table({"id": pa.array(range(100_000), pa.int64())})
    good = tmp_path / "good.parquet"
    pq.write_table(table, good, row_group_size=1000, compression="none", use_dictionary=False)
    bad = tmp_path / "bad.parquet"
    corrupt_tail(good, bad, first_bad_group=3)
    src = open_source("parquet", str(bad))
    # Reading everything hits the garbage, so the file really is broken...
    with pytest.raises(OSError, match="bad.parquet"):
        collect(scan(src))
    # ...but a small limit stops after the first row group, with no readahead into
    # the broken ones (repeated: readahead races would make this flaky).
    for _ in range(10):
        out = list(scan(src, limit=10))
        assert [b.num_rows for b in out] == [10]
        assert out[0].column("id").to_pylist() == list(range(10))
    # Same with a filter first satisfied in the second row group.
    out = list(scan(src, filter=pc.field("id") >= 1500, limit=3, batch_size=1000))
    assert pa.Table.from_batches(out).column("id").to_pylist() == [1500, 1501, 1502]


def test_parquet_scan_memory_is_bounded(tmp_path):
    n = 1_000_000
    path = tmp_path / "big.parquet"
    table = pa.table({"a": pa.array(range(n), pa.int64()), "b": pa.array(range(n), pa.float64())})
    pq.write_table(table, path, row_group_size=20_000, compression="none")
    del table
    gc.collect()
    base = pa.total_allocated_bytes()
    peak = rows = 0
    for batch in scan(open_source("parquet", str(path)), batch_size=10_000):
        peak = max(peak, pa.total_allocated_bytes() - base)
        rows += batch.num_rows
        time.sleep(0.001)  # a slow consumer lets any readahead pile up
    assert rows == n
    # About one 320 KB row group plus a batch; reading the whole 16 MB file ahead
    # (what a single whole-file pyarrow scanner does) would fail this.
    assert peak < path.stat().st_size / 4


def test_filter_prunes_row_groups_by_statistics(tmp_path):
    table = pa.table({"id": pa.array(range(100_000), pa.int64())})
    good = tmp_path / "good.parquet"
    pq.write_table(table, good, row_group_size=1000, compression="none", use_dictionary=False)
    bad = tmp_path / "bad.parquet"
    corrupt_tail(good, bad, first_bad_group=60)
    src = open_source("parquet", str(bad))
    # Row groups >= 60 hold ids >= 60000; their min/max stats exclude them, so the
    # garbage pages are never decoded.
    got = collect(scan(src, filter=pc.field("id") < 1500))
    assert got.column("id").to_pylist() == list(range(1500))


def test_unknown_column_and_bad_arguments(parquet_dir):
    src = open_source("parquet", str(parquet_dir))
    with pytest.raises(KeyError, match="nope"):
        scan(src, columns=["id", "nope"])
    with pytest.raises(ValueError, match="limit"):
        scan(src, limit=-1)
    with pytest.raises(ValueError, match="twice"):
        scan(src, columns=["id", "id"])
    assert list(scan(src, limit=0)) == []


def test_open_source_errors_at_plan_time(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        open_source("parquet", str(tmp_path / "missing.parquet"))
    (tmp_path / "a.csv").write_text("a\n1\n")
    with pytest.raises(ValueError, match="Unknown option 'delimeter'"):
        open_source("csv", str(tmp_path / "a.csv"), delimeter=";")
    with pytest.raises(ValueError, match="Unknown format"):
        open_source("xlsx", str(tmp_path / "a.csv"))


# ---- schema unification ----------------------------------------------------------


def test_files_are_unified_to_first_schema(tmp_path):
    pq.write_table(
        pa.table({"a": pa.array([1, 2], pa.int64()), "b": ["x", "y"]}), tmp_path / "1.parquet"
    )
    # Narrower int type, missing column b, extra column c.
    pq.write_table(
        pa.table({"c": [True], "a": pa.array([3], pa.int32())}), tmp_path / "2.parquet"
    )
    # Same type as the first file but missing column b.
    pq.write_table(pa.table({"a": pa.array([4], pa.int64())}), tmp_path / "3.parquet")
    src = open_source("parquet", str(tmp_path))
    batches = list(scan(src))
    want = pa.schema([("a", pa.int64()), ("b", pa.string())])
    assert all(b.schema.equals(want, check_metadata=True) for b in batches)
    assert collect(batches).to_pylist() == [
        {"a": 1, "b": "x"},
        {"a": 2, "b": "y"},
        {"a": 3, "b": None},
        {"a": 4, "b": None},
    ]
    # Filters still apply to the other files, including on their missing column.
    got = collect(scan(src, columns=["a"], filter=pc.field("a") >= 2))
    assert got.to_pylist() == [{"a": 2}, {"a": 3}, {"a": 4}]
    assert collect(scan(src, filter=pc.field("b").is_null())).to_pylist() == [
        {"a": 3, "b": None},
        {"a": 4, "b": None},
    ]


def test_uncastable_file_names_both_files(tmp_path):
    pq.write_table(pa.table({"a": pa.array([1], pa.int64())}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"a": ["not a number"]}), tmp_path / "2.parquet")
    src = open_source("parquet", str(tmp_path))
    with pytest.raises(SchemaMismatchError) as info:
        collect(scan(src))
    msg = str(info.value)
    assert "1.parquet" in msg and "2.parquet" in msg and "'a'" in msg


def test_explicit_schema_option(tmp_path):
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int32())}), tmp_path / "1.parquet")
    schema = pa.schema([("a", pa.float64()), ("z", pa.string())])
    src = open_source("parquet", str(tmp_path), schema=schema)
    assert source_schema(src) == schema
    assert collect(scan(src)).to_pylist() == [{"a": 1.0, "z": None}, {"a": 2.0, "z": None}]


# ---- csv -------------------------------------------------------------------------


def test_csv_round_trip_and_pushdown(tmp_path):
    table = sample_table(3000)
    for i, part in enumerate([table.slice(0, 1000), table.slice(1000, 2000)]):
        pacsv.write_csv(part, tmp_path / f"p{i}.csv")
    src = open_source("csv", str(tmp_path / "*.csv"), block_size=16_384)
    assert source_schema(src) == table.schema
    assert estimate_rows(src) is None
    batches = list(scan(src, batch_size=256))
    assert len(batches) > 10  # streamed block by block, not one big table
    assert all(b.num_rows <= 256 for b in batches)
    assert collect(batches).equals(table)
    flt = (pc.field("group") == "g2") & (pc.field("score") > 100)
    got = collect(scan(src, columns=["id"], filter=flt, limit=40))
    assert got.equals(expected(table, ["id"], flt, 40))


def test_csv_options(tmp_path):
    (tmp_path / "x.tsv").write_text("1|a\n2|NA\n")
    src = open_source(
        "csv",
        str(tmp_path / "x.tsv"),
        delimiter="|",
        has_header=False,
        column_names=["n", "s"],
        null_values=["NA"],
    )
    assert collect(scan(src)).to_pylist() == [{"n": 1, "s": "a"}, {"n": 2, "s": None}]
    src = open_source("csv", str(tmp_path / "x.tsv"), delimiter="|", has_header=False)
    assert source_schema(src).names == ["f0", "f1"]


def test_headerless_csv_with_explicit_schema(tmp_path):
    (tmp_path / "x.csv").write_text("1,a\n2,b\n")
    schema = pa.schema([("n", pa.int16()), ("s", pa.string())])
    src = open_source("csv", str(tmp_path / "x.csv"), has_header=False, schema=schema)
    got = collect(scan(src))
    assert got.schema == schema
    assert got.to_pylist() == [{"n": 1, "s": "a"}, {"n": 2, "s": "b"}]


def test_csv_gzip(tmp_path):
    with gzip.open(tmp_path / "a.csv.gz", "wt") as f:
        f.write("a,b\n1,x\n2,y\n")
    src = open_source("csv", str(tmp_path / "a.csv.gz"))
    assert collect(scan(src)).to_pylist() == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


def test_csv_files_share_first_files_types(tmp_path):
    (tmp_path / "1.csv").write_text("a,b\n1,x\n")
    (tmp_path / "2.csv").write_text("b,a\ny,2\n")  # other column order
    (tmp_path / "3.csv").write_text("a\n3\n")  # missing column
    src = open_source("csv", str(tmp_path))
    batches = list(scan(src))
    assert all(b.schema == source_schema(src) for b in batches)
    assert collect(batches).to_pylist() == [
        {"a": 1, "b": "x"},
        {"a": 2, "b": "y"},
        {"a": 3, "b": None},
    ]


def test_csv_type_conflict_names_both_files(tmp_path):
    (tmp_path / "1.csv").write_text("a\n1\n")
    (tmp_path / "2.csv").write_text("a\nhello\n")
    src = open_source("csv", str(tmp_path))
    with pytest.raises(UnreadableFileError) as info:  # an InferframeError naming the file, not pyarrow's own
        collect(scan(src))
    msg = str(info.value)
    assert "2.csv" in msg and "1.csv" in msg and "schema=" in msg


# ---- json ------------------------------------------------------------------------


def test_json_lines_round_trip_nested(tmp_path):
    rows = [
        {"id": i, "meta": {"tag": f"t{i % 3}", "w": i / 2}, "toks": list(range(i % 4))}
        for i in range(2000)
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:1200]))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[1200:]))
    src = open_source("json", str(tmp_path), block_size=8192)
    schema = source_schema(src)
    assert schema.field("meta").type == pa.struct([("tag", pa.string()), ("w", pa.float64())])
    batches = list(scan(src))
    assert len(batches) > 2
    got = collect(batches).to_pylist()
    assert got == rows
    flt = pc.field("meta", "tag") == "t1"
    got = collect(scan(src, columns=["id"], filter=flt, limit=5)).to_pylist()
    assert got == [{"id": i} for i in (1, 4, 7, 10, 13)]


# ---- glob listing ----------------------------------------------------------------


def test_glob_listing(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"1234")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.jpg").write_bytes(b"12")
    (tmp_path / ".c.jpg").write_bytes(b"1")
    src = open_source("glob", str(tmp_path / "**" / "*.jpg"))
    assert source_schema(src) == GLOB_SCHEMA
    assert estimate_rows(src) == 2
    table = collect(scan(src))
    assert table.schema == GLOB_SCHEMA
    assert table.column("path").to_pylist() == [
        str(tmp_path / "a.jpg"),
        str(tmp_path / "sub" / "b.jpg"),
    ]
    assert table.column("size").to_pylist() == [4, 2]
    mtime = table.column("mtime")[0].as_py()
    assert abs(mtime.timestamp() - os.stat(tmp_path / "a.jpg").st_mtime) < 1e-3
    small = collect(scan(src, columns=["path"], filter=pc.field("size") < 3))
    assert small.to_pylist() == [{"path": str(tmp_path / "sub" / "b.jpg")}]


# ---- pickling and other filesystems ----------------------------------------------


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_pickled_source_scans_the_same(parquet_dir, dumps):
    src = open_source("parquet", str(parquet_dir))
    clone = pickle.loads(dumps(src))
    assert clone == src
    flt = pc.field("id") > 14_000
    assert collect(scan(clone, filter=flt)).equals(collect(scan(src, filter=flt)))


def test_pickled_csv_source_keeps_options(tmp_path):
    (tmp_path / "x.csv").write_text("1;2\n")
    src = open_source("csv", str(tmp_path / "x.csv"), delimiter=";", has_header=False)
    clone = pickle.loads(pickle.dumps(src))
    assert collect(scan(clone)).to_pylist() == [{"f0": 1, "f1": 2}]


def test_fsspec_memory_parquet():
    import fsspec
    mem = fsspec.filesystem("memory")
    base = f"/io-test-{uuid.uuid4().hex}"
    sink = pa.BufferOutputStream()
    pq.write_table(sample_table(100), sink)
    mem.pipe(f"{base}/x.parquet", sink.getvalue().to_pybytes())
    try:
        src = open_source("parquet", f"memory://{base}/*.parquet")
        assert estimate_rows(src) == 100
        got = collect(scan(pickle.loads(pickle.dumps(src)), columns=["id"], limit=3))
        assert got.column("id").to_pylist() == [0, 1, 2]
    finally:
        mem.rm(base, recursive=True)


def test_scan_source_is_validated():
    with pytest.raises(ValueError, match="format"):
        ScanSource("xml", (), None)
