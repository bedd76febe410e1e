"""Answers that loop: spotted, reported as "the model repeated itself" with a fix, never "raise max_tokens".

The answers come from the project's OpenAI simulator (a responder plays a model that loops); the
local provider's request fields are checked at plan time (no server needed).
"""

import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig
from inferframe.structured.repetition import looping_field, repeated_phrase


class MovieReview(BaseModel):
    rating: int = Field(ge=1, le=5)
    summary: str
    verdict: Literal["watch", "skip"]


LOOP = "Great anime. " * 40


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(record_requests=True)) as s:
        yield s


def ask(sim, **kw):
    return prompt(col("q"), MovieReview, provider="openai", model="gpt-5-mini", base_url=sim.base_url, api_key="k", **kw)


def test_a_phrase_repeated_to_the_end_is_a_loop_and_ordinary_text_is_not():
    assert repeated_phrase('{"rating":3,"summary":"It is fun. ' + LOOP[:-5]) == "Great anime."
    assert repeated_phrase("Great anime. Great anime. A fun show with a great cast, well worth it.") is None
    assert repeated_phrase("ha ha ha") is None and repeated_phrase("-" * 80) is None
    # Cut at max_tokens, a run of one digit is a loop too (Gemma writes "1000000..." one token a digit).
    assert repeated_phrase('{"rating":1,"summary":"1' + "0" * 60, min_distinct=0) == "0"
    assert looping_field({"rating": 2, "tags": ["ok", "Nice. " + "So so. " * 9]}) == ("tags[1]", "So so.")
    assert looping_field({"rating": 2, "summary": "Short and fine."}) is None


def test_an_answer_cut_inside_a_loop_says_the_model_repeated_itself(sim):
    answers = {"row-loop": '{"rating":3,"summary":"' + LOOP,
               "row-long": '{"rating":3,"summary":"' + " ".join(f"word{i}" for i in range(60))}
    sim.configure(responder=lambda req: next(a for k, a in answers.items() if k in json.dumps(req)))
    out = ifr.from_pydict({"q": ["row-loop", "row-long"]}).with_column("r", ask(sim, max_tokens=30)).to_pydict()
    loops, long = out["r_error"]
    assert loops["kind"] == "length" and loops["message"].startswith("The model repeated itself;")
    assert "Great anime." in loops["message"] and "raise max_tokens" not in loops["message"]
    assert "Fix:" in loops["message"]
    # An answer that was merely too long still says to raise max_tokens.
    assert long["kind"] == "length" and "raise max_tokens" in long["message"]


def test_a_valid_record_whose_text_loops_to_its_bound_is_an_error_not_a_value(sim):
    looped = json.dumps({"rating": 4, "summary": "Fun. " + LOOP[:280], "verdict": "watch"})
    fine = json.dumps({"rating": 4, "summary": "A fun show with a great cast.", "verdict": "watch"})
    sim.configure(responder=lambda req: looped if "row-loop" in json.dumps(req) else fine)
    out = ifr.from_pydict({"q": ["row-loop", "row-fine"]}).with_column("r", ask(sim)).to_pydict()
    assert out["r"][0] is None and out["r_error"][0]["kind"] == "length"
    assert out["r_error"][0]["message"].startswith("The model repeated itself; field 'summary' repeats 'Great anime.'")
    assert out["r"][1]["summary"] == "A fun show with a great cast." and out["r_error"][1] is None


def _fields(expr) -> dict:
    return dict(expr._node.child.args[0].udf.owner.args[0].format_request)


def test_the_local_provider_asks_for_dry_sampling_and_a_bounded_summary_and_the_user_can_turn_it_off():
    fields = _fields(prompt(col("q"), MovieReview))  # the embedded model: planned, not started
    assert fields["dry_multiplier"] > 0 and fields["dry_allowed_length"] >= 1
    assert "char{1,300}" in fields["grammar"]

    class Short(BaseModel):
        summary: str = Field(max_length=80)

    assert "char{1,80}" in _fields(prompt(col("q"), Short))["grammar"]
    off = prompt(col("q"), MovieReview, dry_multiplier=0)
    assert "dry_multiplier" not in _fields(off)  # the user's option goes in the body instead
    assert dict(off._node.child.args[0].udf.owner.args[0].options)["dry_multiplier"] == 0
