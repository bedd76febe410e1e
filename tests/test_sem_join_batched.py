"""sem_join's batched plan (several pairs per request) and the automatic split detection, on the simulator with planted answers."""

import json
import math

import pytest

import inferframe as ifr
from inferframe.functions._sem_join_api import detect_property
from inferframe.errors import PlanError, RowFailed
from inferframe.functions.templates import parse_template
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig
from sem_join_helpers import opts as _opts, pairs as _pairs

SAME = "{review:left} and {review:right} express the same sentiment"
AGREE = "{review:left} and {review:right} agree"  # no "same <property>": no split detected


def _good(text: str) -> bool:
    return "good" in text


def _answer(body):
    """Planted answers: a text is positive iff it says "good"; two texts agree iff both are or neither is.

    The batched prompt ("Statement: <left> ... [candidate] ...", then "n. <right>" lines) gets the
    numbers of the agreeing candidates; the pair check a yes/no; the property its label.
    """
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "numbered candidate" in system:
        statement, candidates = text.split("\n\nCandidates:\n", 1)
        left = statement.removeprefix("Statement: ").split(" and [candidate]")[0]
        lines = [line.split(". ", 1) for line in candidates.splitlines()]
        return json.dumps({"matches": [int(n) for n, t in lines if _good(t) == _good(left)]})
    if "Decide" in system:
        a, b = text.split(" and ", 1)
        return json.dumps({"label": "yes" if _good(a) == _good(b.rsplit(" a", 1)[0]) else "no"})
    return json.dumps({"label": "positive" if _good(text) else "negative"})


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=_answer)) as s:
        yield s


REVIEWS = [f"{'good' if i % 3 else 'bad'} film number {i}" for i in range(20)]


def _gold(left, right) -> set:
    return {(a, b) for a in left for b in right if _good(a) == _good(b)}


@pytest.mark.parametrize("per_request", [8, 3])
def test_batched_finds_the_nested_pairs_with_fewer_requests(sim, per_request):
    left = ifr.from_pydict({"review": REVIEWS[:5]})
    right = ifr.from_pydict({"review": REVIEWS[4:14], "id": list(range(10))})
    nested = left.sem_join(right, AGREE, plan="nested", **_opts(sim))
    nested_pairs = _pairs(nested)
    nested_requests = sim.stats()["total_requests"]
    assert nested_requests == 5 * 10
    j = left.sem_join(right, AGREE, plan="batched", pairs_per_request=per_request, **_opts(sim))
    assert j.column_names == ["review", "right.review", "id"]
    out = j.to_pydict()
    assert _pairs(j) == nested_pairs == _gold(REVIEWS[:5], REVIEWS[4:14])
    assert len(out["review"]) == len(nested_pairs)  # each pair once
    assert all(REVIEWS[4 + i] == r for i, r in zip(out["id"], out["right.review"]))  # right's other columns follow
    batched_requests = sim.stats()["total_requests"] - nested_requests
    assert batched_requests == 5 * math.ceil(10 / per_request)  # 10 (8 per request) or 20 (3), vs 50
    run = last_run()[0]
    assert run["label"] == "sem_join.batch[gpt-5-mini]" and run["rows_done"] == batched_requests
    text = j.explain(show_all=False)
    assert f"SemJoin plan=batched pairs_per_request={per_request} est_calls={batched_requests}" in text
    assert "nested: est_calls=50" in text


def test_a_failed_batched_request_leaves_its_pairs_out_and_is_counted(sim):
    # Left row 1's request for right rows 0..3 (the first chunk of 4) fails; its other chunks do not.
    sim.configure(fail_rules=[{"match": "Statement: good film number 1 and [candidate]", "status": 400}])
    df = ifr.from_pydict({"review": REVIEWS[:8]})
    found = _pairs(df.sem_join(df, AGREE, plan="batched", pairs_per_request=4, **_opts(sim)))
    gold = _gold(REVIEWS[:8], REVIEWS[:8])
    assert found == {(a, b) for a, b in gold if a != "good film number 1"}
    run = last_run()[0]
    assert run["label"] == "sem_join.batch[gpt-5-mini]" and run["errors"] == 2  # both of row 1's requests
    sim.configure(fail_rules=[{"match": "Candidates:\n1. bad film number 0", "status": 400}])
    found = _pairs(df.sem_join(df, AGREE, plan="batched", pairs_per_request=4, cache="off", **_opts(sim)))
    assert found == {(a, b) for a, b in gold if b not in REVIEWS[:4]}  # every left row's first chunk failed
    assert last_run()[0]["errors"] == 8


def test_on_error_raise_stops_the_batched_join(sim):
    sim.configure(fail_rules=[{"match": "Statement: good film number 1 and", "status": 400}])
    df = ifr.from_pydict({"review": REVIEWS[:4]})
    with pytest.raises(RowFailed):
        df.sem_join(df, AGREE, plan="batched", on_error="raise", **_opts(sim)).collect()


def test_several_right_columns_and_a_renamed_left_column(sim):
    left = ifr.from_pydict({"review": REVIEWS[:3]})
    right = ifr.from_pydict({"review": REVIEWS[3:9], "stars": list(range(6))})
    j = left.sem_join(right, "{review:left} and {review:right} agree", plan="batched", pairs_per_request=4,
                      **_opts(sim))
    assert _pairs(j) == _gold(REVIEWS[:3], REVIEWS[3:9])
    assert sim.stats()["total_requests"] == 3 * 2


def test_auto_picks_batched_where_it_is_cheapest():
    small = ifr.from_pydict({"review": REVIEWS[:12]})
    kw = dict(model="gemma-3-270m")
    text = small.sem_join(small, AGREE, **kw).explain(show_all=False)
    # 12 * ceil(12 / 8) = 24 calls, vs 144 for the nested loop and 8 * 12 + 4 * 10 = 136 for blocking
    assert "plan=batched pairs_per_request=8 est_calls=24" in text and "nested: est_calls=144" in text
    # one pair per request is the nested loop: nested wins the tie (16 calls each, blocking's sample too)
    tiny = ifr.from_pydict({"review": REVIEWS[:4]})
    assert "plan=nested" in tiny.sem_join(tiny, AGREE, pairs_per_request=1, **kw).explain(show_all=False)
    # past max_nested_pairs neither all-pairs plan is considered
    text = small.sem_join(small, AGREE, max_nested_pairs=100, k=3, **kw).explain(show_all=False)
    assert "plan=blocking_batched pairs_per_request=8 k=3 est_calls=12" in text and "blocking: est_calls=36" in text
    # a property (given or detected) is cheaper still
    assert "plan=projection" in small.sem_join(small, SAME, **kw).explain(show_all=False)
    with pytest.raises(PlanError, match="pairs_per_request"):
        small.sem_join(small, AGREE, pairs_per_request=0, **kw)


@pytest.mark.parametrize("predicate, expected", [
    (SAME, ("sentiment", "equal")),
    ("{t:left} and {t:right} have the same topic.", ("topic", "equal")),
    ("{p:left} and {p:right} are about different products", ("product", "different")),
    ("{p:left} and {p:right} differ in their price range", ("price range", "different")),
    ("{a:left} is cheaper than {a:right}", None),
    ("{a:left} has the same author as {a:right}", ("author", "equal")),  # the other side may follow the phrase
    ("{a:left} has the same author as {a:right} and a lower price", None),  # the rest would be lost
    # issue 31: "express the same sentiment about the film" was not recognised as splittable
    ("{a:left} and {a:right} express the same sentiment about the film", ("sentiment about the film", "equal")),
    ("{a:left} and {a:right} are both positive or both negative", ("sentiment", "equal")),
    ("{a:left} expresses the opposite sentiment to {a:right}", ("sentiment", "opposite")),
])
def test_detect_property(predicate, expected):
    assert detect_property(parse_template(predicate, "sem_join", sides=True)) == expected


def test_split_detection_picks_projection(sim):
    df = ifr.from_pydict({"review": REVIEWS[:12]})
    j = df.sem_join(df, SAME, property_values=["positive", "negative"], **_opts(sim))
    line = next(l for l in j.explain(show_all=False).splitlines() if "SemJoin" in l)
    assert "SemJoin plan=projection on_property=sentiment (detected) est_calls=24" in line
    assert _pairs(j) == _gold(REVIEWS[:12], REVIEWS[:12])
    assert sim.stats()["total_requests"] <= 12  # the same rows on both sides: each asked once
    assert [r["label"] for r in last_run()] == ["sem_join.property[gpt-5-mini]"]
    # no match: today's plans (a check per pair or per batch)
    text = df.sem_join(df, "{review:left} is cheaper than {review:right}", model="gemma-3-270m").explain(show_all=False)
    assert "detected" not in text and "projection" not in text and "plan=batched" in text


def test_split_detection_of_different_needs_values(sim):
    df = ifr.from_pydict({"review": REVIEWS[:6]})
    pred = "{review:left} and {review:right} have different sentiment"
    j = df.sem_join(df, pred, property_values=["positive", "negative"], **_opts(sim))
    assert "plan=projection on_property=sentiment (detected)" in j.explain(show_all=False)
    assert _pairs(j) == {(a, b) for a in REVIEWS[:6] for b in REVIEWS[:6] if _good(a) != _good(b)}
    # without values "different" cannot be joined on a property: no detection
    assert "projection" not in df.sem_join(df, pred, model="gemma-3-270m").explain(show_all=False)


TOPICS = {"cats": ["cats purr on the sofa", "cats chase a mouse", "cats sleep all day", "cats like warm milk"],
          "cars": ["cars need fuel to run", "cars stuck in traffic", "cars with electric motors", "cars parked on the street"],
          "bread": ["bread baked this morning", "bread with butter and jam", "bread rises in the oven", "bread from rye flour"]}
TEXTS = [t for ts in TOPICS.values() for t in ts]


def _topic_answer(body):
    text = body["messages"][-1]["content"]
    statement, candidates = text.split("\n\nCandidates:\n", 1)
    left = statement.removeprefix("Statement: ").split(" and [candidate]")[0]
    lines = [line.split(". ", 1) for line in candidates.splitlines()]
    return json.dumps({"matches": [int(n) for n, t in lines if t.split()[0] == left.split()[0]]})


def test_blocking_batched_asks_the_k_candidates_in_batches():
    with Simulator(SimulatorConfig(responder=_topic_answer)) as sim:
        df = ifr.from_pydict({"t": TEXTS})
        j = df.sem_join(df, "{t:left} and {t:right} are about one topic", plan="blocking_batched", k=5,
                        pairs_per_request=2, **_opts(sim))
        out = j.to_pydict()
        requests = sim.stats()["total_requests"]
    assert requests == len(TEXTS) * math.ceil(5 / 2)  # 36, vs 60 for blocking's checks of the same candidates
    found = set(zip(out["t"], out["right.t"]))
    gold = {(a, b) for a in TEXTS for b in TEXTS if a.split()[0] == b.split()[0]}
    assert found <= gold and len(found) == len(out["t"]) and len(found) >= 36
    assert j.column_names == ["t", "right.t"]
    assert "plan=blocking_batched pairs_per_request=2 k=5 est_calls=36" in j.explain(show_all=False)


def test_the_ways_people_write_a_split_pick_projection():
    # issue 31: on 40x40 "express the same sentiment about the film" was not recognised (plan=blocking_batched)
    df = ifr.from_pydict({"text": [f"review {i}" for i in range(40)]})
    kw = dict(model="gemma-3-270m")
    line = df.sem_join(df, "{text:left} and {text:right} express the same sentiment about the film",
                       **kw).explain(show_all=False)
    assert "plan=projection on_property=sentiment about the film (detected) est_calls=80" in line
    line = df.sem_join(df, "{text:left} and {text:right} are both positive or both negative", **kw).explain(
        show_all=False)
    assert "plan=projection on_property=sentiment (detected) est_calls=80" in line
    # "opposite" without the property's two values cannot be a hash join: pair checks
    assert "projection" not in df.sem_join(df, "{text:left} has the opposite sentiment to {text:right}",
                                           k=10, **kw).explain(show_all=False)  # k: no sample to plan


def test_opposite_with_two_values_joins_the_other_value(sim):
    df = ifr.from_pydict({"review": REVIEWS[:6]})
    j = df.sem_join(df, "{review:left} expresses the opposite sentiment to {review:right}",
                    property_values=["positive", "negative"], **_opts(sim))
    assert "plan=projection on_property=sentiment (detected)" in j.explain(show_all=False)
    assert _pairs(j) == {(a, b) for a in REVIEWS[:6] for b in REVIEWS[:6] if _good(a) != _good(b)}
