"""One table of file suffixes to readers (inferframe.io.formats), shared by the CLI's INPUT,
classify_text(examples=) and evaluate(golden=): a file one of them reads, the others read too."""

import ast
import gzip
import json
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import inferframe as ifr
from inferframe import cli
from inferframe.ai.examples import load_examples
from inferframe.errors import PlanError
from inferframe.io.formats import READERS, SUFFIXES, file_spec

ROWS = [{"id": 1, "text": "great film", "label": "pos", "gold": "pos"},
        {"id": 2, "text": "dull plot", "label": "neg", "gold": "neg"},
        {"id": 3, "text": "loved it", "label": "pos", "gold": "neg"}]


def _write(path: pathlib.Path, kind: str) -> pathlib.Path:
    if kind == "parquet":
        pq.write_table(pa.Table.from_pylist(ROWS), path)
    elif kind in ("csv", "tsv"):
        sep = "\t" if kind == "tsv" else ","
        text = sep.join(ROWS[0]) + "\n" + "".join(sep.join(str(v) for v in r.values()) + "\n" for r in ROWS)
        (gzip.open(path, "wt") if path.suffix == ".gz" else open(path, "w")).write(text)
    elif kind == "json_array":
        path.write_text(json.dumps(ROWS, indent=1))
    else:
        text = "".join(json.dumps(r) + "\n" for r in ROWS)
        (gzip.open(path, "wt") if path.suffix == ".gz" else open(path, "w")).write(text)
    return path


# every suffix of the table, compressed inputs, a JSON array and a directory
CASES = [(name, reader) for name, reader in SUFFIXES.items()] + [
    (".csv.gz", "csv"), (".tsv.gz", "tsv"), (".jsonl.gz", "json"), (".json", "json_array"), ("/", "csv")]


@pytest.mark.parametrize("suffix,kind", CASES, ids=[f"{s}-{k}" for s, k in CASES])
def test_examples_golden_and_cli_read_the_same_files(tmp_path, monkeypatch, suffix, kind):
    if suffix == "/":  # a directory read by the reader its files' names ask for; other files skipped
        path = tmp_path / "data"
        path.mkdir()
        _write(path / "part-0.csv", kind)
        (path / "notes.txt").write_text("not data")
    else:
        path = _write(tmp_path / f"rows{suffix}", kind)

    assert sorted(load_examples(path, ["pos", "neg"], seed=None)) == [("dull plot", "neg"), ("great film", "pos")]

    df = ifr.from_pydict({"id": [1, 2, 3], "label": ["pos", "neg", "pos"]})
    ev = ifr.evaluate(df, "label", "gold", golden=path, on="id")
    assert (ev.rows, ev.accuracy) == (3, 2 / 3)

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result = CliRunner().invoke(cli.app, ["estimate", str(path), "-c", "text", "--provider", "openai",
                                          "--model", "gpt-5-mini", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls"][0]["rows"] == 3


def test_a_name_that_tells_no_format_fails_alike(tmp_path):
    path = tmp_path / "rows.xlsx"
    path.write_text("id,text,label,gold\n1,a,pos,pos\n")
    with pytest.raises(PlanError, match=r"examples: cannot tell the format of .*rows.xlsx.* use a \.csv or \.parquet"):
        load_examples(path, ["pos", "neg"])
    with pytest.raises(PlanError, match=r"golden=.*cannot tell the format of .*rows.xlsx.* use a \.csv or \.parquet"):
        ifr.evaluate(ifr.from_pydict({"id": [1], "label": ["pos"]}), golden=path, on="id")
    result = CliRunner().invoke(cli.app, ["estimate", str(path), "-c", "text", "--provider", "openai",
                                          "--model", "gpt-5-mini"])
    assert result.exit_code == 2
    assert "cannot tell the format of" in result.stderr and "use a .csv or .parquet" in result.stderr
    assert "--format" in result.stderr  # the CLI's own way out
    assert file_spec(path, "csv").reader == "csv"  # a named reader wins over the name


def test_no_other_module_maps_suffixes_to_readers():
    """The table lives in io/formats.py only: no other dict in src/ maps a file suffix to a reader."""
    root = pathlib.Path(ifr.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        if path == root / "io" / "formats.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Dict):
                continue
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            readers = [v for v in node.values
                       if isinstance(v, ast.Constant) and v.value in READERS
                       or isinstance(v, (ast.Name, ast.Attribute)) and "read_" in ast.unparse(v)]
            if any(k.startswith(".") for k in keys) and readers:
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
