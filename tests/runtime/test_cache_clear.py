"""ResponseCache.clear() deletes every answer and gives the space back (what `inferframe cache clear` does)."""

from typer.testing import CliRunner

from inferframe import cli
from inferframe.runtime.cache import ResponseCache


def _size(directory):
    return sum(p.stat().st_size for p in directory.glob("responses.sqlite*"))


def test_clear_gives_the_space_back(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put_many([(f"key-{i}", "answer " + "x" * 2000 + str(i), 10, 10) for i in range(2000)])
    cache.close()
    full = _size(tmp_path)
    assert full > 4_000_000

    cache = ResponseCache(tmp_path)
    cache.clear()
    assert len(cache) == 0
    cache.close()
    assert _size(tmp_path) < full / 20


def test_cache_clear_command(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put_many([(f"key-{i}", "answer " + "y" * 2000, 1, 1) for i in range(500)])
    cache.close()
    full = _size(tmp_path)
    result = CliRunner().invoke(cli.app, ["cache", "clear", "--yes", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "deleted 500 cached answers" in result.stdout
    assert _size(tmp_path) < full / 5
    stats = CliRunner().invoke(cli.app, ["cache", "stats", "--cache-dir", str(tmp_path)])
    assert stats.stdout.split()[:2] == ["entries:", "0"]
