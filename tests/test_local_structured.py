"""Structured output with a free-text field on the embedded model (a real llama.cpp server, Gemma 3 270M).

Issue 27: a zero-shot "rate and summarise" prompt with an int rating, a str summary and a Literal
gave a ``length`` error on every row: the base model repeated its summary until max_tokens. Free-text
strings are now bounded in the grammar and DRY sampling breaks the loop.
"""

from typing import Literal

import pytest
from pydantic import BaseModel, Field

import inferframe as ifr
from inferframe import col
from inferframe.functions import format, prompt


class MovieReview(BaseModel):
    rating: int = Field(ge=1, le=5)
    summary: str
    verdict: Literal["recommend", "avoid", "neutral"]


ROWS = 6  # grammar-constrained answers run at a few tokens/s here: 20 rows took 8 min, 10 rows 42-136 s


@pytest.mark.timeout(1200)
def test_a_summary_field_gives_valid_records_on_the_bundled_reviews():
    df = ifr.read_csv("examples/data/reviews.csv").limit(ROWS).with_column(
        "r", prompt(format("Rate this review 1-5 and summarise: {}", col("review")), return_format=MovieReview),
    )
    out = df.to_pydict()
    errors = [e for e in out["r_error"] if e is not None]
    # A valid record has a summary: main's grammar let the model close it at once ("summary":"").
    valid = [r for r in out["r"] if r is not None and r["summary"].strip() and 1 <= r["rating"] <= 5]
    assert len(valid) >= ROWS - 1, (len(valid), errors[:3], [r for r in out["r"] if r is not None][:3])
    # A row that still fails says why, and never asks for more tokens when the model looped.
    assert not [e for e in errors if e["kind"] == "length" and "raise max_tokens" in e["message"]]
