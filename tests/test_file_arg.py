"""UDF parameters annotated ``inferframe.File`` receive File objects (seed 002's transcriber shape)."""

from __future__ import annotations

import os

import inferframe as ifr
from inferframe import DataType, col


@ifr.func
def first_line(f: ifr.File) -> str:
    with f.to_tempfile() as tmp:
        with open(tmp.name, "rb") as fh:
            return fh.readline().decode().strip()


@ifr.cls(use_process=True)
class Transcriber:
    def __init__(self, prefix: str = "#"):
        self.prefix = prefix

    @ifr.method(return_dtype=DataType.struct({
        "transcript": DataType.string(),
        "segments": DataType.list(DataType.struct({"start": DataType.float64(), "text": DataType.string()})),
    }))
    def transcribe(self, audio_file: ifr.File):
        with audio_file.to_tempfile() as tmp:
            lines = open(tmp.name).read().splitlines()
        segments = [{"start": float(i), "text": f"{self.prefix}{t}"} for i, t in enumerate(lines)]
        return {"transcript": " ".join(s["text"] for s in segments), "segments": segments}


def test_file_parameters_get_files_from_paths_and_bytes(tmp_path):
    paths = []
    for i in range(3):
        p = tmp_path / f"f{i}.txt"
        p.write_text(f"line {i}\nrest")
        paths.append(str(p))
    out = ifr.from_pydict({"p": paths}).select(first_line(col("p"))).to_pydict()["p"]
    assert out == ["line 0", "line 1", "line 2"]
    raw = ifr.from_pydict({"b": [b"bytes first\nsecond"]}).select(first_line(col("b"))).to_pydict()["b"]
    assert raw == ["bytes first"]
    f = ifr.File(paths[0])
    assert f.read() == b"line 0\nrest" and "f0.txt" in repr(f)
    with ifr.File(b"xyz").to_tempfile() as tmp:
        assert os.path.getsize(tmp.name) == 3


def test_seed_transcriber_shape_runs_in_a_worker_process(tmp_path):
    for i in range(4):
        (tmp_path / f"a{i}.txt").write_text(f"hello {i}\nworld")
    t = Transcriber(">")
    df = ifr.from_glob_path(str(tmp_path / "*.txt")).with_column("result", t.transcribe(col("path")))
    rows = sorted(df.select("path", "result").to_pylist(), key=lambda r: r["path"])
    assert [r["result"]["transcript"] for r in rows] == [f">hello {i} >world" for i in range(4)]
    assert rows[0]["result"]["segments"] == [{"start": 0.0, "text": ">hello 0"}, {"start": 1.0, "text": ">world"}]
