"""DataFrame.write_lance(): a real LanceDB table, vector search on it, modes, streaming, missing package."""

import sys

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import DataType, col


def lancedb():
    """The lancedb module, imported by the tests that read what was written (not at collection: 1.7 s in each
    test process, which only one of them needs)."""
    import lancedb as module

    return module


def _embeddings(n: int = 40, d: int = 16, seed: int = 0) -> ifr.DataFrame:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, d)).astype(np.float32)
    return ifr.from_pydict({"id": list(range(n)), "text": [f"doc {i}" for i in range(n)], "vec": m.tolist()}).with_column(
        "vec", col("vec").cast(DataType.embedding(DataType.float32(), d))
    )


def test_vectors_are_searchable(tmp_path):
    df = _embeddings().into_batches(7)
    out = df.write_lance(tmp_path / "db", table="docs")
    path = out.to_pydict()["path"]
    assert len(path) == 1 and path[0].endswith("docs.lance")
    tbl = lancedb().connect(str(tmp_path / "db")).open_table("docs")
    assert tbl.count_rows() == 40
    assert tbl.schema.field("vec").type == pa.list_(pa.float32(), 16)
    rows = df.to_pydict()
    for i in (0, 17, 39):
        hits = tbl.search(rows["vec"][i]).limit(3).to_arrow().to_pydict()
        assert hits["id"][0] == i and hits["text"][0] == f"doc {i}"
        assert hits["_distance"][0] == pytest.approx(0.0, abs=1e-4)


def test_create_refuses_an_existing_table_and_keeps_it(tmp_path):
    _embeddings(5).write_lance(tmp_path, table="t")
    with pytest.raises(ValueError, match=r"table 't' already exists.*mode='overwrite'.*mode='append'"):
        _embeddings(3).write_lance(tmp_path, table="t", mode="create")
    assert lancedb().connect(str(tmp_path)).open_table("t").count_rows() == 5


def test_append_and_overwrite(tmp_path):
    _embeddings(5, seed=1).write_lance(tmp_path, table="t", mode="append")  # append creates a missing table
    _embeddings(4, seed=2).write_lance(tmp_path, table="t", mode="append")
    tbl = lancedb().connect(str(tmp_path)).open_table("t")
    assert tbl.count_rows() == 9
    assert sorted(tbl.to_arrow().column("id").to_pylist()) == sorted(list(range(5)) + list(range(4)))
    _embeddings(2, seed=3).write_lance(tmp_path, table="t", mode="overwrite")
    assert lancedb().connect(str(tmp_path)).open_table("t").to_arrow().column("id").to_pylist() == [0, 1]


def test_streams_batches_without_collecting(tmp_path, monkeypatch):
    def no_collect(*a, **k):
        raise AssertionError("write_lance must stream, not collect the frame")

    monkeypatch.setattr(ifr.DataFrame, "to_arrow", no_collect)
    monkeypatch.setattr(ifr.DataFrame, "collect", no_collect)
    _embeddings(50).into_batches(8).write_lance(tmp_path, table="s")
    assert lancedb().connect(str(tmp_path)).open_table("s").count_rows() == 50


def test_empty_frame_writes_an_empty_table_with_its_columns(tmp_path):
    _embeddings(5).where(col("id") > 100).write_lance(tmp_path, table="e")
    tbl = lancedb().connect(str(tmp_path)).open_table("e")
    assert tbl.count_rows() == 0 and tbl.schema.names == ["id", "text", "vec"]


def test_bad_mode_and_missing_package(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="mode must be one of create, overwrite, append"):
        _embeddings(1).write_lance(tmp_path, table="t", mode="replace")
    monkeypatch.setitem(sys.modules, "lancedb", None)  # import lancedb now raises ImportError
    with pytest.raises(ImportError, match=r'pip install "inferframe\[lance\]"'):
        _embeddings(1).write_lance(tmp_path, table="t")


def test_extension_columns_are_stored_as_their_storage(tmp_path):
    df = ifr.from_pydict({"b": [b"abc", None]}).with_column("img", col("b").cast(DataType.image()))
    df.write_lance(tmp_path, table="i")
    got = lancedb().connect(str(tmp_path)).open_table("i").to_arrow()
    assert got.schema.field("img").type == pa.binary()
    assert got.column("img").to_pylist() == [b"abc", None]
