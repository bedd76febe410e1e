"""The README's write modes on the Ray runner (issue 41 item 5): the same check, before any request, and the
same commit, whichever runner writes the parts."""

import pyarrow.parquet as pq
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-ray-writes-1"


@pytest.fixture
def on_ray(ray_cluster):
    ifr.set_runner_ray()
    yield
    ifr.set_runner_native()


def test_promise_the_write_modes_hold_on_ray(on_ray, tmp_path):
    root = tmp_path / "out"
    with Simulator(SimulatorConfig(require_api_key=KEY)) as sim:
        df = ifr.from_pydict({"q": ["a", "b", "c"]}).with_column(
            "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini"))
        df.write_parquet(str(root))
        sent = sim.stats()["total_requests"]
        with pytest.raises(ifr.OutputExistsError, match="part-00000.parquet"):
            df.write_parquet(str(root))
        assert sim.stats()["total_requests"] == sent  # refused before the job ran
        df.write_parquet(str(root), mode="append")
        assert sorted(pq.read_table(root).column("q").to_pylist()) == ["a", "a", "b", "b", "c", "c"]
        df.write_parquet(str(root), mode="overwrite")
    assert sorted(pq.read_table(root).column("q").to_pylist()) == ["a", "b", "c"]
