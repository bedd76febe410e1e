"""The Batch API ledger in the PostgreSQL store (issue 33 item 5): a driver killed after it submitted a
batch, and the same job started from another machine (another local cache_dir, the same store URL),
polls that batch and does not submit (and pay for) it again."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import psycopg

import inferframe as ifr
from inferframe.simulator import Simulator, SimulatorConfig
from test_batch_api import batch_controls

JOB = textwrap.dedent("""
    import sys
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    base_url, cache_dir, out = sys.argv[1:4]
    df = ifr.from_pydict({"q": [f"row {i}" for i in range(30)]})
    df = df.with_column("a", prompt(col("q"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini",
                                    cache_dir=cache_dir, batch=True, batch_poll_interval=0.05))
    df.write_parquet(out)
""")


def batches_in_ledger(url: str) -> int:
    try:
        with psycopg.connect(url) as db:
            return db.execute("SELECT COUNT(*) FROM inferframe_batches").fetchone()[0]
    except psycopg.errors.UndefinedTable:  # the job has not opened the store yet
        return 0


def test_a_batch_submitted_before_the_driver_died_is_polled_from_another_machine_not_submitted_again(pg_url, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {**os.environ, "INFERFRAME_CACHE_URL": pg_url}
    out = tmp_path / "out"
    with Simulator(SimulatorConfig()) as sim:
        batch_controls(sim, process_s=4.0)  # the batch stays in progress well past the kill
        proc = subprocess.Popen([sys.executable, str(script), sim.base_url, str(tmp_path / "machine-a"), str(out)],
                                env=env)
        deadline = time.monotonic() + 120
        while batches_in_ledger(pg_url) < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # submitted and in the store's ledger; not collected
        proc.wait()
        assert sim.stats()["batches_created"] == 1 and batches_in_ledger(pg_url) == 1
        assert not out.exists() or not any(p.name.startswith("part-") for p in out.iterdir())

        subprocess.run([sys.executable, str(script), sim.base_url, str(tmp_path / "machine-b"), str(out)],
                       check=True, timeout=180, env=env)
        assert sim.stats()["batches_created"] == 1  # machine B found the batch in the shared ledger and polled it
        subprocess.run([sys.executable, str(script), sim.base_url, str(tmp_path / "machine-c"), str(tmp_path / "o3")],
                       check=True, timeout=180, env=env)
        stats = sim.stats()
    assert stats["batches_created"] == 1 and stats["batch_requests"] == 30  # a third machine: all from the store
    assert not stats.get("by_endpoint", {}).get("responses")  # nothing was sent outside the one batch
    got = ifr.read_parquet(str(out)).to_pydict()
    assert sorted(got["a"]) == sorted(f"sim answer: row {i}" for i in range(30))
    assert ifr.read_parquet(str(tmp_path / "o3")).to_pydict() == got
    for machine in ("machine-a", "machine-b", "machine-c"):
        assert not (tmp_path / machine / "responses.sqlite").exists()  # the ledger and answers live in the store
