"""embed_text() over OpenAI-compatible /v1/embeddings, synchronously and through the Batch API."""

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import embed_text
from inferframe.simulator import Simulator, SimulatorConfig


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig()) as s:
        yield s


TEXTS = ["the cat sat on the mat", "a cat sat on a mat", "quarterly revenue grew by ten percent", "the cat sat on the mat"]


def embed(sim, tmp_path, **kw):
    return embed_text(col("t"), provider="openai", base_url=sim.base_url, api_key="k", cache_dir=str(tmp_path), **kw)


@pytest.mark.parametrize("batch", [False, True])
def test_embeddings_are_fixed_size_float32_and_deterministic(sim, tmp_path, batch):
    df = ifr.from_pydict({"t": TEXTS}).with_column("e", embed(sim, tmp_path, batch=batch, batch_poll_interval=0.05))
    assert df.schema()["e"].to_arrow() == pa.list_(pa.float32(), 1536)  # known before the run
    out = df.to_pydict()
    assert out["e_error"] == [None] * 4
    v = np.array(out["e"], dtype=np.float32)
    assert v.shape == (4, 1536)
    assert np.array_equal(v[0], v[3])
    cos = v @ v.T / np.outer(np.linalg.norm(v, axis=1), np.linalg.norm(v, axis=1))
    assert cos[0, 1] > cos[0, 2]  # similar sentences score higher than unrelated ones
    assert sim.stats().get("batches_created", 0) == (1 if batch else 0)


def test_dimensions_and_unknown_models(sim, tmp_path):
    df = ifr.from_pydict({"t": TEXTS[:2]}).with_column("e", embed(sim, tmp_path, model="text-embedding-3-large", dimensions=256))
    assert len(df.to_pydict()["e"][0]) == 256
    with pytest.raises(ifr.PlanError, match="dimensions=N"):
        embed(sim, tmp_path, model="my-embedder")
