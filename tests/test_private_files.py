"""What the library writes under its cache directory is private to the user, whatever the umask (issue 31 item 9).

The cache and the run history hold inputs and answers: a fresh directory is 0700 and every file in
it (responses.sqlite, runs.sqlite, their -wal/-shm files; the Batch API ledger is in responses.sqlite) 0600.
"""

import os
import stat

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig


@pytest.fixture(params=[0o022, 0o000], ids=["umask022", "umask000"])
def umask(request):
    before = os.umask(request.param)
    yield request.param
    os.umask(before)


def mode(path) -> str:
    return oct(stat.S_IMODE(os.stat(path).st_mode))


def test_a_fresh_cache_directory_and_every_file_in_it_are_private(tmp_path, monkeypatch, umask):
    cache = tmp_path / "fresh" / "inferframe"  # neither exists yet
    monkeypatch.setenv("INFERFRAME_CACHE_DIR", str(cache))
    ifr.set_history()  # the run history lives in the cache directory
    with Simulator(SimulatorConfig()) as sim:
        out = ifr.from_pydict({"q": ["hello", "bye"]}).with_column(
            "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="sk-x", model="gpt-5-mini",
                        use_chat_completions=True)).to_pydict()
    assert len(out["a"]) == 2
    assert len(ifr.runs()) == 1
    files = {p.name: mode(p) for p in cache.iterdir()}
    assert {"responses.sqlite", "runs.sqlite"} <= set(files), files
    assert {"responses.sqlite-wal", "runs.sqlite-wal"} <= set(files), files  # WAL files are there while open
    assert files == dict.fromkeys(files, "0o600")
    assert (mode(cache), mode(cache.parent)) == ("0o700", "0o700")


def test_an_existing_directory_keeps_its_mode(tmp_path, umask):
    from inferframe.observe.history import RunHistory
    from inferframe.runtime.cache import ResponseCache

    os.chmod(tmp_path, 0o750)  # the user's own choice for a directory they made
    with pytest.warns(UserWarning, match="chmod 700"):  # kept, with a warning: others can open it (issue 41 item 8)
        ResponseCache(tmp_path)
        RunHistory(tmp_path)
    assert mode(tmp_path) == "0o750"
    assert mode(tmp_path / "responses.sqlite") == mode(tmp_path / "runs.sqlite") == "0o600"
