"""prompt() on the embedded local model: a real llama.cpp server with the packaged Gemma 3 270M."""

from typing import Literal

import pytest
from pydantic import BaseModel, Field

import inferframe as ifr
from inferframe import col
from inferframe.functions import classify_text, format, prompt

FEW_SHOT = (
    "Classify the sentiment of each review as positive or negative.\n\n"
    "Review: I love it, works perfectly.\nSentiment: positive\n\n"
    "Review: Terrible, broke in a day.\nSentiment: negative\n\n"
)


@pytest.fixture(scope="module")
def reviews():
    return ifr.read_csv("examples/data/reviews.csv")


# A 2-core machine serves the 270M model at a few rows/s; a busy one much slower.
LOCAL_TIMEOUT = pytest.mark.timeout(1200)


@LOCAL_TIMEOUT
def test_every_row_gets_a_non_empty_answer(reviews):
    df = reviews.limit(60).with_column(
        "answer", prompt(format("Review: {}\nSentiment:", col("review")), system_message=FEW_SHOT, max_tokens=3,
                         stop=["\n"], temperature=0),
    )
    out = df.to_pydict()
    assert len(out["answer"]) == 60
    assert out["answer_error"] == [None] * 60
    assert all(a is not None and a.strip() for a in out["answer"])


def test_system_message_changes_the_answers(reviews):
    rows = reviews.limit(12)
    q = format("Review: {}\nSentiment:", col("review"))
    sentiment = rows.with_column("a", prompt(q, system_message=FEW_SHOT, max_tokens=3, stop=["\n"], temperature=0))
    other = (
        "Translate each word to French.\n\nWord: cat\nFrench: chat\n\nWord: house\nFrench: maison\n\n"
    )
    french = rows.with_column("a", prompt(q, system_message=other, max_tokens=3, stop=["\n"], temperature=0))
    a, b = sentiment.to_pydict()["a"], french.to_pydict()["a"]
    assert a != b
    # The few-shot prompt mostly answers with the labels it was shown.
    assert sum(x.strip().lower() in ("positive", "negative") for x in a) >= 9


class Product(BaseModel):
    product: str
    sentiment: Literal["positive", "negative", "neutral"]
    stars: int = Field(ge=1, le=5)


EXTRACT_FEW_SHOT = (
    "Extract the product, the sentiment and a star rating from each review.\n\n"
    'Review: The headphones broke after a week.\nJSON: {"product": "headphones", "sentiment": "negative", "stars": 1}\n\n'
    'Review: Great blender, makes perfect smoothies.\nJSON: {"product": "blender", "sentiment": "positive", "stars": 5}\n\n'
    'Review: The tent is fine, nothing special.\nJSON: {"product": "tent", "sentiment": "neutral", "stars": 3}\n\n'
)


@LOCAL_TIMEOUT
def test_structured_extraction_gives_a_valid_struct_for_every_row(reviews):
    # The schema is enforced by llama.cpp's grammar; the few-shot examples keep the base model on track,
    # and repair=True asks once more if an answer is cut off or breaks the schema.
    # 6 rows: grammar-constrained answers run at a few tokens/s on this model (100 rows took 13.5 min, 12 rows
    # 98 s on a 2-core machine); every one of them must come back valid.
    df = reviews.limit(6).with_column(
        "info", prompt(format("Review: {}\nJSON:", col("review")), Product, system_message=EXTRACT_FEW_SHOT,
                       max_tokens=60, temperature=0, repair=True),
    )
    out = df.to_pydict()
    assert out["info_error"] == [None] * 6, [e for e in out["info_error"] if e][:3]
    assert all(r["sentiment"] in ("positive", "negative", "neutral") and isinstance(r["stars"], int) for r in out["info"])
    assert all(isinstance(r["product"], str) for r in out["info"])


def test_classify_text_is_constrained_to_the_labels(reviews):
    out = reviews.limit(20).with_column(
        "label", classify_text(col("review"), ["positive", "negative", "neutral"], temperature=0, max_tokens=20)
    ).to_pydict()
    assert out["label_error"] == [None] * 20
    assert set(out["label"]) <= {"positive", "negative", "neutral"}


class Tag(BaseModel):
    name: str


class TaggedReview(BaseModel):
    product: str
    sentiment: Literal["positive", "negative", "neutral"]
    tags: list[Tag] = Field(max_length=3)
    stars: int = Field(ge=1, le=5)


TAG_FEW_SHOT = (
    "Extract the product, the sentiment, up to three tags and the star rating from each review.\n\n"
    'Review: The headphones broke after a week.\nJSON: {"product":"headphones","sentiment":"negative",'
    '"tags":[{"name":"durability"}],"stars":1}\n\n'
)


@LOCAL_TIMEOUT
def test_a_nested_list_model_gives_a_valid_struct_for_every_short_review(reviews):
    out = reviews.limit(4).with_column(  # 8 rows took 58 s on a 2-core machine
        "r", prompt(format("Review: {}\nJSON:", col("review")), TaggedReview, system_message=TAG_FEW_SHOT,
                    max_tokens=200, temperature=0, usage_column=True),
    ).to_pydict()
    assert out["r_error"] == [None] * 4, [e for e in out["r_error"] if e][:2]
    assert all(isinstance(r["tags"], list) and len(r["tags"]) <= 3 and 1 <= r["stars"] <= 5 for r in out["r"])
    # Compact JSON: a 4-field answer takes tens of tokens, not the whole budget.
    assert max(u["output_tokens"] for u in out["r_usage"]) < 120


@LOCAL_TIMEOUT
def test_structured_output_without_max_tokens_is_bounded_by_the_schema(reviews):
    expr = prompt(format("Review: {}\nJSON:", col("review")), TaggedReview, temperature=0, usage_column=True)
    budget = expr._node.child.args[0].udf.owner.args[0].max_output_tokens  # the call config's one cap
    assert 64 <= budget <= 2048
    out = reviews.limit(1).with_column("r", expr).to_pydict()  # one row: 2 took 76-99 s on a 2-core machine
    assert all(u["output_tokens"] <= budget for u in out["r_usage"])
