"""A missing input path and an output location that cannot be written are user mistakes: inferframe's own
errors (still the builtin ones code may catch), raised before any row is read or request is sent."""

import os
import subprocess
import sys
import shutil
import textwrap

import pytest

import inferframe as ifr
from inferframe.simulator import Simulator, SimulatorConfig


@pytest.mark.parametrize("read, name", [
    (ifr.read_parquet, "missing.parquet"),
    (ifr.read_csv, "nothing/*.csv"),
    (ifr.read_json, "no_dir"),
    (ifr.from_glob_path, "none/**/*.png"),
])
def test_a_missing_input_path_is_a_path_not_found_error(tmp_path, read, name):
    path = str(tmp_path / name)
    with pytest.raises(ifr.PathNotFoundError) as info:
        read(path)
    e = info.value
    assert isinstance(e, ifr.PlanError) and isinstance(e, ifr.InferframeError) and isinstance(e, FileNotFoundError)
    assert repr(path) in str(e) and "Check the path" in str(e)


def test_an_empty_directory_is_a_path_not_found_error(tmp_path):
    (tmp_path / "_SUCCESS").write_text("")
    with pytest.raises(ifr.PathNotFoundError, match="contains no readable files"):
        ifr.read_parquet(str(tmp_path))


def test_an_output_path_that_is_a_file_is_a_path_not_writable_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ifr.PathNotWritableError, match="it is a file") as info:
        ifr.from_pydict({"a": [1]}).write_parquet(str(tmp_path / "file"))
    assert isinstance(info.value, OSError) and isinstance(info.value, ifr.InferframeError)
    assert (tmp_path / "file").read_text() == "x"


# Writes into a read-only directory. Root may write anywhere: it runs without that capability.
CHILD = textwrap.dedent("""
    import sys
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt

    out, base_url = sys.argv[1:3]
    df = ifr.from_pydict({"q": ["a", "b"]}).with_column(
        "label", prompt(col("q"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini",
                        use_chat_completions=True))
    try:
        df.write_parquet(out)
    except OSError as e:
        print(type(e).__name__, isinstance(e, ifr.PlanError), e, sep="|")
""")


def _unprivileged() -> list[str]:
    if os.getuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, and setpriv (util-linux) is not there to drop the right to write anywhere")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.mark.parametrize("target", ["out", "."])
def test_a_read_only_output_directory_is_a_path_not_writable_error_before_any_request(tmp_path, target):
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    readonly.chmod(0o555)
    out = os.path.join(readonly, target)
    try:
        with Simulator(SimulatorConfig()) as sim:
            done = subprocess.run([*_unprivileged(), sys.executable, "-c", CHILD, out, sim.base_url],
                                  capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "INFERFRAME_HISTORY": "0"})
            assert sim.stats()["total_requests"] == 0
        assert done.returncode == 0, done.stderr
        kind, plan_error, message = done.stdout.strip().split("|", 2)
        assert (kind, plan_error) == ("PathNotWritableError", "True"), done.stdout
        assert repr(out) in message and "permission denied" in message and "writable" in message, message
        assert os.listdir(readonly) == []
    finally:
        readonly.chmod(0o755)
