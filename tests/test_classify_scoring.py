"""classify_text: the confidence column, label scoring with calibration, and few-shot examples."""

from __future__ import annotations

import importlib.util

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import classify_text

LABELS = ["positive", "negative"]


def test_confidence_column_type_is_known_at_plan_time():
    df = ifr.from_pydict({"t": ["good", "bad"]})
    out = df.with_column("label", classify_text(col("t"), LABELS, model="gemma-3-270m", method="generate"))
    assert out.column_names == ["t", "label", "label_error", "label_confidence"]
    assert out.schema()["label_confidence"].to_arrow() == pa.float64()


def test_confidence_column_can_be_left_out():
    df = ifr.from_pydict({"t": ["good"]})
    out = df.with_column("label", classify_text(col("t"), LABELS, model="gemma-3-270m", method="generate",
                                                confidence_column=False))
    assert out.column_names == ["t", "label", "label_error"]


def test_bad_method_is_a_plan_error():
    with pytest.raises(PlanError, match="method='best'"):
        classify_text(col("t"), LABELS, model="gemma-3-270m", method="best")


@pytest.mark.skipif(importlib.util.find_spec("inferframe.functions.classify_embedding") is not None,
                    reason="the embedding head exists")
def test_embedding_method_without_its_module_is_a_plan_error():
    with pytest.raises(PlanError, match="method='embedding'"):
        classify_text(col("t"), LABELS, method="embedding", examples=[("a", "positive"), ("b", "negative")])
