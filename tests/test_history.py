"""Run history: one row per job with AI calls, a reproducible review sample, drift warnings (simulator)."""

import sqlite3
import warnings

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe.history import MIGRATIONS, RunHistory
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-history-secret-4242"


def labels(share_pos: float):
    """A server that answers 'pos' for the first share_pos of every 100 questions, else 'neg'."""
    def respond(body):
        text = body["messages"][-1]["content"]
        return "pos" if int(text.split()[-1]) % 100 < share_pos * 100 else "neg"
    return respond


def job(sim, n: int, start: int = 0):
    return ifr.from_pydict({"q": [f"review {i}" for i in range(start, start + n)]}).with_column(
        "label", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini",
                        use_chat_completions=True))


@pytest.fixture
def history_dir(tmp_path):
    ifr.set_history(directory=str(tmp_path / "history"), sample=0.1, max_sample=25)
    yield str(tmp_path / "history")
    ifr.set_history()


def test_a_job_records_one_run_with_its_totals_and_distribution(history_dir):
    with Simulator(SimulatorConfig(responder=labels(0.7))) as sim:
        out = job(sim, 400).to_arrow()
    assert out.num_rows == 400
    runs = ifr.runs(directory=history_dir).to_pylist()
    assert len(runs) == 1
    run = runs[0]
    assert (run["rows"], run["requests"], run["errors"], run["status"]) == (400, 400, 0, "ok")
    assert run["input_tokens"] > 0 and run["latency_p50_s"] is not None and "openai:gpt-5-mini" in run["models"]
    import json

    dist = json.loads(run["distributions"])["label"]
    assert dist["categories"] == {"neg": 120, "pos": 280} and dist["null_rate"] == 0.0
    assert len(json.loads(run["timeline"])) >= 1
    # Never a key: not in the history file, whatever table.
    raw = open(f"{history_dir}/runs.sqlite", "rb").read()
    assert KEY.encode() not in raw


def test_the_review_sample_is_reproducible_and_bounded(history_dir):
    with Simulator(SimulatorConfig(responder=labels(0.5))) as sim:
        job(sim, 600).to_arrow()
        first = ifr.run_sample(directory=history_dir).to_pylist()
        job(sim, 600).to_arrow()
        second = ifr.run_sample(directory=history_dir).to_pylist()
    assert 0 < len(first) <= 25 and [r["q"] for r in first] == [r["q"] for r in second]  # same inputs, same rows
    assert {"q", "label", "label_error", "_run_id"} <= set(first[0]) and first[0]["_run_id"] != second[0]["_run_id"]
    ifr.set_history(directory=history_dir, sample=0)
    with Simulator(SimulatorConfig(responder=labels(0.5))) as sim:
        job(sim, 100).to_arrow()
    assert ifr.run_sample(directory=history_dir).count_rows() == 0  # sample=0: none kept


def test_a_moved_distribution_warns_once_and_a_steady_one_does_not(history_dir):
    share = {"pos": 0.7}
    with Simulator(SimulatorConfig(responder=lambda body: labels(share["pos"])(body))) as sim:
        for start in (0, 1000):  # two runs of the same pipeline, 70% positive
            job(sim, 500, start).to_arrow()
        with warnings.catch_warnings(record=True) as steady:
            warnings.simplefilter("always")
            job(sim, 500, 2000).to_arrow()  # still 70%: no warning
        assert not [w for w in steady if issubclass(w.category, ifr.DriftWarning)]
        share["pos"] = 0.4
        with pytest.warns(ifr.DriftWarning, match=r"Drift in 'label': the share of '(pos|neg)' moved from"):
            job(sim, 500, 3000).to_arrow()
    import json

    newest = ifr.runs(directory=history_dir).to_pylist()[0]
    moves = json.loads(newest["drift"])
    assert {m["value"] for m in moves} == {"pos", "neg"} and all(m["column"] == "label" for m in moves)


def test_the_history_file_migrates_from_any_older_version(tmp_path):
    path = tmp_path / "runs.sqlite"
    sqlite3.connect(path).close()  # an empty file: version 0
    h = RunHistory(tmp_path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    h.record({"run_id": "a", "started": 1.0, "fingerprint": "f", "distributions": {"x": {"rows": 1}}}, [])
    assert RunHistory(tmp_path).runs()[0]["distributions"] == {"x": {"rows": 1}}  # reopened: no migration runs twice


def test_an_evaluation_is_stored_with_the_newest_run(history_dir):
    import json

    with Simulator(SimulatorConfig(responder=labels(0.7))) as sim:
        df = job(sim, 200).collect()
    truth = df.with_column("gold", ifr.col("label"))  # a perfect prediction, for the check
    ev = ifr.evaluate(truth, "label", "gold")
    assert ev.accuracy == 1.0 and ev.run_id == ifr.runs(directory=history_dir).to_pylist()[0]["run_id"]
    stored = json.loads(ifr.runs(directory=history_dir).to_pylist()[0]["evaluation"])
    assert stored["accuracy"] == 1.0


def test_in_a_notebook_the_progress_shows_and_a_run_ends_with_an_html_summary(monkeypatch):
    import sys
    import types

    from inferframe.observe import progress

    shown = []
    fake = types.ModuleType("IPython.display")
    fake.HTML = lambda text: ("html", text)
    fake.display = shown.append
    monkeypatch.setitem(sys.modules, "IPython.display", fake)
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.delenv("INFERFRAME_PROGRESS", raising=False)
    assert progress._should_show(None) is True  # stdout is no terminal here; the notebook still gets the display
    with Simulator(SimulatorConfig()) as sim:
        job(sim, 20).to_arrow(progress=False)
    assert len(shown) == 1 and shown[0][0] == "html" and "<td>20</td>" in shown[0][1]


def test_a_job_with_two_ai_calls_counts_its_rows_once_and_writes_its_report(history_dir, tmp_path):
    with Simulator(SimulatorConfig(responder=labels(0.5))) as sim:
        df = job(sim, 60).with_column("again", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY,
                                                      model="gpt-5-mini", system_message="Once more.", use_chat_completions=True))
        df.to_arrow(report=str(tmp_path / "run.html"))
    run = ifr.runs(directory=history_dir).to_pylist()[0]
    assert run["rows"] == 60 and run["requests"] == 120
    page = (tmp_path / "run.html").read_text()
    assert run["run_id"] in page and "<script" not in page


def test_many_jobs_opening_a_new_history_at_once_all_succeed(tmp_path):
    """Two jobs starting together open runs.sqlite together: WAL mode and the migrations happen once, no error."""
    import threading

    from inferframe.observe.history import MIGRATIONS, RunHistory

    for trial in range(8):
        directory = tmp_path / f"h{trial}"
        barrier, errors, opened = threading.Barrier(6), [], []

        def open_it():
            try:
                barrier.wait(timeout=10)
                opened.append(RunHistory(directory))
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == [] and len(opened) == 6
        assert opened[0]._db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
