"""classify_text(method="embedding"): a logistic-regression head on MiniLM embeddings, and zero-shot by descriptions.

Runs the packaged all-MiniLM-L6-v2 in process (no download).
"""

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError, RowFailed
from inferframe.functions.classify_embedding import embedding_classify
from inferframe.ai import head as ce
from inferframe.ai.head import fit_head
from inferframe.ai.run import local_services
from inferframe.models import registry
from inferframe.models.loading import model_files
from inferframe.models.text import SentenceTransformerEmbedder


def EmbeddingHead(path, **kw):
    """The head on the packaged model's class, as ``classify_text(method="embedding")`` resolves it."""
    return ce.EmbeddingHead(path, embedder=SentenceTransformerEmbedder, **kw)


LABELS = ["sport", "food", "weather"]
TRAIN = [
    ("The striker scored twice in the second half.", "sport"),
    ("She won the tennis final in straight sets.", "sport"),
    ("The marathon runners crossed the finish line.", "sport"),
    ("Our team lost the basketball game by three points.", "sport"),
    ("The goalkeeper saved a penalty in extra time.", "sport"),
    ("Simmer the tomato sauce with garlic and basil.", "food"),
    ("This bakery sells the best sourdough bread.", "food"),
    ("We ordered sushi and miso soup for dinner.", "food"),
    ("Add a pinch of salt to the pasta water.", "food"),
    ("The chocolate cake was rich and moist.", "food"),
    ("Heavy rain and strong winds are expected tonight.", "weather"),
    ("Tomorrow will be sunny with a high of 25 degrees.", "weather"),
    ("Snow is falling across the northern mountains.", "weather"),
    ("A thunderstorm warning was issued for the coast.", "weather"),
    ("The fog should clear by late morning.", "weather"),
]
HELD_OUT = [
    ("The cyclist attacked on the final climb and won the stage.", "sport"),
    ("He swam the 100 metres freestyle in record time.", "sport"),
    ("Grill the salmon and serve it with lemon butter.", "food"),
    ("The ramen broth simmered for twelve hours.", "food"),
    ("Expect showers and a cold breeze this afternoon.", "weather"),
    ("Temperatures will drop below freezing overnight.", "weather"),
]


@pytest.fixture(scope="module")
def head():
    return EmbeddingHead(str(model_files(None)), labels=tuple(LABELS), examples=tuple(TRAIN))


def test_head_predicts_a_separable_set_and_probabilities_sum_to_one(head):
    p = head.predict_proba([t for t, _ in HELD_OUT])
    assert p.shape == (len(HELD_OUT), 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    assert [LABELS[i] for i in p.argmax(axis=1)] == [lab for _, lab in HELD_OUT]
    assert p.max(axis=1).min() > 1 / 3  # every pick above chance
    # The head is fitted once per job and shared by its instances: a second instance of the same job does not
    # refit; another job (other services) fits its own (issue 43: no job state in the process).
    job, other = local_services(), local_services()
    first = EmbeddingHead(str(model_files(None)), labels=tuple(LABELS), examples=tuple(TRAIN), services=job)
    again = EmbeddingHead(str(model_files(None)), labels=tuple(LABELS), examples=tuple(TRAIN), services=job)
    elsewhere = EmbeddingHead(str(model_files(None)), labels=tuple(LABELS), examples=tuple(TRAIN), services=other)
    assert again.head is first.head and elsewhere.head is not first.head


def test_head_through_a_dataframe_with_confidence_column(head):
    texts = [t for t, _ in HELD_OUT] + ["", None]
    df = ifr.from_pydict({"text": texts}).with_column(
        "topic", embedding_classify(col("text"), LABELS, examples=TRAIN))
    schema = df.schema()
    assert schema["topic"] == ifr.DataType.from_arrow(pa.dictionary(pa.int32(), pa.string()))
    assert schema["topic_confidence"] == ifr.DataType.float64()
    out = df.to_pydict()
    assert out["topic"] == [lab for _, lab in HELD_OUT] + [None, None]
    expected = head.predict_proba([t for t, _ in HELD_OUT]).max(axis=1)
    # Padding differs with the batch's make-up, so the vectors (and probabilities) agree to ~1e-4, not bit for bit.
    np.testing.assert_allclose(out["topic_confidence"][:6], expected, atol=1e-3)
    assert out["topic_confidence"][6:] == [None, None]
    assert out["topic_error"][6]["kind"] == "input" and out["topic_error"][7] is None
    with pytest.raises(RowFailed, match="empty text"):
        ifr.from_pydict({"text": ["a goal", ""]}).with_column(
            "t", embedding_classify(col("text"), LABELS, examples=TRAIN, on_error="raise")).to_pydict()


def test_zero_shot_by_descriptions_on_an_obvious_case():
    df = ifr.from_pydict({"t": ["It is pouring with rain and very windy.", "I baked bread and a cherry pie.",
                                "The football match ended in a draw."]})
    expr = embedding_classify(col("t"), LABELS, label_descriptions={
        "sport": "sports, games, athletes and matches", "food": "food, cooking and eating",
        "weather": ["rain, snow, wind and sunshine", "the weather forecast"]})
    out = df.with_column("c", expr).to_pydict()
    assert out["c"] == ["weather", "food", "sport"]
    assert all(1 / 3 < c <= 1 for c in out["c_confidence"])
    head = EmbeddingHead(str(model_files(None)), labels=("sport", "food"))  # descriptions default to the labels
    p = head.predict_proba(["a rugby match", "a plate of spaghetti"])
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    assert p.argmax(axis=1).tolist() == [0, 1]


def test_zero_shot_temperature_sharpens():
    path = str(model_files(None))
    soft = EmbeddingHead(path, labels=("sport", "food"), temperature=1.0).predict_proba(["a rugby match"])
    sharp = EmbeddingHead(path, labels=("sport", "food"), temperature=0.01).predict_proba(["a rugby match"])
    assert soft.argmax() == sharp.argmax() == 0
    assert 0.5 < soft.max() < sharp.max()


def test_bad_examples_and_options_fail_at_plan_time_before_any_work(monkeypatch):
    def no_model(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(registry, "model_files", no_model)
    with pytest.raises(PlanError, match=r"'neutral'.*\['sport', 'food', 'weather'\]"):
        embedding_classify(col("t"), LABELS, examples=TRAIN + [("meh", "neutral")])
    with pytest.raises(PlanError, match="no example for label"):
        embedding_classify(col("t"), LABELS + ["music"], examples=TRAIN)
    with pytest.raises(PlanError, match="unknown options"):
        embedding_classify(col("t"), LABELS, examples=TRAIN, temprature=0.1)
    with pytest.raises(PlanError, match="provider must be"):
        embedding_classify(col("t"), LABELS, provider="openai")
    with pytest.raises(PlanError, match="not among the labels"):
        embedding_classify(col("t"), LABELS, label_descriptions={"music": "songs"})


def test_fit_head_cross_validates_c():
    rng = np.random.default_rng(0)
    centers = np.eye(4, dtype=np.float32)[:2] * 3
    y = np.repeat([0, 1], 20)
    x = centers[y] + rng.normal(0, 1, (40, 4)).astype(np.float32)
    model = fit_head(x, y, 2)
    assert model.C in ce._C_GRID
    assert (model.predict(centers) == [0, 1]).all()
    assert fit_head(x, y, 2, C=0.5).C == 0.5


def test_classify_text_method_embedding_routes_here():
    from inferframe.functions import classify_text

    df = ifr.from_pydict({"text": [t for t, _ in HELD_OUT]})
    out = df.with_column("topic", classify_text(col("text"), LABELS, method="embedding", examples=TRAIN)).to_pydict()
    assert out["topic"] == [lab for _, lab in HELD_OUT]
    assert len(out["topic_confidence"]) == len(HELD_OUT)


def test_head_with_descriptions_is_the_normalised_product():
    path = str(model_files(None))
    desc = (("sport", ("sports and games",)), ("food", ("food and cooking",)), ("weather", ("the weather",)))
    head = EmbeddingHead(path, labels=tuple(LABELS), examples=tuple(TRAIN))
    zero = EmbeddingHead(path, labels=tuple(LABELS), descriptions=desc)
    both = EmbeddingHead(path, labels=tuple(LABELS), examples=tuple(TRAIN), descriptions=desc)
    texts = [t for t, _ in HELD_OUT]
    product = head.predict_proba(texts) * zero.predict_proba(texts)
    np.testing.assert_allclose(both.predict_proba(texts), product / product.sum(axis=1, keepdims=True), atol=1e-5)
    np.testing.assert_allclose(both.predict_proba(texts).sum(axis=1), 1.0, atol=1e-6)
