"""embed_text() with in-process models: the packaged all-MiniLM-L6-v2 through sentence-transformers and transformers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import embed_text


TOPICS = [
    "The cat sat on the warm windowsill and purred.",
    "Stock markets fell sharply after the interest rate decision.",
    "The recipe needs two cups of flour and a pinch of salt.",
    "The football team won the championship in extra time.",
]


def _texts(n: int) -> list[str]:
    return [f"{TOPICS[i % 4]} (note {i})" for i in range(n)]


# Past one request batch (1,024 texts, the default for in-process text models) and into a second: the join of two
# batches is what a larger job adds; 2,000 texts took 41 s of the suite for nothing more.
MANY = 1100


@pytest.fixture(scope="module")
def many_texts():
    texts = _texts(MANY)
    df = ifr.from_pydict({"t": texts}).with_column("v", embed_text(col("t")))
    return texts, df.schema(), df.to_arrow()


def test_texts_across_two_batches_give_fixed_size_float32_vectors(many_texts):
    texts, schema, table = many_texts
    assert schema["v"].to_arrow() == pa.list_(pa.float32(), 384)
    v = table.column("v").combine_chunks()
    assert v.type == pa.list_(pa.float32(), 384)
    m = v.values.to_numpy().reshape(-1, 384)
    assert m.shape == (MANY, 384) and v.null_count == 0
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-4)
    assert table.column("t").to_pylist() == texts


def test_embeddings_are_deterministic_and_match_direct_encode(many_texts):
    from sentence_transformers import SentenceTransformer

    from inferframe.models.loading import packaged_minilm

    texts, _, table = many_texts
    m = table.column("v").combine_chunks().values.to_numpy().reshape(-1, 384)
    again = ifr.from_pydict({"t": texts[:300]}).with_column("v", embed_text(col("t"), batch_size=37)).to_arrow()
    m2 = again.column("v").combine_chunks().values.to_numpy().reshape(-1, 384)
    np.testing.assert_allclose(m[:300], m2, atol=1e-5)
    direct = SentenceTransformer(str(packaged_minilm()), device="cpu").encode(texts[:50], normalize_embeddings=True)
    np.testing.assert_allclose(m[:50], direct, atol=1e-5)


def test_similar_sentences_score_higher_than_unrelated(many_texts):
    _, _, table = many_texts
    m = table.column("v").combine_chunks().values.to_numpy().reshape(-1, 384)
    same_topic = m[0] @ m[4]  # two cat sentences
    for other in (1, 2, 3):
        assert same_topic > m[0] @ m[other] + 0.2


def test_nulls_stay_null_and_empty_batches_work():
    df = ifr.from_pydict({"t": [None, "a dog", None]}).with_column("v", embed_text(col("t")))
    v = df.to_pydict()["v"]
    assert v[0] is None and v[2] is None and len(v[1]) == 384


def test_transformers_provider_mean_pools_like_sentence_transformers():
    texts = _texts(20)
    st = ifr.from_pydict({"t": texts}).with_column("v", embed_text(col("t"))).to_pydict()["v"]
    tf = ifr.from_pydict({"t": texts}).with_column("v", embed_text(col("t"), provider="transformers")).to_pydict()["v"]
    np.testing.assert_allclose(np.array(st), np.array(tf), atol=1e-4)


def test_a_sentence_transformers_model_that_mean_pools_runs_through_transformers_with_its_own_vectors(tmp_path):
    import json
    import shutil

    from inferframe.models.loading import packaged_minilm
    from inferframe.models.registry import resolve_model
    from inferframe.models.text import MeanPooledSentenceTransformer, SentenceTransformerEmbedder, mean_pooled

    path = packaged_minilm()
    assert resolve_model("embed_text", "sentence_transformers", None, kind="text", options={}).runner \
        is MeanPooledSentenceTransformer
    # Its Normalize module makes unit vectors whatever normalize= says, as sentence-transformers' encode does.
    texts = _texts(12) + ["  spaced out  ", "x", "Ünïcödé ✓ 日本語"]
    for normalize in (True, False):
        ours = MeanPooledSentenceTransformer(str(path), device="cpu", normalize=normalize)._encode(texts)
        theirs = SentenceTransformerEmbedder(str(path), device="cpu", normalize=normalize)._encode(texts)
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    # Any other configuration runs on sentence-transformers itself.
    changes = {"1_Pooling/config.json": {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True},
               "sentence_bert_config.json": {"do_lower_case": True},
               "config_sentence_transformers.json": {"prompts": {"query": "query: "}, "default_prompt_name": "query"}}
    for name, change in changes.items():
        copy = tmp_path / name.replace("/", "_")
        shutil.copytree(path, copy, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
        (copy / name).write_text(json.dumps({**json.loads((copy / name).read_text()), **change}))
        assert mean_pooled(str(copy)) is None, name
    extra = tmp_path / "dense"
    shutil.copytree(path, extra, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    modules = json.loads((extra / "modules.json").read_text())
    (extra / "modules.json").write_text(json.dumps(modules + [{"idx": 3, "name": "3", "path": "3_Dense",
                                                                "type": "sentence_transformers.models.Dense"}]))
    assert mean_pooled(str(extra)) is None and mean_pooled(str(path)) == (256, True)


def test_shortened_vectors_are_known_at_plan_time_and_renormalised():
    df = ifr.from_pydict({"t": TOPICS}).with_column("v", embed_text(col("t"), dimensions=128))
    assert df.schema()["v"].to_arrow() == pa.list_(pa.float32(), 128)
    m = np.array(df.to_pydict()["v"])
    assert m.shape == (4, 128)
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)


def test_long_inputs_are_chunked_and_combined_by_token_weighted_mean():
    from inferframe.models.text import SentenceTransformerEmbedder, combine_chunks
    from inferframe.models.loading import packaged_minilm

    words = " ".join(f"{TOPICS[i % 4]}" for i in range(60))  # far past MiniLM's 256-token window
    e = SentenceTransformerEmbedder(str(packaged_minilm()), device="cpu")
    chunks, owners, weights = e._chunks([words])
    assert len(chunks) >= 3 and set(owners) == {0} and sum(weights) == len(e.tokenizer(words, add_special_tokens=False)["input_ids"])
    expected = combine_chunks(e._encode(chunks), owners, weights, 1, True)[0]
    got = ifr.from_pydict({"t": [words]}).with_column("v", embed_text(col("t"))).to_pydict()["v"][0]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    truncated = ifr.from_pydict({"t": [words]}).with_column("v", embed_text(col("t"), long_inputs="truncate")).to_pydict()["v"][0]
    assert not np.allclose(got, truncated, atol=1e-3)


def test_use_process_gives_the_same_vectors():
    texts = _texts(40)
    here = ifr.from_pydict({"t": texts}).with_column("v", embed_text(col("t"))).to_pydict()["v"]
    there = ifr.from_pydict({"t": texts}).with_column("v", embed_text(col("t"), use_process=True, batch_size=16)).to_pydict()["v"]
    np.testing.assert_allclose(np.array(here), np.array(there), atol=1e-5)


def test_gpus_reach_the_worker_spec_and_run_on_cpu_with_a_warning_here():
    import warnings

    import torch

    expr = embed_text(col("t"), use_process=True, gpus=1, batch_size=8)
    udf = expr._node.child.args[0].udf  # the value of struct{value, error, usage}
    assert udf.gpus == 1 and udf.owner.gpus == 1 and udf.use_process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        v = ifr.from_pydict({"t": TOPICS}).with_column("v", expr).to_pydict()["v"]
    assert len(v) == 4 and len(v[0]) == 384
    if not torch.cuda.is_available():
        assert any("GPU" in str(w.message) for w in caught)


def test_bad_input_is_a_plan_error_before_anything_runs(tmp_path):
    with pytest.raises(PlanError, match="not on this machine"):
        embed_text(col("t"), provider="sentence_transformers", model="nobody/no-such-model")
    with pytest.raises(PlanError, match="holds no model"):
        embed_text(col("t"), provider="sentence_transformers", model=str(tmp_path))
    with pytest.raises(PlanError, match="lengthened"):
        embed_text(col("t"), dimensions=1000)
    with pytest.raises(PlanError, match="unknown options"):
        embed_text(col("t"), temprature=0.1)
    with pytest.raises(PlanError, match="long_inputs"):
        embed_text(col("t"), long_inputs="drop")


def test_missing_libraries_name_what_to_install(monkeypatch):
    import importlib.util

    from inferframe.models import loading

    real = importlib.util.find_spec
    monkeypatch.setattr(loading.importlib.util, "find_spec", lambda name, *a: None if name == "sentence_transformers" else real(name, *a))
    with pytest.raises(PlanError, match=r'sentence_transformers.*pip install "inferframe\[embed\]"'):
        embed_text(col("t"), provider="sentence_transformers")


def test_device_choice_prefers_what_is_asked_then_cuda():
    from inferframe.models.loading import pick_device

    assert pick_device("cpu") == "cpu"
    import torch

    assert pick_device(None) == ("cuda" if torch.cuda.is_available() else "cpu")


def test_a_second_query_reuses_the_loaded_model():
    from inferframe.models import text

    df = ifr.from_pydict({"t": TOPICS}).with_column("v", embed_text(col("t")))
    first = df.to_pydict()["v"]
    loaded = dict(text._LOADED)
    assert any(k[0] == "st" for k in loaded)
    assert df.to_pydict()["v"] == first
    assert all(text._LOADED[k] is m for k, m in loaded.items())


def test_a_non_text_column_is_a_plan_error_and_estimate_skips_in_process_models():
    df = ifr.from_pydict({"n": [1, 2], "t": ["a", "b"]})
    with pytest.raises(PlanError, match=r"input 'n' must be text, got int64.*col\('n'\)\.cast\(DataType\.string\(\)\)"):
        df.with_column("v", embed_text(col("n")))
    est = df.with_column("v", embed_text(col("t"))).estimate()
    assert est["calls"] == [] and est["cost_usd"] == 0


def test_in_process_rows_show_in_progress_and_last_run():
    from inferframe.observe import last_run

    ifr.from_pydict({"t": _texts(50)}).with_column("v", embed_text(col("t"), batch_size=16)).to_arrow()
    (run,) = last_run()
    assert run["label"] == "embed[all-MiniLM-L6-v2]" and run["rows_done"] == 50 and run["in_flight"] == 0


def test_a_string_instead_of_a_column_is_a_plan_error_and_hosted_models_go_to_their_api(monkeypatch):
    with pytest.raises(PlanError, match=r"takes a column expression, e.g. embed_text\(col\('t'\)\)"):
        embed_text("t")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(PlanError, match="needs an API key"):
        embed_text(col("t"), model="text-embedding-3-small")
