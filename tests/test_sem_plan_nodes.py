"""Semantic operators are logical plan nodes (issue 32 item 1): calling sem_join reads no data and sends no
request, explain() shows its choice before any run, a plan holding them pickles and runs the same, and
``plan/`` holds no lock."""

import json
import pathlib
import pickle

import cloudpickle
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import inferframe as ifr
from inferframe.errors import PlanError
from inferframe.simulator import Simulator, SimulatorConfig
from sem_join_helpers import opts as _opts, pairs as _pairs

REVIEWS = [f"{'good' if i % 3 else 'bad'} film number {i}" for i in range(8)]
SAME = "{review:left} and {review:right} express the same sentiment"
PLEASE = "{review:left} would please whoever enjoys {review:right}"  # no rule reads it: a capable model proposes


def _answer(body):
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system.startswith("A join keeps the pairs"):
        return json.dumps({"property": "mood", "comparison": "equal"})
    if "enthusiastic" in text + system:  # sem_topk's comparisons and scores
        return json.dumps({"label": "A" if "Answer A or B" in text + system else "1"})
    if "Decide whether the statement is true" in system:
        a, b = text.split(" would please ", 1)
        return json.dumps({"label": "yes" if ("good" in a) == ("good" in b) else "no"})
    if "value" in system or "one or two words" in system:
        return json.dumps({"value": "up" if "good" in text else "down"})
    return json.dumps({"label": "positive" if "good" in text else "negative"})


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=_answer)) as s:
        yield s


def _csv(path: pathlib.Path) -> ifr.DataFrame:
    pacsv.write_csv(pa.table({"review": REVIEWS}), path)
    return ifr.read_csv(str(path))


@pytest.mark.parametrize("kw", [dict(plan="auto"), dict(plan="blocking"), dict(plan="batched"),
                                dict(on_property="sentiment", property_values=["positive", "negative"])])
def test_calling_sem_join_reads_no_data_and_sends_no_request(sim, tmp_path, kw):
    # The file goes away right after the call: a call that counted or read its rows would fail (it did before).
    path = tmp_path / "reviews.csv"
    df = _csv(path)
    predicate = PLEASE if "on_property" not in kw else SAME
    path.unlink()
    j = df.sem_join(df, predicate, **kw, **_opts(sim))
    assert j.column_names == ["review", "right.review"]
    line = next(l for l in j.explain(show_all=False).splitlines() if "SemJoin" in l)
    assert sim.stats()["total_requests"] == 0
    if kw["plan" if "plan" in kw else "on_property"] == "auto":
        assert "plan=auto (chosen when the job runs: the compared property is proposed by gpt-5-mini" in line
    else:
        assert "est_calls=?" in line  # the rows of a CSV are not known before the run


def test_explain_before_the_run_shows_the_choice_then_the_run_keeps_it(sim, tmp_path):
    df = _csv(tmp_path / "reviews.csv")
    j = df.sem_join(df, SAME, property_values=["positive", "negative"], **_opts(sim))
    before = next(l for l in j.explain(show_all=False).splitlines() if "SemJoin" in l)
    assert "SemJoin plan=auto (chosen when the job runs: rows unknown before the run)" in before
    assert "projection: est_calls=?" in before and sim.stats()["total_requests"] == 0
    assert _pairs(j) == {(a, b) for a in REVIEWS for b in REVIEWS if ("good" in a) == ("good" in b)}
    after = next(l for l in j.explain(show_all=False).splitlines() if "SemJoin" in l)
    assert "SemJoin plan=projection on_property=sentiment (detected) est_calls=16" in after


def test_a_plan_holding_sem_join_and_sem_topk_pickles_and_runs_the_same(sim):
    df = ifr.from_pydict({"review": REVIEWS})
    j = df.sem_join(df, PLEASE, plan="nested", **_opts(sim)).sem_topk(
        "{review} is the most enthusiastic", k=2, plan="quick", **_opts(sim))
    copy = ifr.DataFrame(pickle.loads(cloudpickle.dumps(j._plan)))
    assert sim.stats()["total_requests"] == 0
    assert copy.explain(show_all=False) == j.explain(show_all=False)
    # the copy runs first, then the original: the same rows (the original's model calls answered by the cache)
    assert copy.to_pydict() == j.to_pydict()


def test_the_plan_layer_holds_no_lock_and_knows_no_dataframe():
    root = pathlib.Path(ifr.__file__).parent / "plan"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "import threading" not in text and "Lock(" not in text, path
        assert "DataFrame(" not in text.replace("ifr.DataFrame(", ""), path


def test_old_option_names_still_work_with_a_deprecation_warning():
    df = ifr.from_pydict({"review": REVIEWS[:2]})
    with pytest.warns(DeprecationWarning, match="instructions= is deprecated"):
        old = df.sem_join(df, SAME, instructions="Be strict.", model="gemma-3-270m")
    new = df.sem_join(df, SAME, system_message="Be strict.", model="gemma-3-270m")
    assert old.explain(show_all=False) == new.explain(show_all=False)
    with pytest.warns(DeprecationWarning, match="property_examples= is deprecated"):
        df.sem_join(df, SAME, property_examples=[("fun", "positive")], model="gemma-3-270m")
    with pytest.raises(PlanError, match="system_message= only"):
        df.sem_join(df, SAME, instructions="a", system_message="b", model="gemma-3-270m")


def test_a_key_given_to_sem_join_stays_out_of_its_plan_pickle(sim):
    df = ifr.from_pydict({"review": REVIEWS[:4]})
    j = df.sem_join(df, PLEASE, plan="nested", **_opts(sim))
    blob = cloudpickle.dumps(j._plan)
    assert b"sk-sem" not in blob
    assert ifr.DataFrame(pickle.loads(blob)).count_rows() == j.count_rows() > 0  # its handle still reads the key
