"""The ``inferframe`` command line, in process (typer's CliRunner) and as a real subprocess, against the simulator."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import inferframe as ifr
from inferframe import cli
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-cli-test-secret-42"
REVIEWS = ["great product", "awful", "ok I guess"]


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY, record_requests=True)) as s:
        yield s


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text("id,review\n" + "".join(f'{i},"{r}"\n' for i, r in enumerate(REVIEWS, 1)))
    return path


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def invoke(*args, input=None):
    return CliRunner().invoke(cli.app, [str(a) for a in args], input=input)


def openai(sim, *extra):
    return ["--provider", "openai", "--base-url", sim.base_url, "--model", "gpt-5-mini", *extra]


def one_line_error(result_or_text, code=None):
    text = result_or_text if isinstance(result_or_text, str) else result_or_text.stderr
    lines = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


# --- help -------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [[], ["prompt"], ["estimate"], ["embed"], ["cache"], ["cache", "stats"],
                                     ["cache", "clear"], ["cache", "path"], ["runs"], ["report"]])
def test_every_help_has_a_runnable_example(command):
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and "inferframe " in result.output.split("Example", 1)[1]


def test_root_help_documents_the_exit_codes():
    out = invoke("--help").output
    for code in ("0    ok", "1    the job ran but rows failed", "2    bad usage", "3    the service failed",
                 "130  interrupted"):
        assert code in out
    assert invoke("--version").output.strip() == f"inferframe {ifr.__version__}"


def test_no_arguments_shows_help_and_exits_2():
    result = invoke()
    assert result.exit_code == 2 and "Usage: inferframe" in result.output


# --- prompt -----------------------------------------------------------------------------------

def test_prompt_prints_the_first_rows_and_the_totals(sim, csv_file, key):
    result = invoke("prompt", csv_file, "--column", "review", *openai(sim))
    assert result.exit_code == 0, result.output
    for review in REVIEWS:
        assert f"sim answer: {review}" in result.stdout
    assert "done: 3 rows" in result.stderr and "0 errors" in result.stderr and "$" in result.stderr
    assert sim.stats()["total_requests"] == 3


def test_prompt_out_writes_parquet_and_a_rerun_sends_nothing(sim, csv_file, key, tmp_path):
    out = tmp_path / "out"
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--out", out, "--as", "label")
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.column_names == ["id", "review", "label", "label_error"]
    assert table.column("label").to_pylist() == [f"sim answer: {r}" for r in REVIEWS]
    assert not list(out.glob(".*"))  # the atomic writer left no temporary directory
    again = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--out", out, "--as", "label", "--mode", "overwrite")
    assert again.exit_code == 0 and "3 cached" in again.stderr
    assert sim.stats()["total_requests"] == 3


def test_prompt_options_reach_the_request(sim, csv_file, key, tmp_path):
    system = tmp_path / "system.txt"
    system.write_text("Be brief.\nVery brief.")
    result = invoke("prompt", csv_file, "--template", r"Review {id}:\n{review}", "--system-message", f"@{system}",
                    *openai(sim), "--max-tokens", "20", "--temperature", "0", "--limit", "2", "--cache", "off")
    assert result.exit_code == 0, result.output
    assert "sim answer: Review 1:" in result.stdout
    bodies = [r["body"] for r in sim.requests()]
    assert len(bodies) == 2
    body = bodies[0]
    assert body["model"] == "gpt-5-mini" and body["temperature"] == 0
    assert body["max_output_tokens"] == 20  # /responses: translated by the library
    assert body["instructions"] == "Be brief.\nVery brief."  # read from the @file
    assert body["input"] == "Review 1:\ngreat product"  # the template, \n a newline


def test_prompt_choices_and_return_format(sim, csv_file, key, tmp_path, monkeypatch):
    (tmp_path / "cli_models.py").write_text(
        "from pydantic import BaseModel\n\nclass Verdict(BaseModel):\n    positive: bool\n    reason: str\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "typed"
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--return-format", "cli_models:Verdict",
                    "--out", out)
    assert result.exit_code == 0, result.output
    answer = pq.read_table(out).schema.field("answer").type
    assert pa.types.is_struct(answer) and {f.name for f in answer} == {"positive", "reason"}
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--labels", "good,bad", "--out", out,
                    "--mode", "overwrite")
    assert result.exit_code == 0, result.output
    assert set(pq.read_table(out).column("answer").to_pylist()) <= {"good", "bad"}
    sys.modules.pop("cli_models", None)


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "json_array", "directory", "glob", "tsv"])
def test_prompt_reads_every_input_kind(sim, key, tmp_path, kind):
    rows = [{"id": i, "review": r} for i, r in enumerate(REVIEWS)]
    data = tmp_path / "data"
    data.mkdir()
    if kind in ("parquet", "directory", "glob"):
        pq.write_table(pa.Table.from_pylist(rows), data / "part-0.parquet")
        (data / "notes.txt").write_text("not data")
        path = {"parquet": data / "part-0.parquet", "directory": data, "glob": f"{data}/*.parquet"}[kind]
    elif kind == "jsonl":
        path = data / "rows.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif kind == "json_array":
        path = data / "rows.json"
        path.write_text(json.dumps(rows, indent=1))
    else:
        path = data / "rows.tsv"
        path.write_text("id\treview\n" + "".join(f"{r['id']}\t{r['review']}\n" for r in rows))
    result = invoke("prompt", path, "-c", "review", *openai(sim))
    assert result.exit_code == 0, result.output
    assert "sim answer: awful" in result.stdout


def test_format_overrides_the_extension(sim, key, tmp_path):
    path = tmp_path / "reviews.data"
    path.write_text("review\nfine\n")
    assert "cannot tell the format" in one_line_error(invoke("prompt", path, "-c", "review", *openai(sim)))
    result = invoke("prompt", path, "-c", "review", "--format", "csv", *openai(sim))
    assert result.exit_code == 0 and "sim answer: fine" in result.stdout


# --- exit codes -------------------------------------------------------------------------------

def test_failed_rows_exit_1_and_are_written(sim, csv_file, key, tmp_path):
    sim.configure(fail_rules=[{"match": "awful", "status": 400, "message": "bad thing"}])
    out = tmp_path / "out"
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--out", out)
    assert result.exit_code == 1, result.output
    assert "1 errors" in result.stderr
    assert "1 rows failed; see the answer_error column" in one_line_error(result)
    errors = pq.read_table(out).column("answer_error").to_pylist()
    assert errors[0] is None and errors[1]["kind"] == "bad_request"


def test_rows_not_sent_for_max_cost_exit_1(sim, key, tmp_path):
    path = tmp_path / "many.csv"
    path.write_text("review\n" + "".join(f"review number {i} with a few more words\n" for i in range(200)))
    result = invoke("prompt", path, "-c", "review", *openai(sim), "--max-cost", "0.00001", "--max-concurrency", "1")
    assert result.exit_code == 1, result.output
    assert "were not sent (--max-cost reached)" in one_line_error(result)
    assert sim.stats()["total_requests"] < 200


def test_strip_is_for_text_answers(sim, csv_file, key):
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--strip")
    assert result.exit_code == 0 and "sim answer: awful" in result.stdout
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--strip", "--labels", "a,b")
    assert result.exit_code == 2 and "--strip" in one_line_error(result)


@pytest.mark.parametrize("args, message", [
    (["-c", "nope"], "unknown column 'nope'"),
    (["--template", "{nope}: {review}"], "unknown column 'nope'"),
    ([], "--column NAME, or --template"),
    (["-c", "review", "--template", "{review}"], "not both"),
    (["-c", "review", "--bogus"], "No such option: --bogus"),
    (["-c", "review", "--max-tokens", "0"], "--max-tokens"),
    (["-c", "review", "--cache", "sometimes"], "cache='sometimes' is not accepted"),
    (["-c", "review", "--as", "id"], "already has a column 'id'"),
    (["-c", "review", "--return-format", "no_such_module_x:Model"], "cannot import no_such_module_x"),
    (["-c", "review", "--labels", "one"], "at least two"),
    (["-c", "review", "--api-key-env", "NO_SUCH_VAR_X"], "NO_SUCH_VAR_X is not set"),
])
def test_bad_usage_or_input_exits_2_in_one_line(sim, csv_file, key, args, message):
    result = invoke("prompt", csv_file, *openai(sim), *args)
    assert result.exit_code == 2, result.output
    assert message in one_line_error(result)
    assert sim.stats()["total_requests"] == 0


@pytest.mark.parametrize("args", [["-c", "reveiw"], ["--template", "Review: {reviw}"]])
def test_a_misspelt_column_gets_a_suggestion_as_in_the_library(sim, csv_file, key, args):
    result = invoke("prompt", csv_file, *openai(sim), *args)
    assert result.exit_code == 2, result.output
    line = one_line_error(result)
    assert "Did you mean 'review'?" in line and "The input has: id, review" in line, line
    assert sim.stats()["total_requests"] == 0


def test_missing_input_exits_2(tmp_path):
    for path in [tmp_path / "missing.csv", tmp_path / "nothing" / "*.parquet", tmp_path / "no_dir"]:
        result = invoke("prompt", path, "-c", "review")
        assert result.exit_code == 2, result.output
        one_line_error(result)


def test_a_key_is_never_an_option(sim, csv_file, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--api-key", KEY)
    assert result.exit_code == 2 and "--api-key-env" in one_line_error(result)
    assert KEY not in result.output
    monkeypatch.setenv("MY_TEAM_KEY", KEY)
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim), "--api-key-env", "MY_TEAM_KEY")
    assert result.exit_code == 0, result.output


def test_service_failure_exits_3_without_the_key(sim, csv_file, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-999")
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim))
    assert result.exit_code == 3, result.output
    line = one_line_error(result)
    assert "401" in line and "sk-wrong-key-999" not in result.output


def test_ctrl_c_exits_130(csv_file, key, sim, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ifr.DataFrame, "iter_batches", interrupted)
    result = invoke("prompt", csv_file, "-c", "review", *openai(sim))
    assert result.exit_code == 130 and "interrupted" in one_line_error(result)


# --- estimate ---------------------------------------------------------------------------------

def test_estimate_sends_nothing(sim, csv_file, key):
    # 16: the least OpenAI's /responses takes (a smaller cap is a PlanError, see tests/test_promise_stops.py)
    result = invoke("estimate", csv_file, "-c", "review", *openai(sim), "--max-tokens", "16")
    assert result.exit_code == 0, result.output
    assert "3 rows" in result.stdout and "nothing was sent" in result.stdout
    result = invoke("estimate", csv_file, "-c", "review", *openai(sim), "--max-tokens", "16", "--json")
    est = json.loads(result.stdout)
    assert est["calls"][0]["rows"] == 3 and est["calls"][0]["max_output_tokens"] == 48 and est["input_tokens"] > 0
    assert est["cost_usd"] > 0
    assert sim.stats()["total_requests"] == 0


def test_estimate_needs_no_key(csv_file, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = invoke("estimate", csv_file, "-c", "review", "--provider", "openai", "--model", "gpt-5-mini", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls"][0]["rows"] == 3


# --- embed ------------------------------------------------------------------------------------

def test_embed_writes_vectors(sim, csv_file, key, tmp_path):
    out = tmp_path / "vectors"
    result = invoke("embed", csv_file, "-c", "review", "--provider", "openai", "--base-url", sim.base_url,
                    "--model", "text-embedding-3-small", "--dimensions", "8", "--out", out)
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.num_rows == 3 and len(table.column("embedding")[0].as_py()) == 8
    assert sim.stats()["by_endpoint"].get("embeddings", 0) >= 1


def test_embed_needs_out_and_column(csv_file):
    result = invoke("embed", csv_file, "-c", "review")
    assert result.exit_code == 2 and "--out" in one_line_error(result)


# --- cache ------------------------------------------------------------------------------------

def test_cache_stats_clear_and_path(sim, csv_file, key, tmp_path):
    cache_dir = tmp_path / "my-cache"
    assert invoke("cache", "path", "--cache-dir", cache_dir).output.strip() == str(cache_dir)
    assert invoke("cache", "path").output.strip() == os.environ["INFERFRAME_CACHE_DIR"]
    empty = invoke("cache", "stats", "--cache-dir", cache_dir)
    assert empty.exit_code == 0 and "entries: 0" in empty.output and not cache_dir.exists()

    assert invoke("prompt", csv_file, "-c", "review", *openai(sim), "--cache-dir", cache_dir).exit_code == 0
    stats = invoke("cache", "stats", "--cache-dir", cache_dir)
    assert "entries: 3" in stats.output and str(cache_dir) in stats.output and "KiB" in stats.output

    refused = invoke("cache", "clear", "--cache-dir", cache_dir, input="n\n")
    assert refused.exit_code == 1 and "entries: 3" in invoke("cache", "stats", "--cache-dir", cache_dir).output
    cleared = invoke("cache", "clear", "--cache-dir", cache_dir, "--yes")
    assert cleared.exit_code == 0 and "deleted 3" in cleared.output
    assert "entries: 0" in invoke("cache", "stats", "--cache-dir", cache_dir).output
    # the answers are gone: the same job asks the server again
    assert invoke("prompt", csv_file, "-c", "review", *openai(sim), "--cache-dir", cache_dir).exit_code == 0
    assert sim.stats()["total_requests"] == 6


# --- run history ------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["runs"], ["report"], ["report", "some-run", "--out", "r.html"]])
def test_runs_and_report_without_run_history_exit_2(command, monkeypatch):
    monkeypatch.delattr(ifr, "runs", raising=False)
    monkeypatch.delattr(ifr, "report", raising=False)
    result = invoke(*command)
    assert result.exit_code == 2
    assert "no run history" in one_line_error(result)


def test_runs_lists_the_cli_jobs(sim, csv_file, key, tmp_path):
    assert invoke("runs").output.strip() == "no runs recorded yet"
    assert invoke("prompt", csv_file, "-c", "review", *openai(sim)).exit_code == 0
    listed = invoke("runs", "--json")
    assert listed.exit_code == 0, listed.output
    (run,) = json.loads(listed.stdout)
    assert run["rows"] == 3 and run["errors"] == 0 and "T" in run["started"]
    table = invoke("runs", "--limit", "1")
    assert table.exit_code == 0 and run["run_id"] in table.stdout and "gpt-5-mini" in table.stdout


def test_report_writes_html(sim, csv_file, key, tmp_path, monkeypatch):
    assert invoke("prompt", csv_file, "-c", "review", *openai(sim)).exit_code == 0
    out = tmp_path / "report.html"
    result = invoke("report", "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out) and "<html" in out.read_text().lower()
    unknown = invoke("report", "no-such-run", "--out", out)
    assert unknown.exit_code == 2
    one_line_error(unknown)


# --- as a program -----------------------------------------------------------------------------

def _program():
    script = Path(sys.executable).parent / "inferframe"
    return [str(script)] if script.exists() else [sys.executable, "-m", "inferframe.cli"]


def _run(args, program=None, env=None, **kw):
    full_env = {**os.environ, "OPENAI_API_KEY": KEY, **(env or {})}
    return subprocess.run([*(program or _program()), *map(str, args)], capture_output=True, text=True,
                          env=full_env, timeout=120, **kw)


def test_program_writes_parquet_and_exits_0(sim, csv_file, tmp_path):
    out = tmp_path / "out"
    proc = _run(["prompt", csv_file, "-c", "review", *openai(sim), "--out", out])
    assert proc.returncode == 0, proc.stderr
    assert "wrote 1 Parquet file" in proc.stderr and "done: 3 rows" in proc.stderr
    assert pq.read_table(out).column("answer").to_pylist()[1] == "sim answer: awful"


def test_python_dash_m_inferframe(sim, csv_file):
    proc = _run(["estimate", csv_file, "-c", "review", *openai(sim), "--json"],
                program=[sys.executable, "-m", "inferframe"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["calls"][0]["rows"] == 3
    assert sim.stats()["total_requests"] == 0


def test_program_exit_codes_1_2_3(sim, csv_file, tmp_path):
    sim.configure(fail_rules=[{"match": "awful", "status": 400, "message": "bad thing"}])
    failed = _run(["prompt", csv_file, "-c", "review", *openai(sim)])
    assert failed.returncode == 1, failed.stderr
    one_line_error(failed.stderr)
    missing = _run(["prompt", tmp_path / "missing.parquet", "-c", "review"])
    assert missing.returncode == 2 and "missing.parquet" in one_line_error(missing.stderr)
    usage = _run(["prompt", csv_file, "--colum", "review"])
    assert usage.returncode == 2
    one_line_error(usage.stderr)
    bad_key = _run(["prompt", csv_file, "-c", "review", *openai(sim)], env={"OPENAI_API_KEY": "sk-wrong"})
    assert bad_key.returncode == 3 and "sk-wrong" not in bad_key.stderr
    one_line_error(bad_key.stderr)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_program_ctrl_c_exits_130(sim, csv_file, tmp_path):
    sim.configure(latency_ms=60_000)
    proc = subprocess.Popen([*_program(), "prompt", str(csv_file), "-c", "review", *openai(sim), "--cache", "off"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OPENAI_API_KEY": KEY})
    try:
        deadline = time.monotonic() + 60
        while sim.stats()["total_requests"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sim.stats()["total_requests"] > 0
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
