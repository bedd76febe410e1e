"""A write killed outright (SIGKILL): the next write removes its temporary folder, and the run history
shows it as interrupted with what it had done; a live writer's folder is never removed."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import inferframe as ifr
from inferframe.io import write_dataset
from inferframe.io.writers import TMP_PREFIX
from inferframe.observe.history import RunHistory
from inferframe.simulator import Simulator, SimulatorConfig

ROWS = 600

# The job of both runs: one AI column over ROWS questions.
JOB = textwrap.dedent("""
    import sys
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt

    def job(base_url, concurrency):
        return ifr.from_pydict({"q": [f"review {i}" for i in range(%d)]}).into_batches(10).with_column(
            "label", prompt(col("q"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini",
                            use_chat_completions=True, max_concurrency=concurrency,
                            prefix_window=20))  # few rows held back for the prefix order: answers stream out
""" % ROWS)

CHILD = JOB + textwrap.dedent("""
    base_url, out, history = sys.argv[1:4]
    ifr.set_history(directory=history, sample=0.1)
    job(base_url, 2).write_parquet(out, rows_per_file=10, progress=False)
""")


def _tmp_folders(root):
    return sorted(p for p in os.listdir(root) if p.startswith(TMP_PREFIX)) if os.path.isdir(root) else []


def _running_with_rows(history_dir):
    if not os.path.exists(os.path.join(history_dir, "runs.sqlite")):
        return False
    # Rows out of the job, not only answered: the distributions count what came out.
    return any(r["status"] == "running" and ((r["distributions"] or {}).get("label") or {}).get("rows")
               for r in RunHistory(history_dir).runs())


def test_a_sigkilled_parquet_write_is_cleaned_up_by_the_rerun_and_shows_as_interrupted(tmp_path):
    out, history = str(tmp_path / "out"), str(tmp_path / "history")
    with Simulator(SimulatorConfig(latency_ms=40)) as sim:  # about 12 s for the child: killed a few s in
        child = subprocess.Popen([sys.executable, "-c", CHILD, sim.base_url, out, history],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 90
            writing = None
            # Mid-write: part files in its temporary folder; then a few seconds for the history to catch up.
            while time.monotonic() < deadline and child.poll() is None:
                folders = _tmp_folders(out)
                if writing is None and folders and len(os.listdir(os.path.join(out, folders[0]))) >= 2:
                    writing = time.monotonic()
                if writing is not None and (_running_with_rows(history) or time.monotonic() - writing > 5):
                    break
                time.sleep(0.1)
            assert child.poll() is None, "the write ended before it could be killed: " + child.stderr.read().decode()
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == -signal.SIGKILL
        [left] = _tmp_folders(out)  # nothing cleans up after SIGKILL ...
        assert not [p for p in os.listdir(out) if p.startswith("part-")]  # ... and nothing was committed

        # The rerun, to the same place: it succeeds and removes the dead writer's folder.
        scope: dict = {}
        exec(JOB, scope)
        ifr.set_history(directory=history, sample=0.1)
        try:
            paths = scope["job"](sim.base_url, 16).write_parquet(out, rows_per_file=100).to_pydict()["path"]
        finally:
            ifr.set_history()
    assert _tmp_folders(out) == [], f"{left} is still there"
    assert sorted(os.listdir(out)) == [os.path.basename(p) for p in paths]
    assert pq.read_table(out).num_rows == ROWS

    runs = ifr.runs(directory=history).to_pylist()
    assert [r["status"] for r in runs] == ["ok", "interrupted"], runs  # the killed run is there, and says so
    newest, killed = runs
    assert newest["rows"] == ROWS
    # What it had done by its last checkpoint: rows out, requests and tokens, their distribution, its sample.
    assert 0 < killed["rows"] < ROWS and killed["requests"] > 0 and killed["input_tokens"] > 0
    assert json.loads(killed["distributions"])["label"]["rows"] == killed["rows"]
    assert ifr.run_sample(killed["run_id"], directory=history).count_rows() > 0


HOLDER = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from inferframe.io.writers import PendingWrite
    w = PendingWrite(sys.argv[1], "parquet", pa.schema([("a", pa.int64())]))
    w.write_parts([pa.record_batch({"a": [1, 2]})])
    print(w.tmp, flush=True)
    sys.stdin.read()  # a live writer, until the test closes its input
""")


def test_a_live_writers_folder_stays_and_goes_once_its_process_is_gone(tmp_path):
    root = tmp_path / "out"
    schema = pa.schema([("a", pa.int64())])
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        theirs = os.path.basename(holder.stdout.readline().strip())
        assert theirs.startswith(TMP_PREFIX)
        # Folders whose owner cannot be judged: another machine's, and one named without an owner.
        foreign = f"{TMP_PREFIX}some-other-host.4026531836-{os.getpid()}-{'0' * 32}"
        unnamed = f"{TMP_PREFIX}{'1' * 32}"
        for name in (foreign, unnamed):
            (root / name).mkdir()
        write_dataset([pa.record_batch({"a": [3]})], schema, str(root), "parquet")
        assert _tmp_folders(str(root)) == sorted([theirs, foreign, unnamed])  # alive: concurrent, left alone
        assert pq.read_table(root).column("a").to_pylist() == [3]  # and the write itself went through
    finally:
        holder.kill()
        holder.wait()
    write_dataset([pa.record_batch({"a": [4]})], schema, str(root), "parquet", mode="overwrite")  # [3] is there
    assert _tmp_folders(str(root)) == sorted([foreign, unnamed])


def test_a_running_run_is_interrupted_once_its_process_is_gone(tmp_path):
    from inferframe.observe.owner import owner_tag

    history = RunHistory(tmp_path)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_owner = owner_tag().rpartition("-")[0] + "-" + gone.stdout.strip()
    now = time.time()
    history.record({"run_id": "dead", "started": now - 5, "ended": now, "fingerprint": "f", "status": "running",
                    "rows": 40, "owner": dead_owner}, [])
    history.record({"run_id": "alive", "started": now - 4, "ended": now, "fingerprint": "f", "status": "running",
                    "rows": 10, "owner": owner_tag()}, [])
    # Another machine's run cannot be judged by its process: it is interrupted once it stays silent too long.
    history.record({"run_id": "silent", "started": now - 3600, "ended": now - 3000, "fingerprint": "f",
                    "status": "running", "rows": 7, "owner": "some-other-host.1-123"}, [])
    history.record({"run_id": "away", "started": now - 3, "ended": now, "fingerprint": "f", "status": "running",
                    "rows": 3, "owner": "some-other-host.1-123"}, [])
    status = {r["run_id"]: (r["status"], r["rows"]) for r in history.runs()}
    assert status == {"dead": ("interrupted", 40), "alive": ("running", 10), "silent": ("interrupted", 7),
                      "away": ("running", 3)}
    stored = dict(history._db.execute("SELECT run_id, status FROM runs").fetchall())
    assert stored["dead"] == "interrupted" and stored["alive"] == "running"  # kept, not only shown


def test_a_job_its_consumer_stops_is_interrupted_with_what_it_had_done(tmp_path):
    ifr.set_history(directory=str(tmp_path), sample=0.5)
    scope: dict = {}
    exec(JOB, scope)
    try:
        with Simulator(SimulatorConfig()) as sim:
            batches = scope["job"](sim.base_url, 4).iter_batches(progress=False)
            first = next(batches)
            batches.close()
    finally:
        ifr.set_history()
    [run] = ifr.runs(directory=str(tmp_path)).to_pylist()
    assert run["status"] == "interrupted" and first.num_rows <= run["rows"] < ROWS


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_a_job_stopped_by_ctrl_c_is_interrupted_and_one_that_raised_failed(tmp_path, stop):
    ifr.set_history(directory=str(tmp_path))
    scope: dict = {}
    exec(JOB, scope)
    try:
        with Simulator(SimulatorConfig()) as sim:
            batches = scope["job"](sim.base_url, 4).iter_batches(progress=False)
            next(batches)
            with pytest.raises(stop):
                batches.throw(stop("stop here"))  # where Ctrl-C (or an error) meets the running job
    finally:
        ifr.set_history()
    [run] = ifr.runs(directory=str(tmp_path)).to_pylist()
    assert run["status"] == ("interrupted" if stop is KeyboardInterrupt else "failed")
