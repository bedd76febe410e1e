"""A user's max_tokens and free text (issue 31 item 7).

``prompt(col('r'), return_format=Review, provider='local', max_tokens=120)``: the grammar let the
note run to 300 characters (about 100 tokens) after the rest of the answer, so a row was cut off
(``length``). Free-text strings and open lists now fit the user's budget, a nullable field may be
null, and the grammar lets the model close the JSON within max_tokens.
"""

from typing import Literal, Optional

import pytest
from pydantic import BaseModel, Field

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import prompt
from inferframe.functions.ai import prompt_call
from inferframe.providers.gbnf import json_schema_to_gbnf
from inferframe.structured.answer_budget import answer_token_bound, fit_to_budget
from inferframe.structured import json_schema_for


class Aspect(BaseModel):
    name: str
    positive: bool


class Review(BaseModel):
    sentiment: Literal["positive", "negative", "mixed"]
    stars: int = Field(ge=1, le=5)
    aspects: list[Aspect]
    note: Optional[str] = None


def review_schema() -> dict:
    return json_schema_for(Review, lengths=True)[1]


@pytest.mark.parametrize("budget", [40, 60, 120, 300, 1000])
def test_a_full_answer_fits_the_users_max_tokens(budget):
    fitted = fit_to_budget(review_schema(), budget)
    assert answer_token_bound(fitted) <= budget
    assert answer_token_bound(review_schema()) > 600  # before: 300-character strings, whatever the budget
    note = fitted["properties"]["note"]["anyOf"]
    assert {"type": "null"} in note  # the note may still be null
    aspects = fitted["properties"]["aspects"]
    assert aspects["maxItems"] >= (1 if budget >= 60 else 0)  # an empty list, where nothing more fits
    assert note[0]["maxLength"] >= 1 and aspects["items"]["properties"]["name"]["maxLength"] >= 1


def test_a_generous_budget_keeps_the_format_as_it_was():
    fitted = fit_to_budget(review_schema(), 1000)
    assert json_schema_to_gbnf(fitted).count("char{1,300}") == 2
    assert fit_to_budget(review_schema(), None) == review_schema()


def test_a_budget_that_cannot_hold_the_answer_is_an_error_naming_the_fix():
    with pytest.raises(PlanError, match=r"max_tokens=10 cannot hold .* Raise max_tokens to at least \d+"):
        fit_to_budget(review_schema(), 10)


def test_prompt_sends_the_grammar_of_the_fitted_format():
    call = prompt_call(col("r"), Review, None, "local", None, None, {"max_tokens": 120})
    grammar = dict(call.config.format_request)["grammar"]
    assert grammar == json_schema_to_gbnf(fit_to_budget(review_schema(), 120))
    assert "char{1,300}" not in grammar


REVIEWS = [
    "The kettle arrived dented and late, and support never answered my emails about a refund.",
    "Lovely little cafe: the coffee is strong, the staff are friendly and the cakes are fresh.",
    "Battery life is great but the screen scratches easily and the case feels cheap.",
]


@pytest.mark.timeout(600)
def test_reviews_on_the_local_model_close_their_json_within_max_tokens():
    out = ifr.from_pydict({"r": REVIEWS}).with_column(
        "v", prompt(col("r"), return_format=Review, provider="local", max_tokens=120, temperature=0)).to_pydict()
    errors = [e for e in out["v_error"] if e is not None]
    assert not [e for e in errors if e["kind"] == "length"], errors
    assert all(v is not None and 1 <= v["stars"] <= 5 for v in out["v"]), (out["v"], errors)


class Note(BaseModel):
    note: str


def test_a_row_whose_answer_failed_counts_the_request_that_was_sent():
    from inferframe.simulator import Simulator, SimulatorConfig

    with Simulator(SimulatorConfig()) as sim:
        df = ifr.from_pydict({"q": ["a", "a", "b"]}).with_column("v", prompt(
            col("q"), return_format=Note, provider="openai", base_url=sim.base_url, api_key="sk-x", model="gpt-5-mini",
            use_chat_completions=True, max_tokens=3))  # every answer is cut off: a 'length' error
        first = df.to_pydict()["v_error"]
        again = df.to_pydict()["v_error"]  # the same answers, from the cache
        sent = sim.stats()["total_requests"]
    assert sent == 2  # the two identical rows shared one request; the rerun sent none
    assert [e["kind"] for e in first + again] == ["length"] * 6
    # Before: [1, 0, 1] and [0, 0, 0]: the row sharing an answer, and every cached one, said 0.
    assert [e["attempts"] for e in first + again] == [1] * 6
