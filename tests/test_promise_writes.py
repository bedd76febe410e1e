"""The README's "Writing" promises, each test named after its sentence (issue 41 item 5).

Writes never silently replace: a directory that holds data is an error by default, before the plan
runs (so before any request is sent); ``mode="overwrite"`` replaces atomically and ``mode="append"``
adds parts that collide with nothing. A file in an input directory that is not data of the format
read is an error naming it, not a raw ``pyarrow.lib.ArrowInvalid``.
"""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import inferframe as ifr
from inferframe import cli, col
from inferframe.functions import prompt
from inferframe.io import write_dataset
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-writes-test-1"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY)) as s:
        yield s


def frame(values):
    return ifr.from_pydict({"a": list(values)})


def write(df, fmt, root, **kw):
    return getattr(df, f"write_{fmt}")(str(root), **kw).to_pydict()["path"]


def read(fmt, root):
    return sorted(getattr(ifr, f"read_{fmt}")(str(root)).to_pydict()["a"])


def snapshot(root):
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_promise_a_write_to_a_directory_that_holds_data_is_an_error_by_default(tmp_path, fmt):
    root = tmp_path / "out"
    write(frame([1, 2]), fmt, root)
    before = snapshot(root)
    with pytest.raises(ifr.OutputExistsError) as info:
        write(frame([3]), fmt, root)
    message = str(info.value)
    assert str(root) in message  # the directory
    assert next(iter(before)) in message  # the files found
    assert 'mode="overwrite"' in message and 'mode="append"' in message  # the fix
    assert isinstance(info.value, ifr.InferframeError) and isinstance(info.value, FileExistsError)
    assert snapshot(root) == before  # nothing written, nothing removed
    assert read(fmt, root) == [1, 2]


def test_promise_an_empty_directory_or_one_holding_only_hidden_files_is_written_to(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    (root / "_SUCCESS").write_text("")
    (root / ".keep").write_text("")
    write(frame([1]), "parquet", root)
    assert read("parquet", root) == [1]


def test_promise_the_check_comes_before_any_request_is_sent(tmp_path, sim):
    root = tmp_path / "out"
    write(frame([0]), "parquet", root)
    df = ifr.from_pydict({"q": ["one", "two", "three"]}).with_column(
        "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini"))
    with pytest.raises(ifr.OutputExistsError):
        df.write_parquet(str(root))
    assert sim.stats()["total_requests"] == 0
    df.write_parquet(str(root), mode="overwrite")
    assert sim.stats()["total_requests"] == 3


def test_promise_a_rerun_into_its_directory_with_overwrite_sends_nothing(tmp_path, sim):
    df = ifr.from_pydict({"q": ["one", "two"]}).with_column(
        "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini"))
    first = df.write_parquet(str(tmp_path / "out")).to_pydict()["path"]
    again = df.write_parquet(str(tmp_path / "out"), mode="overwrite").to_pydict()["path"]
    assert first == again and sim.stats()["total_requests"] == 2
    assert sorted(ifr.read_parquet(str(tmp_path / "out")).to_pydict()["a"]) == ["sim answer: one", "sim answer: two"]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_promise_overwrite_replaces_the_data_atomically(tmp_path, fmt):
    root = tmp_path / "out"
    write(frame(range(10)), fmt, root, rows_per_file=3)  # four parts
    (root / "notes.md").write_text("kept")  # not a part: never touched

    def failing():
        yield pa.record_batch({"a": [100, 101]})
        raise RuntimeError("the source broke midway")

    with pytest.raises(RuntimeError, match="midway"):
        write_dataset(failing(), pa.schema([("a", pa.int64())]), str(root), fmt, mode="overwrite")
    assert len([p for p in root.iterdir() if p.name.startswith("part-")]) == 4  # the old parts are all there
    write(frame([7, 8]), fmt, root, mode="overwrite")
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith("part-")) == ["notes.md"]
    assert len([p for p in root.iterdir() if p.name.startswith("part-")]) == 1
    assert sorted(getattr(ifr, f"read_{fmt}")(f"{root}/part-*").to_pydict()["a"]) == [7, 8]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_promise_append_adds_parts_that_replace_nothing(tmp_path, fmt):
    root = tmp_path / "out"
    first = write(frame(range(5)), fmt, root, rows_per_file=2)
    before = snapshot(root)
    second = write(frame([50, 51]), fmt, root, mode="append")
    assert not set(map(os.path.basename, second)) & set(before)
    assert {name: data for name, data in snapshot(root).items() if name in before} == before
    assert read(fmt, root) == [0, 1, 2, 3, 4, 50, 51]
    assert len(first) == 3 and [os.path.basename(p) for p in second] == [f"part-00003.{'jsonl' if fmt == 'json' else fmt}"]


def test_promise_a_bad_mode_is_an_error_naming_the_modes(tmp_path):
    with pytest.raises(ifr.PlanError, match="'error', 'overwrite', 'append'"):
        frame([1]).write_parquet(str(tmp_path / "out"), mode="replace")


def cli_sql(root, *extra):
    query = f"select a from '{root}/in.parquet'"
    return CliRunner().invoke(cli.app, ["sql", query, "--out", str(root / "out"), *extra])


def test_promise_the_command_line_takes_the_same_mode(tmp_path):
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "in.parquet")
    assert cli_sql(tmp_path).exit_code == 0
    again = cli_sql(tmp_path)
    assert again.exit_code == 2
    assert "already holds data" in again.stderr and "--mode overwrite" in again.stderr and "--mode append" in again.stderr
    assert "Traceback" not in again.output
    assert cli_sql(tmp_path, "--mode", "append").exit_code == 0
    assert read("parquet", tmp_path / "out") == [1, 1, 2, 2]
    assert cli_sql(tmp_path, "--mode", "overwrite").exit_code == 0
    assert read("parquet", tmp_path / "out") == [1, 2]


def test_promise_the_prompt_command_refuses_before_sending(tmp_path, sim, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (tmp_path / "r.csv").write_text("review\ngood\nbad\n")
    out = tmp_path / "out"
    args = ["prompt", str(tmp_path / "r.csv"), "-c", "review", "--provider", "openai", "--base-url", sim.base_url,
            "--model", "gpt-5-mini", "--out", str(out)]
    pq.write_table(pa.table({"x": [1]}), tmp_path / "keep.parquet")
    out.mkdir()
    (out / "part-00000.parquet").write_bytes((tmp_path / "keep.parquet").read_bytes())
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 2 and "--mode overwrite" in result.stderr, result.output
    assert sim.stats()["total_requests"] == 0
    result = CliRunner().invoke(cli.app, [*args, "--mode", "overwrite"])
    assert result.exit_code == 0, result.output
    assert sim.stats()["total_requests"] == 2


@pytest.mark.parametrize("name", ["README.txt", "zz-notes.md"])
def test_promise_a_file_that_is_not_parquet_is_an_error_naming_it(tmp_path, name, sim):
    root = tmp_path / "data"
    write(frame([1, 2]), "parquet", root)
    (root / name).write_text("these are notes, not data")
    with pytest.raises(ifr.InferframeError) as info:
        df = ifr.read_parquet(str(root)).with_column(
            "b", prompt(col("a").cast(ifr.DataType.string()), provider="openai", base_url=sim.base_url, api_key=KEY,
                        model="gpt-5-mini"))
        df.collect()
    assert not isinstance(info.value, pa.ArrowException)
    assert name in str(info.value) and "not a Parquet file" in str(info.value)
    assert sim.stats()["total_requests"] == 0  # found before any request


def test_promise_files_named_with_a_leading_dot_or_underscore_are_skipped(tmp_path):
    root = tmp_path / "data"
    write(frame([1, 2]), "parquet", root)
    (root / "_SUCCESS").write_text("")
    (root / ".part-00000.parquet.crc").write_bytes(b"\x00crc")
    assert read("parquet", root) == [1, 2]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_promise_a_csv_or_json_directory_with_a_file_of_another_format_is_an_error_naming_it(tmp_path, fmt):
    root = tmp_path / "data"
    write(frame([1, 2]), fmt, root)
    pq.write_table(pa.table({"a": [3]}), root / "stray.parquet")
    with pytest.raises(ifr.InferframeError) as info:
        getattr(ifr, f"read_{fmt}")(str(root)).collect()
    assert not isinstance(info.value, pa.ArrowException)
    assert "stray.parquet" in str(info.value)
