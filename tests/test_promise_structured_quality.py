"""Issue 41 item 4: structured output whose answers carry no information is reported.

README, "Structured outputs: typed columns": a field that is the same in (nearly) every row, and numbers
outside the range the schema or the system message gives, end the job with a ``LowInformationWarning``
naming the measurement and the fix; an answer that writes the digits of one number until max_tokens says
"The model repeated itself", not "raise max_tokens".

The answers come from the project's OpenAI simulator, whose responder plays the model; one smoke test runs
the embedded Gemma 3 270M model, on which the issue saw every row's rating and complaint the same.
"""

import json
import warnings
from typing import Literal

import pytest
from pydantic import BaseModel, Field

import inferframe as ifr
from inferframe import col
from inferframe.errors import LowInformationWarning
from inferframe.functions import prompt
from inferframe.observe.progress import last_run
from inferframe.simulator import Simulator, SimulatorConfig


class Review(BaseModel):
    rating: int
    complaint: bool
    product: str


class BoundedReview(BaseModel):
    rating: int = Field(ge=1, le=5)
    complaint: bool


class LabelledReview(BaseModel):
    stars: Literal[1, 2, 3, 4, 5]
    complaint: bool


REVIEWS = [f"review {i}: the {name} " + ("arrived damaged" if i % 3 == 0 else "works well")
           for i, name in enumerate(["kettle", "lamp", "blender", "toaster", "fan"] * 4)]
FIX = "use a stronger model (e.g. provider='openai', model='gpt-5-mini')"


def text_of(body):
    return body["messages"][-1]["content"]


def api(sim, **kw):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-t", model="gpt-5-mini", use_chat_completions=True,
                cache="off", **kw)


def low_information(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in seen if w.category is LowInformationWarning]


def index_of(body):
    return int(text_of(body).split(":")[0].split()[-1])


def product_of(body):
    return text_of(body).split(":")[1].split()[1]


# --- a field the same in (nearly) every row ---------------------------------------------------------

def test_promise_a_field_the_same_in_nearly_every_row_is_reported_once_per_field_with_the_measurement_and_the_fix():
    # The case: rating 1 and complaint False on every row, product varies.
    answer = lambda body: json.dumps({"rating": 1, "complaint": False, "product": product_of(body)})  # noqa: E731
    df = ifr.from_pydict({"review": REVIEWS})
    with Simulator(SimulatorConfig(responder=answer)) as s:
        out, seen = low_information(lambda: df.with_column("r", prompt(col("review"), Review, **api(s))).to_pydict())
    assert [r["rating"] for r in out["r"]] == [1] * 20  # the answers are kept: reported, not replaced
    assert len(seen) == 2, [str(w.message) for w in seen]
    texts = sorted(str(w.message) for w in seen)
    assert "field 'complaint' is False in 20/20 rows" in texts[0] and "field 'rating' is 1 in 20/20 rows" in texts[1]
    for t in texts:
        assert "answers of prompt[" in t and "gpt-5-mini" in t and FIX in t and "Field(description=...)" in t
    assert all(w.filename == __file__ for w in seen)  # at the user's line
    (run,) = last_run()
    assert sorted(m["field"] for m in run["field_quality"]) == ["complaint", "rating"]
    assert {m["check"] for m in run["field_quality"]} == {"constant_field"}


def test_promise_fields_that_follow_the_rows_or_too_few_rows_give_no_warning():
    follows = lambda body: json.dumps({"rating": 1 + index_of(body) % 5, "complaint": "damaged" in text_of(body),  # noqa: E731
                                       "product": product_of(body)})
    with Simulator(SimulatorConfig(responder=follows)) as s:
        _, seen = low_information(lambda: ifr.from_pydict({"review": REVIEWS}).with_column(
            "r", prompt(col("review"), Review, **api(s))).to_pydict())
        assert seen == [] and last_run()[0]["field_quality"] == []
        s.configure(responder=lambda body: json.dumps({"rating": 1, "complaint": False, "product": "x"}))
        _, seen = low_information(lambda: ifr.from_pydict({"review": REVIEWS[:9]}).with_column(
            "r", prompt(col("review"), Review, **api(s))).to_pydict())
        assert seen == []  # 9 rows all alike may be the truth: at least 10 are judged, as for labels


def test_promise_one_different_row_in_twenty_is_still_nearly_every_row():
    answer = lambda body: json.dumps({"rating": 4 if index_of(body) == 7 else 2, "complaint": "damaged" in text_of(body),  # noqa: E731
                                      "product": product_of(body)})
    with Simulator(SimulatorConfig(responder=answer)) as s:
        _, seen = low_information(lambda: ifr.from_pydict({"review": REVIEWS}).with_column(
            "r", prompt(col("review"), Review, **api(s))).to_pydict())
    assert [str(w.message).split(": ")[1].split(";")[0] for w in seen] == ["field 'rating' is 2 in 19/20 rows"]


def test_the_counts_of_several_processes_add_up_and_stay_bounded():
    from inferframe.observe.quality import count_record, guard_fields, merge_field_counts, new_field_counts

    a, b = new_field_counts(["rating", "product"]), new_field_counts(["rating", "product"])
    for i in range(6):
        count_record(a, {"rating": 3, "product": f"p{i}"})
        count_record(b, {"rating": 3, "product": f"q{i}" * 30})  # long values: a prefix and a hash
    for i in range(100):
        count_record(b, {"rating": 3, "product": f"r{i}"})
    total = {}
    merge_field_counts(total, a)
    merge_field_counts(total, b)
    assert total["rating"]["values"] == {"3": 112} and total["rating"]["rows"] == 112
    assert len(total["product"]["values"]) == 32 and total["product"]["rows"] == 112  # at most 32 kept
    runs = [{"label": "prompt[m]", "fields": total}]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        guard_fields(runs)
    assert [str(w.message).split(": ")[1].split(";")[0] for w in seen] == ["field 'rating' is 3 in 112/112 rows"]


# --- numbers outside the range the schema or the system message gives --------------------------------

def test_promise_a_range_is_read_from_the_system_message_only_where_it_is_explicit_next_to_the_field():
    from inferframe.ai.quality import prompt_range

    assert prompt_range("Give a rating 1-5.", "rating") == (1, 5)
    assert prompt_range("rating (1 to 10), complaint yes/no", "rating") == (1, 10)
    assert prompt_range("Give a 1–5 rating.", "rating") == (1, 5)
    assert prompt_range("Score it from 0..100.", "score") == (0, 100)
    assert prompt_range("Give a rating. Use 1-5 stars.", "rating") is None  # another sentence: not trusted
    assert prompt_range("Review 2021-2022: give a rating", "rating") is None  # the range is not next to the name
    assert prompt_range("rating 5-1", "rating") is None and prompt_range("Rate 1-5.", "rating") is None
    assert prompt_range("the star_rating 1-5", "star_rating") == (1, 5)


def test_promise_numbers_outside_the_range_the_system_message_states_are_reported_with_counts():
    answer = lambda body: json.dumps({"rating": [3, 7, 0, 12][index_of(body) % 4] if index_of(body) < 8 else 1 + index_of(body) % 5,  # noqa: E731
                                      "complaint": "damaged" in text_of(body), "product": product_of(body)})
    df = ifr.from_pydict({"review": REVIEWS})
    with Simulator(SimulatorConfig(responder=answer)) as s:
        out, seen = low_information(lambda: df.with_column("r", prompt(
            col("review"), Review, system_message="Read the review. Give its rating from 1 to 5 and whether it is a "
                                                  "complaint.", **api(s))).to_pydict())
    assert sum(r["rating"] > 5 or r["rating"] < 1 for r in out["r"]) == 6  # kept as answered
    assert len(seen) == 1
    text = str(seen[0].message)
    assert "field 'rating' is outside 1..5 (from the system message) in 6/20 answers (2 below, 4 above)" in text
    assert "Field(ge=1, le=5)" in text  # the fix: put the range in the schema
    (m,) = last_run()[0]["field_quality"]
    assert (m["check"], m["below"], m["above"], m["checked"]) == ("out_of_range", 2, 4, 20)


def test_promise_numbers_outside_the_range_the_schema_gives_are_reported_with_counts():
    # A strict server does not enforce minimum/maximum: the answers come back, break the schema, and fail.
    answer = lambda body: json.dumps({"rating": 9 if index_of(body) < 4 else 1 + index_of(body) % 5,  # noqa: E731
                                      "complaint": "damaged" in text_of(body)})
    df = ifr.from_pydict({"review": REVIEWS})
    with Simulator(SimulatorConfig(responder=answer)) as s:
        out, seen = low_information(lambda: df.with_column("r", prompt(col("review"), BoundedReview, **api(s))).to_pydict())
    assert [e["kind"] for e in out["r_error"][:4]] == ["schema"] * 4 and out["r_error"][4] is None
    assert len(seen) == 1
    assert "field 'rating' is outside 1..5 (from the schema) in 4/20 answers (0 below, 4 above)" in str(seen[0].message)


def test_promise_a_literal_of_numbers_is_a_range_too():
    answer = lambda body: json.dumps({"stars": 6 if index_of(body) < 3 else 1 + index_of(body) % 5,  # noqa: E731
                                      "complaint": "damaged" in text_of(body)})
    with Simulator(SimulatorConfig(responder=answer)) as s:
        _, seen = low_information(lambda: ifr.from_pydict({"review": REVIEWS}).with_column(
            "r", prompt(col("review"), LabelledReview, **api(s))).to_pydict())
    assert len(seen) == 1 and "field 'stars' is outside 1..5 (from the schema) in 3/20 answers" in str(seen[0].message)


def test_promise_ai_extract_in_sql_reports_a_rating_outside_the_range_its_system_message_states(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    answer = lambda body: json.dumps({"rating": 1000000020000030 if index_of(body) < 2 else 1 + index_of(body) % 5,  # noqa: E731
                                      "complaint": "damaged" in text_of(body)})
    reviews = ifr.from_pydict({"review": REVIEWS})
    with Simulator(SimulatorConfig(responder=answer)) as s:
        _, seen = low_information(lambda: ifr.sql(
            f"select ai_extract(review, 'rating int, complaint bool', system_message => 'Extract the rating 1-5 and "
            f"whether it is a complaint.', provider => 'openai', base_url => '{s.base_url}', model => 'gpt-5-mini', "
            f"use_chat_completions => true, cache => 'off') as r from reviews", reviews=reviews).to_pydict())
    assert len(seen) == 1
    assert "field 'rating' is outside 1..5 (from the system message) in 2/20 answers (0 below, 2 above)" \
        in str(seen[0].message)


# --- digits that run until max_tokens: the model repeated itself -------------------------------------

DIGITS = "1000000020000030000004000000500000060000007000000800000090000001"


def test_promise_a_number_whose_digits_run_to_max_tokens_says_the_model_repeated_itself():
    from inferframe.structured.repetition import runaway_number

    assert runaway_number('{"rating":' + DIGITS) == DIGITS
    assert runaway_number('{"rating":4,"summary":"' + DIGITS) is None  # in a string: repeated_phrase's job
    answers = {"0": '{"rating":' + DIGITS * 4, "1": '{"rating":3,"complaint":false,"product":"' + " ".join(
        f"word{i}" for i in range(80))}
    with Simulator(SimulatorConfig(responder=lambda body: answers[text_of(body)[-1]])) as s:
        out = ifr.from_pydict({"q": ["row 0", "row 1"]}).with_column(
            "r", prompt(col("q"), Review, max_tokens=30, **api(s))).to_pydict()
    digits, long = out["r_error"]
    assert digits["kind"] == "length" and digits["message"].startswith("The model repeated itself;")
    assert "raise max_tokens" not in digits["message"] and "digits" in digits["message"] and "Fix:" in digits["message"]
    # An answer that was merely too long still says to raise max_tokens.
    assert long["kind"] == "length" and "raise max_tokens" in long["message"]


def test_promise_ai_extract_looping_on_digits_says_the_model_repeated_itself(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    t = ifr.from_pydict({"review": ["The kettle arrived damaged."]})
    with Simulator(SimulatorConfig(responder=lambda body: '{"rating":' + DIGITS * 4)) as s:
        out = ifr.sql(f"select ai_error(ai_extract(review, 'rating int', max_tokens => 30, provider => 'openai', "
                      f"base_url => '{s.base_url}', model => 'gpt-5-mini', use_chat_completions => true, "
                      f"cache => 'off')).message as why from t", t=t).to_pydict()
    assert out["why"][0].startswith("The model repeated itself;") and "raise max_tokens" not in out["why"][0]


# --- the embedded model (smoke) -------------------------------------------------------------------------

class Rated(BaseModel):
    rating: int
    complaint: bool


@pytest.mark.timeout(1200)  # the embedded model on a shared 2-core machine
def test_promise_on_the_embedded_model_answers_that_carry_no_information_are_reported():
    """The issue's run on the default model (no provider named): what the guard reports is true of the answers.

    The 270M base model's answers here (temperature 0) are a rating of 1 on most rows, sometimes a few far
    outside 1..5, and complaint False on nearly every row (row 1 is "arrived damaged"). Its exact answers
    differ by CPU build (one build's complaint was False on 12/12 rows, another's on 11/12, under the 95%
    bar), so the test asks the guard for exactly the checks the answers call for: a field the same in 95% of
    10 or more rows, and ratings outside 1..5. Each one it reports is true of them, and none is missed.
    """
    df = ifr.read_csv("examples/data/reviews.csv").limit(12)  # row 1: "The running shoes arrived damaged ..."
    out, seen = low_information(lambda: df.with_column("r", prompt(
        col("review"), Rated, system_message="Give the review's rating from 1 to 5 and whether it is a complaint.",
        temperature=0, cache="off")).to_pydict())
    answers = [r for r in out["r"] if r is not None]
    assert len(answers) >= 10, out["r"]  # the schema-constrained answers parsed
    fired = last_run()[0]["field_quality"] or []
    expected = {(f, "constant_field") for f in ("rating", "complaint")
                if max([r[f] for r in answers].count(v) for v in [r[f] for r in answers]) >= 0.95 * len(answers)}
    if any(not 1 <= r["rating"] <= 5 for r in answers):
        expected.add(("rating", "out_of_range"))
    assert {(m["field"], m["check"]) for m in fired} == expected, f"answers: {answers}; fired: {fired}"
    for m in fired:
        values = [r[m["field"]] for r in answers]
        if m["check"] == "constant_field":
            assert m["rows"] == len(values)
        else:
            assert m["below"] + m["above"] == sum(not 1 <= v <= 5 for v in values) > 0
    assert len(seen) == len(fired)
    assert all("gemma-3-270m" in str(w.message) for w in seen)
