"""sem_join / sem_sim_join: each plan on the simulator with planted answers, plan choice, explain(), errors; one offline run."""

import json

import pytest

import inferframe as ifr
from inferframe.errors import PlanError, RowFailed
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig
from sem_join_helpers import opts as _opts, pairs as _pairs

SAME = "{review:left} and {review:right} express the same sentiment"
TOPIC = "{t:left} and {t:right} are about the same topic"


def _answer(body):
    """Planted answers: sentiment is "positive" iff the text says "good"; two texts share a topic iff their first words match."""
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "Decide" in system:
        a, b = text.split(" and ", 1)
        if "same topic" in text:
            return json.dumps({"label": "yes" if a.split()[0] == b.split()[0] else "no"})
        return json.dumps({"label": "yes" if ("good" in a) == ("good" in b.rsplit(" express", 1)[0]) else "no"})
    return json.dumps({"label": "positive" if "good" in text else "negative"})


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=_answer)) as s:
        yield s


REVIEWS = [f"{'good' if i % 3 else 'bad'} film number {i}" for i in range(12)]
POSITIVE = {r for r in REVIEWS if "good" in r}


def _gold(relation="equal") -> set:
    same = lambda a, b: (a in POSITIVE) == (b in POSITIVE)  # noqa: E731
    return {(a, b) for a in REVIEWS for b in REVIEWS if same(a, b) == (relation == "equal")}


def test_projection_asks_each_row_once_then_hash_joins(sim):
    df = ifr.from_pydict({"review": REVIEWS})
    j = df.sem_join(df, SAME, on_property="sentiment", property_values=["positive", "negative"], **_opts(sim))
    assert _pairs(j) == _gold()
    # Both sides are the same rows: the right side's identical requests are answered once.
    assert sim.stats()["total_requests"] <= 2 * len(REVIEWS)
    assert [r["label"] for r in last_run()] == ["sem_join.property[gpt-5-mini]"]


def test_projection_with_different_values(sim):
    df = ifr.from_pydict({"review": REVIEWS})
    j = df.sem_join(df, "{review:left} and {review:right} differ in sentiment", on_property="sentiment",
                    property_values=["positive", "negative"], relation="different", **_opts(sim))
    assert _pairs(j) == _gold("different")


def test_nested_loop_checks_every_pair(sim):
    left = ifr.from_pydict({"review": REVIEWS[:5]})
    right = ifr.from_pydict({"review": REVIEWS[4:10], "id": list(range(6))})
    j = left.sem_join(right, SAME, plan="nested", **_opts(sim))
    assert j.column_names == ["review", "right.review", "id"]
    assert _pairs(j) == {(a, b) for a, b in _gold() if a in REVIEWS[:5] and b in REVIEWS[4:10]}
    assert sim.stats()["total_requests"] == 5 * 6
    assert last_run()[0]["label"] == "sem_join.check[gpt-5-mini]" and last_run()[0]["rows_done"] == 30


TOPICS = {"cats": ["cats purr on the sofa", "cats chase a mouse", "cats sleep all day", "cats like warm milk"],
          "cars": ["cars need fuel to run", "cars stuck in traffic", "cars with electric motors", "cars parked on the street"],
          "bread": ["bread baked this morning", "bread with butter and jam", "bread rises in the oven", "bread from rye flour"]}
TEXTS = [t for ts in TOPICS.values() for t in ts]


def test_blocking_with_a_given_k_checks_only_the_candidates(sim):
    df = ifr.from_pydict({"t": TEXTS})
    j = df.sem_join(df, TOPIC, plan="blocking", k=3, **_opts(sim))
    out = j.to_pydict()
    found = set(zip(out["t"], out["right.t"]))
    gold = {(a, b) for a in TEXTS for b in TEXTS if a.split()[0] == b.split()[0]}
    assert found <= gold and all(sum(a == x for a, _ in found) <= 3 for x in TEXTS)
    assert len(found) >= 24  # 36 at most; MiniLM ranks most same-topic rows first (a random 3 would find 12)
    assert sim.stats()["total_requests"] == len(TEXTS) * 3


def test_blocking_chooses_k_on_a_sample_to_reach_the_recall_target(sim):
    df = ifr.from_pydict({"t": TEXTS})
    j = df.sem_join(df, TOPIC, plan="blocking", target_recall=1.0, sample_size=4, **_opts(sim))
    # issue 32: the sample is asked when the job runs, not when sem_join() is called
    assert sim.stats()["total_requests"] == 0
    assert "plan=blocking k=? (chosen on a sample of 4 left rows when the job runs)" in j.explain(show_all=False)
    out = j.to_pydict()
    text = j.explain(show_all=False)
    k = int(text.split("plan=blocking k=")[1].split()[0])
    assert 4 <= k < len(TEXTS)  # a topic's 4 rows (itself included), not every row
    gold = {(a, b) for a in TEXTS for b in TEXTS if a.split()[0] == b.split()[0]}
    found = set(zip(out["t"], out["right.t"]))
    assert found <= gold and len(found) >= 0.85 * len(gold)  # the rows outside the sample: nearly every match
    # every pair of the 4 sampled rows was checked to choose k; the sampled rows' checks then came from the
    # cache: only the other rows' candidates were sent.
    assert 4 * len(TEXTS) < sim.stats()["total_requests"] <= 4 * len(TEXTS) + (len(TEXTS) - 4) * k


AGREE = "{review:left} and {review:right} agree"  # names no "same <property>": no property is detected


def test_the_plan_is_chosen_by_estimated_calls():
    small = ifr.from_pydict({"review": REVIEWS[:4]})
    big = ifr.from_pydict({"review": REVIEWS * 10})
    kw = dict(model="gemma-3-270m")
    assert "plan=nested" in small.sem_join(small, AGREE, pairs_per_request=1, **kw).explain(show_all=False)
    assert "plan=batched" in small.sem_join(small, AGREE, **kw).explain(show_all=False)  # 4 calls, vs 16
    # 120*120 > max_nested_pairs: blocking, its k candidates in one batch per left row (120 calls, vs 360)
    assert "plan=blocking_batched pairs_per_request=8 k=3 est_calls=120" in big.sem_join(big, AGREE, k=3, **kw).explain(
        show_all=False)
    assert "plan=blocking k=3" in big.sem_join(big, AGREE, k=3, pairs_per_request=1, **kw).explain(show_all=False)
    text = big.sem_join(big, SAME, on_property="sentiment", property_values=["positive", "negative"],
                        **kw).explain(show_all=False)
    assert "plan=projection est_calls=240" in text and "nested: est_calls=14400" in text
    assert "blocking: est_calls=2080" in text  # 8 sampled rows * 120 + 112 rows * k=10 (before the sample chose k)
    # past max_nested_pairs the nested loop is out even where it is cheaper than blocking's sample
    assert "plan=blocking_batched" in small.sem_join(small, AGREE, max_nested_pairs=15, k=3, **kw).explain(
        show_all=False)


def test_explain_shows_tokens_and_dollars_on_a_priced_model(sim, capsys):
    df = ifr.from_pydict({"review": REVIEWS})
    text = df.sem_join(df, SAME, on_property="sentiment", property_values=["positive", "negative"],
                       **_opts(sim)).explain()
    line = next(l for l in text.splitlines() if "SemJoin" in l)
    assert line.startswith("* SemJoin plan=projection est_calls=24 est_tokens=")
    cost = float(line.split("est_cost=$")[1].split()[0])
    assert cost > 0 and "nested: est_calls=144" in line
    assert "SemJoin plan=projection" in capsys.readouterr().out


def test_a_failed_pair_check_is_left_out_and_counted(sim):
    sim.configure(fail_rules=[{"match": "good film number 1 and good film number 2", "status": 400}])
    df = ifr.from_pydict({"review": REVIEWS[:6]})
    found = _pairs(df.sem_join(df, SAME, plan="nested", **_opts(sim)))
    gold = {(a, b) for a, b in _gold() if a in REVIEWS[:6] and b in REVIEWS[:6]}
    assert found == gold - {("good film number 1", "good film number 2")}
    run = last_run()[0]
    assert run["label"] == "sem_join.check[gpt-5-mini]" and run["errors"] == 1


def test_on_error_raise_stops_the_join(sim):
    sim.configure(fail_rules=[{"match": "good film number 1 and good film number 2", "status": 400}])
    df = ifr.from_pydict({"review": REVIEWS[:6]})
    with pytest.raises(RowFailed):
        df.sem_join(df, SAME, plan="nested", on_error="raise", **_opts(sim)).collect()


def test_a_failed_property_leaves_its_row_out(sim):
    sim.configure(fail_rules=[{"match": "film number 4", "status": 400}])
    df = ifr.from_pydict({"review": REVIEWS[:6]})
    found = _pairs(df.sem_join(df, SAME, on_property="sentiment", property_values=["positive", "negative"],
                               **_opts(sim)))
    assert found == {(a, b) for a, b in _gold() if a in REVIEWS[:6] and b in REVIEWS[:6] and "4" not in a + b}
    assert last_run()[0]["errors"] == 2  # the row's property failed on each side (a failure is not cached)


@pytest.mark.parametrize("kwargs, match", [
    (dict(predicate="{review} agrees"), "names no side"),
    (dict(predicate="{review:left} and {nope:right}"), "nope"),
    (dict(plan="projection"), "on_property"),
    (dict(on_property="sentiment", relation="different"), "property_values"),
    (dict(plan="fast"), "plan='fast'"),
    (dict(k=0), "k must be"),
    (dict(target_recall=1.5), "target_recall"),
    (dict(property_values=["a", "b"]), "needs on_property"),
])
def test_user_mistakes_raise_before_any_request(kwargs, match):
    df = ifr.from_pydict({"review": REVIEWS[:2]})
    predicate = kwargs.pop("predicate", AGREE)
    with pytest.raises(PlanError, match=match):
        df.sem_join(df, predicate, model="gemma-3-270m", **kwargs)


def test_sem_sim_join_is_the_nearest_rows_by_embedding():
    q = ifr.from_pydict({"t": ["a kitten on the couch", "traffic jam on the highway"]})
    docs = ifr.from_pydict({"t": TEXTS})
    out = q.sem_sim_join(docs, on="t", k=2).to_pydict()
    assert out["t"] == ["a kitten on the couch"] * 2 + ["traffic jam on the highway"] * 2
    assert all(d.startswith("cats") for d in out["right.t"][:2]) and all(d.startswith("cars") for d in out["right.t"][2:])
    assert out["rank"] == [1, 2, 1, 2]
    with pytest.raises(PlanError, match="text columns"):
        ifr.from_pydict({"t": ["x"]}).sem_sim_join(ifr.from_pydict({"t": [[1.0, 0.0]]}), on="t")


def test_offline_on_the_embedded_model():
    """A tiny self-join on Gemma 3 270M by label scoring: the pairs are the classes of one labelling."""
    rows = ifr.read_csv("examples/data/classify/imdb_heldout.csv").limit(6).collect()
    j = rows.sem_join(rows, "{text:left} and {text:right} express the same sentiment", on_property="sentiment",
                      property_values=["positive", "negative"], model="gemma-3-270m")
    out = j.to_pydict()
    run = {r["label"]: r for r in last_run()}["sem_join.property[gemma-3-270m]"]
    texts = rows.to_pydict()["text"]
    pairs = set(zip(out["text"], out["right.text"]))
    assert {(t, t) for t in texts} <= pairs  # each row shares its own label
    # Pairs are the classes of one labelling: symmetric and transitive.
    assert all((b, a) in pairs for a, b in pairs)
    assert all((a, c) in pairs for a, b in pairs for b2, c in pairs if b == b2)
    assert run["rows_done"] <= 2 * len(texts) and run["errors"] == 0
