"""Writing: round trips, file splitting, JSON encoding, modes, and atomicity on failure."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import os
import pathlib
import uuid

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from inferframe.errors import PathNotWritableError
from inferframe.io import open_source, resolve_paths, scan, source_schema, write_dataset
from inferframe.io.writers import TMP_PREFIX

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])


def batches(n_rows: int, batch_rows: int = 100):
    for start in range(0, n_rows, batch_rows):
        ids = list(range(start, min(n_rows, start + batch_rows)))
        yield pa.record_batch(
            [
                pa.array(ids, pa.int64()),
                pa.array([f"n{i}" for i in ids]),
                pa.array([i / 4 for i in ids]),
            ],
            schema=SCHEMA,
        )


def listing(root: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def read_back(root: pathlib.Path, format: str) -> pa.Table:
    src = open_source(format, str(root / "part-*"))
    return pa.Table.from_batches(list(scan(src)), schema=source_schema(src))


@pytest.mark.parametrize(
    ("format", "ext"), [("parquet", ".parquet"), ("csv", ".csv"), ("json", ".jsonl")]
)
def test_round_trip_and_file_splitting(tmp_path, format, ext):
    root = tmp_path / "out"
    paths = write_dataset(batches(1050, 100), SCHEMA, str(root), format, rows_per_file=400)
    assert paths == [str(root / f"part-{i:05d}{ext}") for i in range(3)]
    assert listing(root) == [f"part-{i:05d}{ext}" for i in range(3)]
    table = read_back(root, format)
    want = pa.Table.from_batches(list(batches(1050)))
    assert table.equals(want)
    per_file = [sum(b.num_rows for b in scan(open_source(format, p))) for p in paths]
    assert per_file == [400, 400, 250]


def test_exact_multiple_does_not_add_empty_file(tmp_path):
    paths = write_dataset(batches(800, 100), SCHEMA, str(tmp_path), "parquet", rows_per_file=400)
    assert [pq.read_metadata(p).num_rows for p in paths] == [400, 400]


def test_parquet_row_groups_are_not_one_per_small_batch(tmp_path):
    (path,) = write_dataset(batches(5000, 10), SCHEMA, str(tmp_path), "parquet")
    assert pq.read_metadata(path).num_row_groups == 1


def test_compression(tmp_path):
    for format in ("csv", "json"):
        root = tmp_path / format
        (path,) = write_dataset(batches(300), SCHEMA, str(root), format, compression="gzip")
        assert path.endswith(".gz")
        assert pathlib.Path(path).read_bytes()[:2] == b"\x1f\x8b"
        assert read_back(root, format).num_rows == 300
    (path,) = write_dataset(
        batches(300), SCHEMA, str(tmp_path / "pq"), "parquet", compression="zstd"
    )
    assert pq.read_metadata(path).row_group(0).column(0).compression == "ZSTD"


def test_empty_input_preserves_schema(tmp_path):
    (path,) = write_dataset(iter(()), SCHEMA, str(tmp_path / "pq"), "parquet")
    assert pq.read_schema(path).remove_metadata() == SCHEMA
    assert pq.read_metadata(path).num_rows == 0
    (path,) = write_dataset([], SCHEMA, str(tmp_path / "csv"), "csv")
    assert pathlib.Path(path).read_text().splitlines() == ['"id","name","score"']
    (path,) = write_dataset([], SCHEMA, str(tmp_path / "json"), "json")
    assert pathlib.Path(path).read_bytes() == b""


def test_json_encoding(tmp_path):
    schema = pa.schema(
        [
            ("s", pa.struct([("a", pa.int32()), ("tags", pa.list_(pa.string()))])),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("naive", pa.timestamp("ms")),
            ("d", pa.date32()),
            ("b", pa.binary()),
            ("f", pa.float64()),
            ("nested_f", pa.list_(pa.float64())),
            ("dec", pa.decimal128(10, 3)),
        ]
    )
    when = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc)
    batch = pa.record_batch(
        [
            pa.array([{"a": 1, "tags": ["x", "y"]}, None], schema.field("s").type),
            pa.array([when, None], schema.field("ts").type),
            pa.array([dt.datetime(2020, 1, 1, 0, 0, 1), None], schema.field("naive").type),
            pa.array([dt.date(2021, 2, 3), None], pa.date32()),
            pa.array([b"\x00\xffhi", None], pa.binary()),
            pa.array([math.nan, math.inf], pa.float64()),
            pa.array([[1.5, math.nan], []], schema.field("nested_f").type),
            pa.array([None, None], schema.field("dec").type),
        ],
        schema=schema,
    )
    (path,) = write_dataset([batch], schema, str(tmp_path), "json")
    lines = pathlib.Path(path).read_text().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["s"] == {"a": 1, "tags": ["x", "y"]}
    assert first["ts"] == "2024-05-06T07:08:09.123456+00:00"
    assert first["naive"] == "2020-01-01T00:00:01"
    assert first["d"] == "2021-02-03"
    assert base64.b64decode(first["b"]) == b"\x00\xffhi"
    assert first["f"] is None and second["f"] is None  # NaN / inf are not JSON
    assert first["nested_f"] == [1.5, None]
    assert second == {
        "s": None,
        "ts": None,
        "naive": None,
        "d": None,
        "b": None,
        "f": None,
        "nested_f": [],
        "dec": None,
    }


def test_csv_rejects_nested_columns_before_writing(tmp_path):
    schema = pa.schema([("v", pa.list_(pa.int64()))])
    with pytest.raises(ValueError, match="nested"):
        batch = pa.record_batch([pa.array([[1]])], schema=schema)
        write_dataset([batch], schema, str(tmp_path / "o"), "csv")
    assert not (tmp_path / "o").exists()


def test_batches_are_cast_or_rejected(tmp_path):
    narrow = pa.record_batch({"id": pa.array([1], pa.int32()), "name": ["a"], "score": [1.0]})
    (path,) = write_dataset([narrow], SCHEMA, str(tmp_path / "ok"), "parquet")
    assert pq.read_table(path).schema.field("id").type == pa.int64()
    wrong = pa.record_batch({"id": [1], "other": ["a"], "score": [1.0]})
    with pytest.raises(ValueError, match="columns"):
        write_dataset([wrong], SCHEMA, str(tmp_path / "bad"), "parquet")
    assert not (tmp_path / "bad").exists()


def test_accepts_tables(tmp_path):
    table = pa.Table.from_batches(list(batches(250)))
    write_dataset([table], SCHEMA, str(tmp_path), "parquet")
    assert read_back(tmp_path, "parquet").equals(table)


# ---- modes -----------------------------------------------------------------------


def test_overwrite_replaces_parts_and_keeps_other_files(tmp_path):
    write_dataset(batches(1000), SCHEMA, str(tmp_path), "parquet", rows_per_file=250)
    (tmp_path / "README.txt").write_text("keep me")
    assert len(list(tmp_path.glob("part-*"))) == 4
    write_dataset(batches(300), SCHEMA, str(tmp_path), "parquet", rows_per_file=250, mode="overwrite")
    assert listing(tmp_path) == ["README.txt", "part-00000.parquet", "part-00001.parquet"]
    assert read_back(tmp_path, "parquet").num_rows == 300


def test_overwrite_removes_parts_of_other_formats(tmp_path):
    write_dataset(batches(10), SCHEMA, str(tmp_path), "csv")
    write_dataset(batches(10), SCHEMA, str(tmp_path), "parquet", mode="overwrite")
    assert listing(tmp_path) == ["part-00000.parquet"]


def test_append_numbers_after_existing_parts(tmp_path):
    write_dataset(batches(500), SCHEMA, str(tmp_path), "parquet", rows_per_file=250)
    paths = write_dataset(batches(100), SCHEMA, str(tmp_path), "parquet", mode="append")
    assert [os.path.basename(p) for p in paths] == ["part-00002.parquet"]
    assert read_back(tmp_path, "parquet").num_rows == 600


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        write_dataset([], SCHEMA, str(tmp_path), "parquet", mode="merge")
    with pytest.raises(ValueError, match="rows_per_file"):
        write_dataset([], SCHEMA, str(tmp_path), "parquet", rows_per_file=0)
    with pytest.raises(ValueError, match="format"):
        write_dataset([], SCHEMA, str(tmp_path), "xml")
    (tmp_path / "file").write_text("x")
    with pytest.raises(PathNotWritableError, match="it is a file"):  # an OSError, and inferframe's own
        write_dataset([], SCHEMA, str(tmp_path / "file"), "parquet")


# ---- streaming and atomicity -----------------------------------------------------


def test_writes_while_consuming_and_hides_partial_output(tmp_path):
    root = tmp_path / "out"
    seen = {}

    def source():
        for i, batch in enumerate(batches(1000, 100)):
            if i == 7:
                # Mid-write: earlier files already exist (streaming) but only in the
                # hidden temp dir, invisible to readers of root.
                tmp_dirs = [p for p in root.iterdir() if p.name.startswith(TMP_PREFIX)]
                seen["tmp_files"] = [f.name for d in tmp_dirs for f in d.iterdir()]
                seen["visible"] = [p.name for p in root.iterdir() if not p.name.startswith(".")]
                with pytest.raises(FileNotFoundError):
                    resolve_paths(str(root))
            yield batch

    write_dataset(source(), SCHEMA, str(root), "parquet", rows_per_file=200)
    assert seen["visible"] == []
    assert "part-00002.parquet" in seen["tmp_files"]
    assert listing(root) == [f"part-{i:05d}.parquet" for i in range(5)]


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_failure_midway_leaves_existing_output_untouched(tmp_path, error, format):
    root = tmp_path / "out"
    old_paths = write_dataset(batches(300), SCHEMA, str(root), format, rows_per_file=100)
    (root / "other.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in root.iterdir()}

    def failing():
        yield from batches(650, 50)
        raise error

    with pytest.raises(type(error)):
        write_dataset(failing(), SCHEMA, str(root), format, rows_per_file=100, mode="overwrite")
    after = {p.name: p.read_bytes() for p in root.iterdir()}
    assert after == before  # no temp dir, no new parts, old parts byte-identical
    assert len(old_paths) == 3


@pytest.mark.parametrize("error", [ValueError("bad batch"), KeyboardInterrupt()])
def test_failure_in_new_root_leaves_nothing(tmp_path, error):
    root = tmp_path / "new" / "out"

    def failing():
        yield from batches(500, 100)
        raise error

    with pytest.raises(type(error)):
        write_dataset(failing(), SCHEMA, str(root), "parquet", rows_per_file=100)
    assert not root.exists()


def test_failure_inside_writer_is_cleaned_up(tmp_path):
    # A value pyarrow's CSV writer rejects (invalid UTF-8 in a binary column).
    schema = pa.schema([("b", pa.binary())])
    good = pa.record_batch([pa.array([b"ok"] * 10)], schema=schema)
    bad = pa.record_batch([pa.array([b"\xff\xfe"])], schema=schema)
    with pytest.raises(pa.ArrowInvalid):
        write_dataset([good, good, bad], schema, str(tmp_path), "csv", rows_per_file=10)
    assert listing(tmp_path) == []


def test_fsspec_memory_round_trip():
    import fsspec
    base = f"memory:///io-test-{uuid.uuid4().hex}"
    try:
        paths = write_dataset(batches(120), SCHEMA, base, "json", rows_per_file=50)
        assert paths == [f"{base}/part-{i:05d}.jsonl" for i in range(3)]
        src = open_source("json", base)
        assert sum(b.num_rows for b in scan(src)) == 120
        leftovers = fsspec.filesystem("memory").ls(base[len("memory://") :])
        assert not [p for p in leftovers if TMP_PREFIX in p]
    finally:
        fsspec.filesystem("memory").rm(base[len("memory://"):], recursive=True)


def test_csv_header_and_values(tmp_path):
    (path,) = write_dataset(batches(2), SCHEMA, str(tmp_path), "csv")
    table = pacsv.read_csv(path)
    assert table.to_pylist() == [
        {"id": 0, "name": "n0", "score": 0.0},
        {"id": 1, "name": "n1", "score": 0.25},
    ]
