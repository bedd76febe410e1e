"""embed_text() on the embedded llama.cpp server (provider="local", gemma-3-270m): real vectors, no simulator."""

import asyncio

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import embed_text
from inferframe.ai.chunking import Chunker
from inferframe.providers.local import MAX_INPUT_TOKENS as LOCAL_MAX_INPUT_TOKENS
from inferframe.providers import registry as providers
from inferframe.providers.local_server import get_local_server

# A 2-core machine embeds a few short texts a second with the 270M model; a busy one much slower.
LOCAL_TIMEOUT = pytest.mark.timeout(1200)

# (text, a paraphrase of it, an unrelated text)
TRIPLES = [
    ("The cat is sleeping on the sofa.", "A cat naps on the couch.", "Interest rates rose by half a percent."),
    ("I love eating fresh pizza with cheese.", "Cheesy pizza straight from the oven is my favourite food.",
     "The train to Berlin departs at noon."),
    ("It is raining heavily in London today.", "There is a downpour in London this afternoon.",
     "She plays the violin in an orchestra."),
    ("The stock market fell sharply this morning.", "Shares dropped steeply at the opening bell.",
     "My grandmother bakes apple pie on Sundays."),
    ("He scored a goal in the final minute of the match.", "The striker netted a last-minute winner.",
     "Photosynthesis turns sunlight into chemical energy."),
    ("The laptop battery lasts ten hours.", "This notebook computer runs for ten hours on one charge.",
     "The river flooded the village last spring."),
]


@pytest.fixture(scope="module")
def server():
    return get_local_server()


@pytest.fixture(scope="module")
def reviews():
    return ifr.read_csv("examples/data/reviews.csv").limit(48).to_pydict()["review"]


def embed_local(texts, **kw):
    df = ifr.from_pydict({"t": texts}).with_column("e", embed_text(col("t"), provider="local", **kw))
    return df


@LOCAL_TIMEOUT
def test_local_vectors_are_640_float32_unit_and_deterministic(server, reviews, tmp_path):
    texts = reviews + [t for triple in TRIPLES for t in triple]
    assert len(texts) >= 60
    df = embed_local(texts, cache_dir=str(tmp_path))
    assert df.schema()["e"].to_arrow() == pa.list_(pa.float32(), 640)  # from the model table: no server start
    out = df.to_pydict()
    assert out["e_error"] == [None] * len(texts)
    v = np.array(out["e"], dtype=np.float32)
    assert v.shape == (len(texts), 640)
    # llama.cpp L2-normalises pooled embeddings (its default --embd-normalize 2).
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert len({row.tobytes() for row in v}) == len(set(texts))
    # A rerun reads the cache: bit for bit the same.
    cached = np.array(embed_local(texts, cache_dir=str(tmp_path)).to_pydict()["e"], dtype=np.float32)
    assert np.array_equal(v, cached)
    # Computed again in other groupings: llama.cpp's sums run in another order when other inputs share
    # the batch (measured: cosine >= 0.999 run to run), so the same up to that.
    again = np.array(embed_local(texts, cache="off", max_batch_inputs=3).to_pydict()["e"], dtype=np.float64)
    assert (again * v).sum(axis=1).min() > 0.998


@LOCAL_TIMEOUT
def test_local_similar_sentences_score_higher_than_unrelated(server, tmp_path):
    texts = [t for triple in TRIPLES for t in triple]
    v = np.array(embed_local(texts, cache_dir=str(tmp_path)).to_pydict()["e"], dtype=np.float64)
    wins = 0
    for k in range(len(TRIPLES)):
        a, para, other = v[3 * k], v[3 * k + 1], v[3 * k + 2]
        wins += float(a @ para) > float(a @ other)
    assert wins == len(TRIPLES)


async def _chunks(text):
    provider = providers.build(providers.resolve("local"))
    try:
        return await Chunker("gemma-3-270m", LOCAL_MAX_INPUT_TOKENS, provider.tokenize).split(text)
    finally:
        await provider.aclose()


@LOCAL_TIMEOUT
def test_local_long_text_is_the_weighted_mean_of_its_chunks(server, tmp_path):
    # ~600 tokens, two chunks: llama.cpp refuses a single input over its 512-token batch.
    long = " ".join(ifr.read_csv("examples/data/reviews.csv").limit(200).to_pydict()["review"])[:2900]
    chunks = asyncio.run(_chunks(long))
    assert len(chunks) >= 2 and "".join(c for c, _ in chunks) == long
    assert all(n <= LOCAL_MAX_INPUT_TOKENS for _, n in chunks)
    # One input at a time: then llama.cpp's vectors are bit for bit the same run to run.
    one_by_one = {"max_batch_inputs": 1, "max_concurrency": 1}
    out = embed_local([long], cache_dir=str(tmp_path), **one_by_one).to_pydict()
    assert out["e_error"] == [None]
    alone = np.array(embed_local([c for c, _ in chunks], cache="off", **one_by_one).to_pydict()["e"], dtype=np.float64)
    weights = np.array([n for _, n in chunks], dtype=np.float64)
    mean = (alone * weights[:, None]).sum(0) / weights.sum()
    expected = mean / np.linalg.norm(mean)
    assert np.allclose(np.array(out["e"][0]), expected, atol=1e-6)
    assert not np.allclose(np.array(out["e"][0]), alone[0], atol=1e-2)  # not just the first chunk
    # Without splitting, the server refuses the text.
    refused = embed_local([long], cache="off", max_input_tokens=100_000, max_retries=0).to_pydict()
    assert refused["e"] == [None] and "too large" in refused["e_error"][0]["message"]


@LOCAL_TIMEOUT
def test_local_model_under_another_name_is_probed(server, tmp_path):
    # Not in the model table: one probe request tells the size at plan time.
    df = embed_local(["a probe of the probe"], model=server.model, cache_dir=str(tmp_path))
    assert df.schema()["e"].to_arrow() == pa.list_(pa.float32(), 640)
    assert len(df.to_pydict()["e"][0]) == 640


def test_local_server_was_started_once(server):
    assert get_local_server() is server and server.is_running()


def test_the_local_server_has_no_batch_api():
    with pytest.raises(ifr.PlanError, match="no Batch API"):
        embed_text(col("t"), provider="local", batch=True)
