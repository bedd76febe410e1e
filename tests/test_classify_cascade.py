"""classify_text(cascade=[...]): thresholds chosen on held-back examples, rows routed by confidence, shares and savings."""

import json
import random
import warnings

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import classify_text
from inferframe.ai.thresholds import accuracy_bound, choose_thresholds, split_examples
from inferframe.observe.progress import last_run

LABELS = ["positive", "negative"]
PAIRS = [("A delight from start to finish.", "positive"), ("Dull, slow and badly acted.", "negative"),
         ("One of the best films of the decade.", "positive"), ("I walked out after an hour.", "negative"),
         ("Wonderful acting and a moving story.", "positive"), ("A boring, pointless mess.", "negative"),
         ("I loved every minute of it.", "positive"), ("The worst film I have seen this year.", "negative")]


def synthetic(n: int, seed: int):
    """A cheap stage right with probability equal to its confidence (0.5..1), an expensive one right 97% of the time."""
    rng = random.Random(seed)
    gold = [rng.randrange(2) for _ in range(n)]
    conf = [rng.uniform(0.5, 1.0) for _ in range(n)]
    cheap = [g if rng.random() < c else 1 - g for g, c in zip(gold, conf)]
    best = [g if rng.random() < 0.97 else 1 - g for g in gold]
    return gold, [cheap, best], [conf, [1.0] * n]


def cascade_accuracy(thresholds, preds, confs, gold):
    right = 0
    for r, g in enumerate(gold):
        for s, t in enumerate(thresholds):
            if s == len(thresholds) - 1 or (confs[s][r] is not None and confs[s][r] >= t):
                right += preds[s][r] == g
                break
    return right / len(gold)


@pytest.mark.parametrize("target", [0.85, 0.9, 0.95])
def test_the_threshold_meets_its_target_on_a_synthetic_set(target):
    gold, preds, confs = synthetic(2000, seed=1)
    n = len(gold)
    thresholds, estimate, reached = choose_thresholds(preds, confs, gold, target)
    assert reached and accuracy_bound(round(estimate * n), n) >= target
    assert cascade_accuracy(thresholds, preds, confs, gold) == pytest.approx(estimate)
    share = sum(c >= thresholds[0] for c in confs[0]) / n
    assert 0.05 < share < 1  # the cheap stage answers part of the rows, not none and not all
    # The lowest such threshold: answering the next most confident rows early breaks the target.
    lower = max(c for c in confs[0] if c < thresholds[0])
    assert accuracy_bound(round(cascade_accuracy([lower, 0.0], preds, confs, gold) * n), n) < target
    # And it holds on fresh rows from the same distribution.
    gold2, preds2, confs2 = synthetic(20000, seed=2)
    assert cascade_accuracy(thresholds, preds2, confs2, gold2) >= target


def test_a_few_lucky_examples_do_not_set_a_threshold():
    """20 held-back rows on which a weak cheap stage happens to be right 19 times: no certainty of 0.9."""
    gold = [0, 1] * 10
    cheap = list(gold)
    cheap[0] = 1
    preds, confs = [cheap, gold], [[0.6] * 20, [1.0] * 20]
    thresholds, estimate, reached = choose_thresholds(preds, confs, gold, 0.9)
    assert thresholds[0] == float("inf") and estimate == 1.0 and reached  # every row to the exact stage
    assert accuracy_bound(19, 20) < 0.9 <= accuracy_bound(20, 20)


def test_a_higher_target_sends_more_rows_on():
    gold, preds, confs = synthetic(2000, seed=3)
    shares = []
    for target in (0.8, 0.9, 0.95):
        t = choose_thresholds(preds, confs, gold, target)[0][0]
        shares.append(sum(c >= t for c in confs[0]))
    assert shares[0] > shares[1] > shares[2]


def test_an_unreachable_target_takes_the_best_cascade_and_says_so():
    gold, preds, confs = synthetic(1000, seed=4)
    thresholds, estimate, reached = choose_thresholds(preds, confs, gold, 0.999)
    assert not reached
    assert estimate >= cascade_accuracy([float("inf"), 0.0], preds, confs, gold)  # no worse than the last stage alone


def test_three_stages_keep_the_target_and_failed_rows_go_on():
    gold, (cheap, best), (conf, _) = synthetic(1000, seed=5)
    middle = [g if random.Random(r).random() < 0.9 else 1 - g for r, g in enumerate(gold)]
    cheap = [None if r % 10 == 0 else p for r, p in enumerate(cheap)]  # a stage that failed on a row
    preds, confs = [cheap, middle, best], [[None if p is None else c for p, c in zip(cheap, conf)], [0.9] * 1000,
                                           [1.0] * 1000]
    thresholds, estimate, reached = choose_thresholds(preds, confs, gold, 0.9)
    assert reached and len(thresholds) == 3 and thresholds[-1] == 0.0
    assert cascade_accuracy(thresholds, preds, confs, gold) == pytest.approx(estimate) and estimate >= 0.9


def test_examples_split_into_teaching_and_held_back_parts_per_label():
    teach, held = split_examples(PAIRS * 3, LABELS, 20)
    assert len(teach) == len(held) == 12
    for part in (teach, held):
        assert sum(label == "positive" for _, label in part) == len(part) // 2
    teach, held = split_examples(PAIRS * 10, LABELS, 5)
    assert len(teach) == 10 and len(held) == 70
    with pytest.raises(PlanError, match="at least two examples per label"):
        split_examples(PAIRS[:2], LABELS, 20)


@pytest.mark.parametrize("kwargs, message", [
    ({"cascade": ["embedding", "score"]}, "pass examples="),
    ({"cascade": ["score"], "examples": PAIRS}, "at least two stages"),
    ({"cascade": ["embedding", "score"], "examples": PAIRS, "target_accuracy": 1.5}, "target_accuracy=1.5"),
    ({"cascade": ["generate", "score"], "examples": PAIRS}, "only the last stage may be 'generate'"),
    ({"cascade": ["embedding", {"method": "score", "on_error": "raise"}], "examples": PAIRS}, "whole cascade"),
    ({"cascade": ["embedding", "score"], "examples": PAIRS, "method": "score"}, "either method="),
    ({"cascade": ["embedding", 3], "examples": PAIRS}, "stage 2 is 3"),
])
def test_bad_cascades_are_plan_errors_before_any_request(kwargs, message):
    with pytest.raises(PlanError, match=message):
        classify_text(col("t"), LABELS, model="gemma-3-270m", **kwargs)


def test_the_columns_types_are_known_at_plan_time():
    df = ifr.from_pydict({"t": ["fine"]}).with_column(
        "s", classify_text(col("t"), LABELS, cascade=["embedding", "score"], examples=PAIRS, model="gemma-3-270m",
                           usage_column=True))
    schema = df.schema()
    assert repr(schema["s"]) == "DataType(category<string>)"
    assert repr(schema["s_confidence"]) == "DataType(double)"
    assert "s_error" in df.column_names and "s_usage" in df.column_names


@pytest.mark.timeout(600)
def test_head_then_label_scoring_on_the_local_model_routes_by_confidence():
    texts = ["An absolute joy, I loved it.", "Terrible. I want my money back.", "It was a film.",
             "Not bad, not great, somewhere in between.", "Brilliant performances all round.", None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an 8-row held-back set may not reach the target: it is said, not raised
        out = ifr.from_pydict({"t": texts}).with_column(
            "s", classify_text(col("t"), LABELS, cascade=["embedding", "score"], examples=PAIRS * 2,
                               model="gemma-3-270m", target_accuracy=0.9)).to_pydict()
    run = next(r for r in last_run() if r["label"].startswith("cascade["))
    head, score = run["stage_rows"].items()
    assert head[0] == "head[all-MiniLM-L6-v2]" and score[0] == "score[gemma-3-270m]"
    assert head[1] + score[1] == 5 and run["rows_done"] == 6  # the null text is not classified
    assert all(x in LABELS for x in out["s"][:5]) and out["s"][5] is None
    assert out["s_error"] == [None] * 6
    threshold = run["stage_thresholds"]["head[all-MiniLM-L6-v2]"]
    # A row the head answered was at or above its threshold; the others went on to label scoring.
    assert sum(c is not None and c >= threshold for c in out["s_confidence"][:5]) >= head[1]


def test_cost_saved_against_the_last_stage_alone_on_a_priced_api():
    from inferframe.simulator import Simulator, SimulatorConfig

    def answer(body):
        text = body["messages"][-1]["content"]
        label = "negative" if any(w in text for w in ("Dull", "walked", "boring", "worst", "awful")) else "positive"
        return json.dumps({"label": label})

    texts = ["A delight, wonderful.", "Awful and boring.", "Loved it, the best.", "The worst, dull."]
    rows = [f"{texts[i % 4]} (#{i})" for i in range(20)]  # distinct: identical requests are sent once
    with Simulator(SimulatorConfig(responder=answer)) as sim:
        out = ifr.from_pydict({"t": rows}).with_column(
            "s", classify_text(col("t"), LABELS, cascade=["embedding", "generate"], examples=PAIRS * 2,
                               target_accuracy=0.8, provider="openai", base_url=sim.base_url, api_key="sk-c",
                               model="gpt-5-mini", use_chat_completions=True, usage_column=True)).to_pydict()
    run = next(r for r in last_run() if r["label"].startswith("cascade["))
    by_head, by_api = run["stage_rows"].values()
    assert by_head + by_api == 20 and by_head > 0
    assert out["s_error"] == [None] * 20 and all(x in LABELS for x in out["s"])
    api = next(r for r in last_run() if r["label"].startswith("classify_text[") or r["label"].startswith("prompt["))
    per_row = api["cost"] / api["requests"]  # the API's mean cost per row (held-back examples included)
    # A row the head answered cost nothing; one the API answered cost its request.
    costs = [u["cost"] if u else 0.0 for u in out["s_usage"]]
    assert sum(c == 0 for c in costs) == by_head and all(c > 0 for c in costs if c)
    # Saved: the API on all 20 rows at its mean cost per row, less what the cascade spent.
    assert run["cascade_saved"] == pytest.approx(per_row * 20 - sum(costs), rel=1e-6)
    assert 0 < run["cascade_saved"] < per_row * 20


def test_nearest_examples_show_each_row_its_closest_examples_per_label():
    from inferframe.functions.nearest_examples import nearest_demonstrations

    pairs = [("a football match", "sport"), ("the tennis final", "sport"), ("a bowl of pasta", "food"),
             ("fresh bread and cheese", "food")]
    out = ifr.from_pydict({"t": ["the wimbledon final", "a plate of spaghetti", "", None]}).with_column(
        "d", nearest_demonstrations(col("t"), pairs, 1)).to_pydict()["d"]
    assert out[0].endswith("Text: the tennis final\nLabel: sport\n\nText: ")  # closest last, next to the row
    assert "Text: a bowl of pasta\nLabel: food" in out[1] and "bread" not in out[1] and "tennis" not in out[1]
    assert out[2] == "Text: " and out[3] is None  # nothing to compare an empty row with


def test_nearest_examples_go_before_the_row_and_calibrate_on_the_fixed_sample():
    from inferframe.plan.ai_nodes import ai_call_of

    expr = classify_text(col("t"), LABELS, method="score", examples=PAIRS, nearest_examples=2, model="gemma-3-270m")
    call = ai_call_of(expr._node)
    config = call.udf.owner.args[0]
    assert len(call.args) == 2 and call.args[0].udf.name == "classify_text[nearest examples]"
    assert config.prefix == "" and config.content_free_prefix.startswith("Text: A delight")
    with pytest.raises(PlanError, match="pass examples"):
        classify_text(col("t"), LABELS, nearest_examples=2, model="gemma-3-270m")
    with pytest.raises(PlanError, match="nearest_examples=-1"):
        classify_text(col("t"), LABELS, examples=PAIRS, nearest_examples=-1, model="gemma-3-270m")


def test_stage_counts_from_workers_add_up_on_the_driver():
    from inferframe.observe.stats import RunCounters, RunStats

    counters = RunCounters()
    mine = RunStats(label="cascade[a > b]", stage_rows={"a": 3, "b": 1}, stage_thresholds={"a": 0.8, "b": 0.0})
    counters.add(mine)
    worker = RunStats(label="cascade[a > b]", stage_rows={"a": 5, "b": 2}, stage_thresholds={"a": 0.8, "b": 0.0},
                      cascade_saved=0.5)
    counters.merge("worker-1", [worker.snapshot()])
    (total,) = counters.runs()
    assert total.stage_rows == {"a": 8, "b": 3} and total.stage_thresholds == {"a": 0.8, "b": 0.0}
    assert total.cascade_saved == 0.5 and mine.stage_rows == {"a": 3, "b": 1}  # the driver's own is not changed
