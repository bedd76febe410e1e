"""`inferframe cache stats|clear|export` and `inferframe doctor` on a PostgreSQL store (issue 33 item 6)."""

import json

from typer.testing import CliRunner

from inferframe.cli.base import app
from inferframe.doctor import check_cache, check_store
from inferframe.runtime.store.postgres import MIGRATIONS, PostgresStore
from tests.store.conftest import PASSWORD


def _filled(url, n=3):
    store = PostgresStore(url)
    store.put_many([(f"k{i}", {"answer": i}, 2, 1, "stop") for i in range(n)])
    store.flush()
    store.close()


def test_stats_export_clear_on_a_store_url(pg_url, tmp_path):
    _filled(pg_url)
    runner = CliRunner()
    stats = runner.invoke(app, ["cache", "stats", "--url", pg_url])
    assert stats.exit_code == 0, stats.output
    assert "entries: 3" in stats.output and f"schema:  version {len(MIGRATIONS)}" in stats.output
    out = tmp_path / "answers.jsonl"
    exported = runner.invoke(app, ["cache", "export", "-o", str(out)], env={"INFERFRAME_CACHE_URL": pg_url})
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(x["key"] for x in lines) == ["k0", "k1", "k2"] and lines[0]["finish_reason"] == "stop"
    cleared = runner.invoke(app, ["cache", "clear", "--yes", "--url", pg_url])
    assert cleared.exit_code == 0 and "deleted 3 cached answers" in cleared.output
    for result in (stats, exported, cleared):
        assert PASSWORD not in result.output
    assert "entries: 0" in runner.invoke(app, ["cache", "stats", "--url", pg_url]).output


def test_export_of_the_sqlite_file(tmp_path):
    from inferframe.runtime.cache import ResponseCache

    ResponseCache(tmp_path).put("a", [1, 2], 1, 1)
    result = CliRunner().invoke(app, ["cache", "export", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0 and json.loads(result.output.splitlines()[0])["value"] == [1, 2]


def test_doctor_checks_the_store_connects_its_schema_and_that_it_writes(pg_url, monkeypatch):
    _filled(pg_url, 2)
    check = check_store(pg_url)
    assert check.status == "ok", check
    assert f"schema version {len(MIGRATIONS)} of {len(MIGRATIONS)}, writable, 2 answers" in check.found
    monkeypatch.setenv("INFERFRAME_CACHE_URL", pg_url)
    assert check_cache().status == "ok" and PASSWORD not in check_cache().found
    bad = check_store(f"postgresql://me:{PASSWORD}@127.0.0.1:1/db")
    assert bad.status == "fail" and "127.0.0.1:1" in bad.found and PASSWORD not in bad.found + bad.fix
