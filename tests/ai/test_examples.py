"""load_examples: balanced, deterministic, checked before any work; three input forms give the same pairs."""

import collections
import json

import numpy as np
import pytest

import inferframe as ifr
from inferframe.ai.examples import load_examples, nearest
from inferframe.errors import PlanError

PAIRS = [(f"pos {i}", "positive") for i in range(7)] + [(f"neg {i}", "negative") for i in range(4)] \
    + [(f"neu {i}", "neutral") for i in range(5)]
LABELS = ["positive", "negative", "neutral"]


def test_balanced_per_label_and_interleaved():
    out = load_examples(PAIRS, LABELS)
    counts = collections.Counter(label for _, label in out)
    assert counts == {"positive": 4, "negative": 4, "neutral": 4}  # the smallest label's count
    assert [label for _, label in out] == LABELS * 4
    assert all(text.startswith(label[:3]) for text, label in out)


def test_per_label_and_determinism():
    a = load_examples(PAIRS, LABELS, examples_per_label=2, seed=3)
    assert a == load_examples(PAIRS, LABELS, examples_per_label=2, seed=3)
    assert collections.Counter(label for _, label in a) == {label: 2 for label in LABELS}
    # Different seeds choose differently among the 7 positives (a sample, not always the first ones).
    picks = {tuple(t for t, lab in load_examples(PAIRS, LABELS, examples_per_label=2, seed=s) if lab == "positive")
             for s in range(10)}
    assert len(picks) > 1
    assert load_examples(PAIRS, LABELS, examples_per_label=2, seed=None)[:3] == [
        ("pos 0", "positive"), ("neg 0", "negative"), ("neu 0", "neutral")]


def test_bad_label_is_a_clear_plan_error():
    with pytest.raises(PlanError) as e:
        load_examples(PAIRS + [("meh", "mixed")], LABELS)
    assert "'mixed'" in str(e.value) and "['positive', 'negative', 'neutral']" in str(e.value)


def test_label_without_examples_and_too_many_per_label():
    with pytest.raises(PlanError, match="no example for label.*'other'"):
        load_examples(PAIRS, LABELS + ["other"])
    with pytest.raises(PlanError, match="examples_per_label=5.*negative"):
        load_examples(PAIRS, LABELS, examples_per_label=5)
    with pytest.raises(PlanError, match="no label"):
        load_examples([("x", None)], ["a"])


def test_bad_label_fails_at_plan_time_before_any_call():
    # classify_text checks its examples when the expression is built; nothing runs.
    from inferframe.functions import ai as ai_functions

    with pytest.raises(PlanError, match="'mixed'"):
        ai_functions.classify_text(ifr.col("text"), ["a", "b"], examples=[("x", "a"), ("y", "mixed")])


def test_three_input_forms_load_the_same_pairs(tmp_path):
    expected = load_examples(PAIRS, LABELS, seed=1)
    df = ifr.from_pydict({"text": [t for t, _ in PAIRS], "label": [lab for _, lab in PAIRS]})
    assert load_examples(df, LABELS, seed=1) == expected
    # Other column names: the first two columns are text and label.
    other = ifr.from_pydict({"review": [t for t, _ in PAIRS], "gold": [lab for _, lab in PAIRS]})
    assert load_examples(other, LABELS, seed=1) == expected
    df.write_parquet(str(tmp_path / "pq"))
    parquet = next((tmp_path / "pq").glob("*.parquet"))
    assert load_examples(parquet, LABELS, seed=1) == expected
    csv = tmp_path / "ex.csv"
    csv.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in PAIRS))
    assert load_examples(str(csv), LABELS, seed=1) == expected
    jsonl = tmp_path / "ex.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in PAIRS))
    assert load_examples(jsonl, LABELS, seed=1) == expected
    assert load_examples([{"text": t, "label": lab} for t, lab in PAIRS], LABELS, seed=1) == expected


def test_nearest_cosine_and_balanced():
    ex = np.array([[1, 0], [10, 1], [0, 1], [1, 1]], dtype=np.float32)
    # Cosine, not dot product: [10, 1] is long but [1, 0] points the same way as the row.
    assert nearest([[1, 0]], ex, 2).tolist() == [[0, 1]]
    assert nearest([[0, 1]], ex, 10).shape == (1, 4)
    got = nearest([[1, 0], [0, 1]], ex, 1, example_labels=["a", "a", "b", "b"])
    assert got.tolist() == [[0, 3], [1, 2]]
    with pytest.raises(PlanError, match="dimensions"):
        nearest([[1, 0, 0]], ex, 1)
