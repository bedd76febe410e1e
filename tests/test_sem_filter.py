"""sem_filter / sem_predicate on the simulator (planted answers) and the embedded model: plans, limit, errors, cascade."""

import json
import random

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError, RowFailed
from inferframe.functions import sem_predicate
from inferframe.observe.progress import last_run
from inferframe.simulator import Simulator, SimulatorConfig


def planted(body):
    """Yes for rows that say "good", "maybe" (outside the labels) for rows that say "broken", no otherwise."""
    text = body["messages"][-1]["content"]
    label = "maybe" if "broken" in text else "yes" if "good" in text else "no"
    return json.dumps({"label": label})


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=planted)) as s:
        yield s


def api(sim, **kw):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-t", model="gpt-5-mini", use_chat_completions=True,
                cache="off", **kw)


def reviews(n, bad_every=3, broken=()):
    return ifr.from_pydict({"r": [("broken" if i in broken else "bad" if i % bad_every == 0 else "good") + f" film {i}"
                                  for i in range(n)]})


def test_keeps_the_rows_the_model_says_yes_to_with_one_call_per_row(sim):
    out = reviews(30).sem_filter("{r} is a positive review", **api(sim)).to_pydict()
    assert out["r"] == [f"good film {i}" for i in range(30) if i % 3] and out["sem_filter"] == [True] * 20
    assert sim.stats()["total_requests"] == 30
    (run,) = last_run()
    assert run["label"] == "sem_filter[generate gpt-5-mini]" and run["requests"] == 30


def test_the_statement_is_the_template_filled_with_the_row(sim):
    seen = []

    def spy(body):
        seen.append(body["messages"][-1]["content"])
        return json.dumps({"label": "yes"})

    sim.configure(responder=spy)
    ifr.from_pydict({"a": ["x"], "b": ["y"]}).sem_filter("{a} is older than {b}", **api(sim)).to_pydict()
    assert seen == ["Statement: x is older than y\nIs the statement true? Answer yes or no."]


def test_works_through_where_and_as_a_column_with_p_yes(sim):
    df = reviews(6)
    assert df.where(sem_predicate("{r} is positive", **api(sim))).count_rows() == 4
    out = df.with_column("ok", sem_predicate("{r} is positive", **api(sim))).to_pydict()
    assert out["ok"] == [i % 3 != 0 for i in range(6)]
    assert out["ok_confidence"] == [None] * 6  # generation gives no probability
    kept = df.where(sem_predicate("{r} is positive", **api(sim)) & (col("r") != "good film 1")).to_pydict()["r"]
    assert kept == ["good film 2", "good film 4", "good film 5"]


def test_limit_stops_sending_once_enough_rows_pass(sim):
    df = reviews(500, bad_every=10)
    out = df.sem_filter("{r} is a positive review", **api(sim)).limit(5).to_pydict()
    assert out["r"] == ["good film 1", "good film 2", "good film 3", "good film 4", "good film 5"]
    limited = sim.stats()["total_requests"]
    assert limited <= 6 + 16  # rows 0..5 hold 5 passes; at most a window of 16 rows past the earliest pending one
    (run,) = last_run()
    assert run["stage_rows"]["skipped (limit reached)"] > 0  # rows of the batches it saw, never sent
    df.sem_filter("{r} is a positive review", **api(sim)).to_pydict()
    assert sim.stats()["total_requests"] - limited == 500  # the naive plan: one call per row


def test_limit_counts_rows_in_order_across_batches(sim):
    # Passing rows only late in the data: the filter goes on batch after batch until 3 have passed.
    df = ifr.from_pydict({"r": ["bad film"] * 300 + [f"good film {i}" for i in range(20)]})
    out = df.sem_filter("{r} is positive", **api(sim)).limit(3).to_pydict()
    assert out["r"] == ["good film 0", "good film 1", "good film 2"]
    assert sim.stats()["total_requests"] <= 300 + 3 + 16


def test_failed_rows_are_dropped_and_counted_or_kept_with_their_error_or_raise(sim):
    df = reviews(9, broken={1, 4})
    dropped = df.sem_filter("{r} is positive", error_column=False, **api(sim)).to_pydict()["r"]
    assert dropped == ["good film 2", "good film 5", "good film 7", "good film 8"]
    (run,) = last_run()
    assert run["errors"] == 2
    out = df.sem_filter("{r} is positive", error_column="ok", **api(sim)).to_pydict()
    assert out["r"] == ["broken film 1", "good film 2", "broken film 4", "good film 5", "good film 7", "good film 8"]
    assert out["ok"] == [None, True, None, True, True, True]
    assert [e and e["kind"] for e in out["ok_error"]] == ["schema", None, "schema", None, None, None]
    with pytest.raises(RowFailed):
        df.sem_filter("{r} is positive", on_error="raise", **api(sim)).to_pydict()


def test_explain_shows_the_plan_and_its_estimated_calls(sim, capsys):
    text = reviews(40).sem_filter("{r} is positive", **api(sim)).limit(5).explain()
    assert "sem_filter[generate gpt-5-mini]: constrained generation of 'yes' or 'no'; up to 40 calls" in text
    assert "stops once 5 rows pass" in text


@pytest.mark.parametrize("kwargs, message", [
    ({"target_recall": 0.9}, "pass examples="),
    ({"target_recall": 1.5, "oracle_budget": 10}, "target_recall=1.5"),
    ({"target_recall": 0.9, "oracle_budget": 0}, "oracle_budget=0"),
    ({"examples": [("x", True)]}, "pass target_recall"),
    ({"target_recall": 0.9, "examples": [("x", "yes")]}, "True/False"),
    ({"method": "embedding"}, "method='embedding'"),
])
def test_mistakes_are_plan_errors_before_any_request(kwargs, message):
    with pytest.raises(PlanError, match=message):
        sem_predicate("{r} is positive", model="gemma-3-270m", **kwargs)
    with pytest.raises(PlanError, match="names no column"):
        sem_predicate("is positive", model="gemma-3-270m")


ANIMALS = ["a cat sleeps on the sofa", "the dog barks at the mailman", "a horse runs in the field",
           "kittens play with yarn", "the parrot repeats words", "a cow grazes in the meadow"]
OTHER = ["the tax form is due in april", "interest rates rose again", "the spreadsheet has an error",
         "quarterly earnings were flat", "the invoice was paid late", "the budget meeting ran long"]


def test_cascade_meets_target_recall_on_a_planted_truth_and_asks_the_model_less():
    rng = random.Random(7)
    truth = [rng.random() < 0.3 for _ in range(400)]
    rows = [f"{rng.choice(ANIMALS if t else OTHER)} ({i})" for i, t in enumerate(truth)]

    def oracle(body):
        text = body["messages"][-1]["content"]
        i = int(text.split("(")[-1].split(")")[0])
        return json.dumps({"label": "yes" if truth[i] else "no"})

    with Simulator(SimulatorConfig(responder=oracle)) as s:
        out = ifr.from_pydict({"t": rows}).sem_filter("{t} is about animals", target_recall=0.9, delta=0.1,
                                                      oracle_budget=100, **api(s)).to_pydict()
        requests = s.stats()["total_requests"]
    kept = {int(t.split("(")[-1][:-1]) for t in out["t"]}
    recall = sum(truth[i] for i in kept) / sum(truth)
    assert recall >= 0.9 and all(truth[i] for i in kept)  # the model checks every row it keeps here
    (run,) = [r for r in last_run() if r["label"].startswith("sem_filter[cascade")]
    assert run["stage_rows"]["proxy dropped"] > 0 and requests == run["stage_rows"]["model"] < 400
    assert "drop below" in run["stage_thresholds"]


def test_cascade_with_labelled_examples_asks_the_model_only_about_the_rows_it_routes():
    rng = random.Random(11)

    def draw(n, start):
        truth = [rng.random() < 0.3 for _ in range(n)]
        return truth, [f"{rng.choice(ANIMALS if t else OTHER)} ({start + i})" for i, t in enumerate(truth)]

    truth, rows = draw(300, 0)
    gold, texts = draw(200, 1000)  # labelled rows from the same source
    with Simulator(SimulatorConfig(responder=lambda b: json.dumps(
            {"label": "yes" if any(a in b["messages"][-1]["content"] for a in ANIMALS) else "no"}))) as s:
        out = ifr.from_pydict({"t": rows}).sem_filter("{t} is about animals", target_recall=0.9,
                                                      examples=list(zip(texts, gold)), **api(s)).to_pydict()
        requests = s.stats()["total_requests"]
    kept = set(out["t"])
    assert sum(r in kept for r, t in zip(rows, truth) if t) / sum(truth) >= 0.9
    (run,) = [r for r in last_run() if r["label"].startswith("sem_filter[cascade")]
    assert requests == run["stage_rows"]["model"] < 300


def test_label_scoring_on_the_embedded_model():
    df = ifr.from_pydict({"r": ["I loved this film, a delight.", "Dull, slow and badly acted."] * 2})
    f = df.sem_filter("{r} is a positive review of the film", model="gemma-3-270m")
    assert "label scoring" in f.explain()
    out = df.with_column("ok", sem_predicate("{r} is a positive review of the film", model="gemma-3-270m")).to_pydict()
    assert all(isinstance(v, bool) for v in out["ok"])  # every answer parses by construction
    assert all(0.0 <= p <= 1.0 for p in out["ok_confidence"])
    assert out["ok"][0] == out["ok"][2] and out["ok"][1] == out["ok"][3]


@pytest.mark.parametrize("build", ["sem_then_where", "where_then_sem", "one_conjunction"])
def test_a_relational_predicate_runs_before_the_model_whatever_the_order_written(sim, build):
    df = reviews(30).with_column("n", ifr.col("r").str.split(" ").list.get(2).cast(ifr.DataType.int64()))
    cheap = col("n") < 6
    if build == "sem_then_where":
        q = df.sem_filter("{r} is a positive review", **api(sim)).where(cheap)
    elif build == "where_then_sem":
        q = df.where(cheap).sem_filter("{r} is a positive review", **api(sim))
    else:
        q = df.where(sem_predicate("{r} is a positive review", **api(sim)) & cheap)
    assert q.to_pydict()["r"] == ["good film 1", "good film 2", "good film 4", "good film 5"]
    assert sim.stats()["total_requests"] == 6  # only the rows with n < 6 were asked


def test_an_ai_predicate_to_a_remote_model_runs_after_a_python_udf(sim):
    seen = []

    @ifr.func(return_dtype=ifr.DataType.bool())
    def short(r: str) -> bool:
        seen.append(r)
        return len(r) < 12

    q = reviews(30).where(sem_predicate("{r} is a positive review", **api(sim)) & short(col("r")))
    assert q.to_pydict()["r"] == [f"good film {i}" for i in (1, 2, 4, 5, 7, 8)]
    # Short: every "bad film N" (i % 3 == 0, 10 rows) and "good film 1".."good film 8" (6 rows).
    assert len(seen) == 30 and sim.stats()["total_requests"] == 16


def test_estimate_counts_a_semantic_filter_and_bounds_the_calls_after_it(sim):
    df = reviews(30).with_column("n", ifr.col("r").str.split(" ").list.get(2).cast(ifr.DataType.int64()))
    q = df.sem_filter("{r} is a positive review", **api(sim)).where(col("n") < 10)
    q = q.with_column("why", ifr.functions.prompt(col("r"), **api(sim)))
    calls = {c["call"]: c for c in q.estimate()["calls"]}
    assert calls["sem_filter[generate gpt-5-mini]"]["rows"] == 10 and not calls["sem_filter[generate gpt-5-mini]"].get("note")
    assert calls["prompt[gpt-5-mini]"]["rows"] == 10 and calls["prompt[gpt-5-mini]"]["note"].startswith("at most")
    text = q.explain(estimate=True)
    assert "sem_filter[generate gpt-5-mini]: 10 calls" in text and "== Estimate" in text
    assert sim.stats()["total_requests"] == 0
