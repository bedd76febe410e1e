"""The PostgreSQL cache store on a real server: the promises the SQLite file keeps (issue 33 items 1-2)."""

import multiprocessing
import pickle

import pytest

from inferframe.errors import ServiceError
from inferframe.runtime.store.postgres import MIGRATIONS, PostgresStore
from tests.store.conftest import PASSWORD, socket_dir, start_server


def test_answers_round_trip_and_a_batch_is_one_query(pg_url, monkeypatch):
    store = PostgresStore(pg_url)
    store.put_many([(f"k{i}", {"v": i, "f": [0.5, i]}, 3, i, "stop") for i in range(1000)])
    assert store.flush(timeout=30) == 0
    other = PostgresStore(pg_url)  # another process's view: only what was committed
    queries = []
    real = other._query
    monkeypatch.setattr(other, "_query", lambda fn: queries.append(1) or real(fn))
    got = other.get_many([f"k{i}" for i in range(1000)] + ["nope", "k7"])
    assert len(queries) == 1  # one round trip for the whole batch
    assert got[7] == ({"v": 7, "f": [0.5, 7]}, 3, 7, "stop") == got[-1] and got[-2] is None
    assert len(other) == 1000 and other.schema_version() == len(MIGRATIONS)
    exported = list(other.export())
    assert len(exported) == 1000 and exported[0]["value"] == {"v": 0, "f": [0.5, 0]}
    other.clear()
    assert len(other) == 0 and store.get("k1") is None
    store.close(), other.close()


def test_a_rerun_reads_on_thousands_of_answers_per_round_trip_within_the_window_bytes(pg_url, monkeypatch):
    store = PostgresStore(pg_url)
    store.put_many([(f"big{i}", "x" * 20_000, 3, 1) for i in range(1_000)])
    assert store.flush(timeout=30) == 0
    store.put_many([(f"k{i}", f"answer {i}", 3, 1) for i in range(10_000)])
    assert store.flush(timeout=30) == 0
    other = PostgresStore(pg_url)
    reads = []
    real = other._after
    monkeypatch.setattr(other, "_after", lambda seq, n: reads.append(len(got := real(seq, n))) or got)

    def rerun(prefix, n):
        reader = other.reader()
        return [hit[0] for start in range(0, n, 128)
                for hit in reader.get_many([f"{prefix}{i}" for i in range(start, min(start + 128, n))])]

    assert rerun("k", 10_000) == [f"answer {i}" for i in range(10_000)]
    # A round trip per few thousand answers, not one per batch of 128 (78 reads before).
    assert len(reads) <= 5 and max(reads) == 4096
    reads.clear()
    assert rerun("big", 1_000) == ["x" * 20_000] * 1_000
    assert max(reads) <= 128  # 20 kB answers: a read holds no more than a quarter of the window's 8 MB
    store.close(), other.close()


def test_an_answer_is_seen_from_the_moment_it_is_put(pg_url):
    store = PostgresStore(pg_url)
    store.put("a", "answer", 1, 2, "length")
    assert store.recheck("a") == ("answer", 1, 2, "length")  # no round trip: this process's answer
    assert store.get_many(["a"]) == [("answer", 1, 2, "length")]
    store.close()


def test_an_idle_writer_thread_leaves_and_a_later_answer_starts_another(pg_url):
    # A store a job left open (the process keeps one per URL) must not hold a thread for the process's life.
    store = PostgresStore(pg_url)
    store.put("idle1", "one", 1, 1)
    assert store.flush(timeout=30) == 0
    first = store._writer
    first.join(timeout=10)
    assert not first.is_alive()
    store.put("idle2", "two", 1, 1)
    assert store.flush(timeout=30) == 0
    assert PostgresStore(pg_url).get_many(["idle1", "idle2"]) == [("one", 1, 1, None), ("two", 1, 1, None)]
    store.close()


def _writer(url, start, n):
    store = PostgresStore(url)
    for i in range(start, start + n, 50):  # overlapping keys, many statements, every process at once
        store.put_many([(f"k{j}", f"v{j}", 1, 1) for j in range(i, i + 50)])
    assert store.flush(timeout=60) == 0
    store.close()


def test_many_processes_open_a_fresh_store_and_write_at_once(pg_url):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(pg_url, 500 * i, 1000)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    store = PostgresStore(pg_url)
    assert len(store) == 2500 and store.schema_version() == len(MIGRATIONS)
    store.close()


def test_the_batch_ledger_is_shared(pg_url):
    a, b = PostgresStore(pg_url), PostgresStore(pg_url)
    a.record_batch("batch_1", "chunk-x", "/v1/chat/completions")
    assert b.pending_batch("chunk-x") == "batch_1"
    b.batch_collected("batch_1")
    assert a.pending_batch("chunk-x") is None
    a.close(), b.close()


def test_unreachable_at_start_names_the_host_never_the_password():
    url = f"postgresql://inferframe:{PASSWORD}@127.0.0.1:1/cache"
    with pytest.raises(ServiceError) as err:
        PostgresStore(url, connect_timeout=2)
    text = str(err.value) + repr(err.value) + "".join(map(str, err.value.__traceback__.tb_frame.f_locals.values()))
    assert "127.0.0.1:1" in str(err.value) and "unreachable" in str(err.value)
    assert PASSWORD not in str(err.value) and PASSWORD not in repr(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_a_store_never_pickles_its_url(pg_url):
    store = PostgresStore(pg_url)
    assert PASSWORD not in repr(store) and PASSWORD not in store.name
    with pytest.raises(TypeError, match="secret"):
        pickle.dumps(store)
    store.close()


def test_writes_wait_in_memory_while_the_store_is_down_and_are_saved_if_it_stays_down(tmp_path):
    """Store lost mid-run: answers stay in memory and are retried; if still down at the end they go to a
    local file, written to the store by the next process that opens it."""
    import pgserver

    server, data = start_server()
    url = f"postgresql://postgres:{PASSWORD}@/postgres?host={socket_dir(server)}"
    spill = tmp_path / "cache"
    store = PostgresStore(url, spill_dir=str(spill), read_patience=1)
    store.put("before", "kept", 1, 1)
    assert store.flush(timeout=30) == 0
    server.cleanup()  # the store goes down mid-run
    store.put_many([(f"lost{i}", f"paid {i}", 1, 1) for i in range(20)])
    assert store.flush(timeout=1) == 20  # not written: the store is down, the answers wait
    assert store.recheck("lost3") == ("paid 3", 1, 1, None) and store.get_many(["lost4"]) == [("paid 4", 1, 1, None)]
    with pytest.raises(ServiceError, match="was lost") as err:
        store.get_many(["elsewhere"])  # a lookup only the store can answer stops the job after read_patience
    assert PASSWORD not in str(err.value)
    with pytest.warns(RuntimeWarning, match="20 paid answers were saved"):
        store.close(timeout=1)
    assert (spill / "unsent" / "responses.sqlite").exists()
    server = pgserver.get_server(data, cleanup_mode="stop")  # the store is back
    again = PostgresStore(url, spill_dir=str(spill))
    assert again.get_many(["lost0", "lost19", "before"]) == [("paid 0", 1, 1, None), ("paid 19", 1, 1, None),
                                                              ("kept", 1, 1, None)]
    assert not (spill / "unsent" / "responses.sqlite").exists()
    again.close()
    server.cleanup()


def test_writes_are_retried_until_the_store_is_back():
    import pgserver

    server, data = start_server()
    url = f"postgresql://postgres:{PASSWORD}@/postgres?host={socket_dir(server)}"
    store = PostgresStore(url)
    store.put("first", 1, 1, 1)
    assert store.flush(timeout=30) == 0
    server.cleanup()
    store.put_many([(f"k{i}", i, 1, 1) for i in range(10)])
    assert store.flush(timeout=0.5) == 10
    server = pgserver.get_server(data, cleanup_mode="stop")
    assert store.flush(timeout=30) == 0 and store.write_retries > 0
    fresh = PostgresStore(url)
    assert fresh.get_many(["k0", "k9"]) == [(0, 1, 1, None), (9, 1, 1, None)]
    fresh.close(), store.close()
    server.cleanup()
