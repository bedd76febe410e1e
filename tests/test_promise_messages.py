"""Issue 41, item 6: warnings and explanations say the truth, at the user's line.

A warning points at the user's own line (here: this file), whichever thread found it (``ifr.sql``
reads DataFrames on DuckDB's threads); the command line prints it as its own ``warning:`` line.
Counts are of the rows actually answered, EXPLAIN names what runs, and the run report counts its
earlier runs one way. The simulator answers: the model's answers are not the point here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe.progress import TruncatedWarning
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-messages-test-key"
# Long enough that 16 output tokens cut every answer ("sim answer: " echoes the text).
LONG = " ".join(f"word{i}" for i in range(40))


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # SQL takes no key in the query's text
    with Simulator(SimulatorConfig(require_api_key=KEY, record_requests=True)) as s:
        yield s


def rows(n):
    return ifr.from_pydict({"id": list(range(n)), "stars": [i % 5 + 1 for i in range(n)],
                            "q": [f"{i} {LONG}" for i in range(n)]})


def cut_short(sim):
    return prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini",
                  use_chat_completions=True, max_tokens=16)


def sql_options(sim):
    return (f"provider => 'openai', base_url => '{sim.base_url}', model => 'gpt-5-mini', "
            "use_chat_completions => true, max_tokens => 16")


def truncation_warnings(record):
    return [w for w in record if issubclass(w.category, TruncatedWarning)]


# --- at the user's line ---------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["ifr.sql", "df.sql"])
def test_promise_a_sql_warning_points_at_the_users_line(sim, how):
    df = rows(6)
    query = f"select id, ai_complete(q, {sql_options(sim)}) as a from {{}} order by id"
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        if how == "ifr.sql":
            out = ifr.sql(query.format("t"), t=df).to_pydict()
        else:
            out = df.sql(query.format("self")).to_pydict()
    assert out["id"] == list(range(6))
    cut = truncation_warnings(record)
    # Before: threading.py (the executor's thread) or sys:1 (DuckDB's, with no Python frame below).
    assert cut and all(w.filename == __file__ for w in cut), [(w.filename, w.lineno) for w in cut]


def _program():
    script = Path(sys.executable).parent / "inferframe"
    return [str(script)] if script.exists() else [sys.executable, "-m", "inferframe.cli"]


def test_promise_the_cli_prints_a_warning_as_its_own_line(sim, tmp_path):
    csv = tmp_path / "reviews.csv"
    csv.write_text("id,review\n" + "".join(f'{i},"{i} {LONG}"\n' for i in range(3)))
    proc = subprocess.run([*_program(), "prompt", str(csv), "-c", "review", "--provider", "openai", "--base-url",
                           sim.base_url, "--model", "gpt-5-mini", "--max-tokens", "16"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OPENAI_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    cut = [line for line in proc.stderr.splitlines() if "cut off at max_tokens" in line]
    assert cut and all(line.startswith("warning: 3 of 3 answers") for line in cut), proc.stderr
    # Before: "/.../site-packages/typer/main.py:NNN: TruncatedWarning: 3 of 3 answers ..."
    assert "typer" not in proc.stderr and not re.search(r"\.py:\d+:", proc.stderr), proc.stderr


# --- counts of the rows answered ------------------------------------------------------------------

def test_promise_an_interrupted_run_counts_the_rows_it_answered(sim):
    """Every answer is cut at 16 tokens: a stopped run says N of N, as a whole run says 2,000 of 2,000."""
    df = rows(2000).with_column("a", cut_short(sim))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        stream = df.iter_rows()
        first = next(stream)
        stream.close()  # the consumer stops: the job is interrupted
    assert first["a"].startswith("sim answer: 0 word0")
    (cut,) = truncation_warnings(record)
    said = re.match(r"(\d+) of (\d+) answers of \S+ answered before the job stopped were cut off", str(cut.message))
    assert said is not None, str(cut.message)
    assert said.group(1) == said.group(2), str(cut.message)  # before: "128 of 734 answers ..."
    assert int(said.group(2)) <= sim.stats()["total_requests"]
    assert cut.filename == __file__


# --- EXPLAIN names what runs ----------------------------------------------------------------------

def test_promise_explain_names_the_cheap_filter_that_runs_first(sim):
    df = rows(20)
    query = f"SELECT id FROM reviews WHERE stars >= 4 AND ai_filter(q, 'The buyer is happy.', {sql_options(sim)}) LIMIT 1"
    text = "\n".join(ifr.sql("EXPLAIN " + query, reviews=df).to_pydict()["explain"])
    calls = text.split("== reviews: AI calls ==", 1)[1]
    # Before: "before the AI calls, DuckDB keeps: WHERE stars >= 4 AND TRUE" then "cheap filter run first: none".
    assert "cheap filter run first (by DuckDB, before the AI calls): WHERE (stars >= 4)" in calls, text
    assert "AND TRUE" not in calls and "cheap filter run first: none" not in calls, text
    assert sim.stats()["total_requests"] == 0
    ifr.sql(query, reviews=df).to_pydict()
    asked = [r["body"]["messages"][-1]["content"] for r in sim.requests()]
    stars = {int(m.group(1)) % 5 + 1 for m in (re.search(r"\b(\d+) word0", a) for a in asked) if m}
    assert asked and stars and stars <= {4, 5}, asked  # the filter did run first: no row under 4 stars was sent


# --- the run report counts its earlier runs one way -----------------------------------------------

def test_promise_the_report_counts_earlier_runs_one_way(sim, tmp_path):
    df = rows(300).with_column("a", cut_short(sim))
    stream = df.iter_rows()
    next(stream)
    stream.close()  # an earlier run, interrupted
    df.collect()
    page = Path(ifr.report(path=str(tmp_path / "report.html"))).read_text()
    header = re.search(r'<div class="sub">[^<]*</div>', page).group(0)
    # Before: the header said "1 earlier run(s) of this pipeline" and the distributions "No earlier run".
    assert "1 earlier run(s) of this pipeline (1 interrupted)" in header, header
    assert "No earlier run of this pipeline to compare with" not in page
    assert "No earlier run of this pipeline finished (1 earlier run(s) of this pipeline (1 interrupted))" in page
