"""Calibrated yes/no and label scores (issue 31 item 3): sem_filter divides out P(yes) for its statement with the row
content-free; the CLI's --labels scores labels where the server gives log-probabilities.

First on a server built to be biased towards "yes" (offline), then the reproductions on the embedded model.
"""

import asyncio
import csv
import math
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe.ai.sem_filter import SemFilterOperator
from inferframe.errors import LowInformationWarning, PlanError
from inferframe.functions import sem_predicate
from inferframe.functions._sem_filter import content_free_statements, sem_filter_call
from inferframe.functions.templates import parse_template
from inferframe.providers.interface import BaseTransport, Capabilities, Outcome, Usage
from inferframe.providers.label_scores import LlamaCppScorer
from inferframe.series import Series

ROOT = Path(__file__).resolve().parent.parent


class YesSayer(BaseTransport):
    """Answers label-scoring requests like llama.cpp: P(yes) 0.9 for the statement with no content (the model's
    bias for this question), 0.8 for a row that does not fit it, 0.97 for one that does ("cat" in it)."""

    capabilities = Capabilities(logprobs="tokens")
    name = service = cache_identity = "yes-sayer"

    def __init__(self):
        self.prompts = []

    async def label_scorer(self, labels):
        return LlamaCppScorer(labels, ((1,), (2,)))

    async def send(self, request):
        prompt = request.body["prompt"]
        self.prompts.append(prompt)
        row = prompt.split("Statement: ", 1)[1].split(" mentions a cat")[0]
        p_yes = 0.9 if row in ("N/A", "", "[MASK]") else 0.97 if "cat" in row else 0.8
        token = request.body["logit_bias"][0][0]
        p = p_yes if token == 1 else 1 - p_yes
        return Outcome(value=[[token, math.log(p)]], usage=Usage(10, 1), status=200)


def _filter(server, texts, **kw):
    config = sem_filter_call("{r} mentions a cat", model="gemma-3-270m", cache="off", **kw).args[0]

    n = len(texts)
    parts = [["Statement: "] * n, texts, ["\nIs the statement true? Answer yes or no."] * n]  # the call's inputs

    async def run():
        op = SemFilterOperator(config, provider=server)
        try:
            return await op(*[Series(pa.array(p)) for p in parts])
        finally:
            await op.aclose()

    return asyncio.run(run())


def test_sem_filter_calibrates_on_its_statement_with_the_row_content_free():
    texts = ["a dog barked", "my cat purred", "nice lamp"]
    raw = _filter(YesSayer(), texts, calibrate=False)
    assert raw.field("value").to_pylist() == [True, True, True]  # before: every row "mentions a cat"
    server = YesSayer()
    calibrated = _filter(server, texts)
    assert calibrated.field("value").to_pylist() == [False, True, False]
    # P(yes) 0.8 against the statement's own 0.9: 0.8/0.9 vs 0.2/0.1.
    assert calibrated.field("confidence").to_pylist()[0] == pytest.approx((0.8 / 0.9) / (0.8 / 0.9 + 2))
    assert sum("Statement: N/A mentions a cat\nIs the statement true?" in p for p in server.prompts) == 2


def test_content_free_statements_keep_the_question_and_every_field():
    t = parse_template("{a} is older than {b}", "sem_filter")
    assert content_free_statements(t) == (
        "Statement: N/A is older than N/A\nIs the statement true? Answer yes or no.",
        "Statement:  is older than \nIs the statement true? Answer yes or no.",
        "Statement: [MASK] is older than [MASK]\nIs the statement true? Answer yes or no.")
    assert sem_filter_call("{a} is old", model="gemma-3-270m", calibrate=False).args[0].content_free == ()
    with pytest.raises(PlanError, match="calibrate='yes'"):
        sem_filter_call("{a} is old", model="gemma-3-270m", calibrate="yes")


# --- the embedded model: what a new user met (issue 31 item 3) ------------------------------------------

def first_reviews(n=20):
    with open(ROOT / "examples" / "data" / "reviews.csv", newline="", encoding="utf-8") as f:
        return [r["review"] for r in csv.DictReader(f)][:n]


def test_a_cat_is_not_found_in_every_review_on_the_embedded_model():
    """Before: sem_predicate("{review} mentions a cat") was True on 20 of 20 reviews, with no warning."""
    df = ifr.from_pydict({"review": first_reviews()})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = df.with_column("cat", sem_predicate("{review} mentions a cat", model="gemma-3-270m")).to_pydict()
    warned = [w for w in seen if w.category is LowInformationWarning]
    assert sum(out["cat"]) <= 2 or warned, (sum(out["cat"]), out["cat_confidence"])


def test_delivery_complaints_are_not_every_review_on_the_embedded_model():
    """Before: sem_filter("{review} is a complaint about delivery or shipping") kept 20 of 20 (5 are true)."""
    reviews = first_reviews()
    truth = {r for r in reviews if "arrived damaged" in r or "shipping was slow" in r}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        kept = ifr.from_pydict({"review": reviews}).sem_filter("{review} is a complaint about delivery or shipping",
                                                               model="gemma-3-270m").to_pydict()["review"]
    warned = [w for w in seen if w.category is LowInformationWarning]
    assert len(kept) <= 10 or warned, kept
    assert len(truth & set(kept)) >= len(truth) // 2 or warned, kept


def test_cli_choices_scores_labels_on_the_embedded_model(tmp_path):
    """Before: `prompt --choices positive,negative,neutral` (now --labels; constrained generation) labelled "it is a scam" positive."""
    from typer.testing import CliRunner

    from inferframe.cli.base import app

    src = tmp_path / "reviews.csv"
    src.write_text("review\n\"Do not buy this running shoes, it is a scam.\"\n\"Absolutely love this keyboard, works "
                   "perfectly.\"\n", encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["prompt", str(src), "--column", "review", "--labels",
                                      "positive,negative,neutral", "--out", str(out)])
    assert result.exit_code == 0, result.output
    got = ifr.read_parquet(str(out)).to_pydict()
    assert got["answer"] == ["negative", "positive"]
    assert all(0 < p <= 1 for p in got["answer_confidence"])
