"""sem_join's batched plans when answers fail (issue 31 item 4): a cut-off batch is split and asked again, a request
holds what its output budget fits, failures are warned about once, stop the job past half, or at the first with
on_error="raise"; the planner says why a cheaper plan was not chosen. On the simulator with planted answers."""

import json
import math
import warnings

import pytest

import inferframe as ifr
from inferframe.errors import RowFailed, SemanticFailuresWarning, ServiceError
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig
from sem_join_helpers import opts as _opts, pairs as _pairs

AGREE = "{review:left} and {review:right} agree"
REVIEWS = [f"{'good' if i % 3 else 'bad'} film number {i}" for i in range(20)]


def _good(text: str) -> bool:
    return "good" in text


def _answer(body):
    """The numbers of the candidates that agree with the left review (both say "good", or neither)."""
    text = body["messages"][-1]["content"]
    statement, candidates = text.split("\n\nCandidates:\n", 1)
    left = statement.removeprefix("Statement: ").split(" and [candidate]")[0]
    lines = [line.split(". ", 1) for line in candidates.splitlines()]
    return json.dumps({"matches": [int(n) for n, t in lines if _good(t) == _good(left)]})


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=_answer)) as s:
        yield s


def _gold(left, right) -> set:
    return {(a, b) for a in left for b in right if _good(a) == _good(b)}


def test_a_cut_off_batch_is_split_and_asked_again(sim):
    # Every request of 5 or more candidates is cut off (finish_reason 'length'): the JSON of its pairs is
    # lost. Before: those pairs silently vanished. Now each is split in two halves (4 + 4, 4 + 2) and asked again.
    sim.configure(fail_rules=[{"match": "\n5. ", "kind": "length"}])
    left, right = ifr.from_pydict({"review": REVIEWS[:5]}), ifr.from_pydict({"review": REVIEWS[5:19]})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        found = _pairs(left.sem_join(right, AGREE, plan="batched", **_opts(sim)))
    assert found == _gold(REVIEWS[:5], REVIEWS[5:19])
    assert not [w for w in seen if issubclass(w.category, SemanticFailuresWarning)]
    # 5 left rows x 2 chunks (8 + 6 candidates), every one cut off, then 2 halves each (4+4, 3+3)
    assert sim.stats()["total_requests"] == 5 * 2 + 5 * 4
    run = last_run()[0]
    assert run["label"] == "sem_join.batch[gpt-5-mini]" and run["errors"] == 0 and run["rows_done"] == 30


def test_down_to_single_pairs_then_counted_and_warned_once(sim):
    # Requests naming "bad film number 6" among their candidates are always cut off: split down to the one pair.
    sim.configure(fail_rules=[{"match": "bad film number 6", "kind": "length"}])
    left, right = ifr.from_pydict({"review": REVIEWS[:3]}), ifr.from_pydict({"review": REVIEWS[4:12]})
    with pytest.warns(SemanticFailuresWarning) as seen:
        found = _pairs(left.sem_join(right, AGREE, plan="batched", **_opts(sim)))
    assert found == {(a, b) for a, b in _gold(REVIEWS[:3], REVIEWS[4:12]) if b != "bad film number 6"}
    messages = [str(w.message) for w in seen if issubclass(w.category, SemanticFailuresWarning)]
    assert len(messages) == 1
    # per left row: 8 -> 4 + 4 -> 2 + 2 -> 1 + 1: 7 requests, 1 failed in the end
    assert "sem_join: 3 of 21 model calls failed (length: 3)" in messages[0] and "max_tokens" in messages[0]
    assert "/src/inferframe/" not in seen[0].filename  # at the user's line (here the helper that runs the job)
    assert last_run()[0]["errors"] == 3


def test_a_request_holds_what_its_max_tokens_fits(sim):
    left, right = ifr.from_pydict({"review": REVIEWS[:4]}), ifr.from_pydict({"review": REVIEWS[4:12]})
    j = left.sem_join(right, AGREE, plan="batched", max_tokens=16, **_opts(sim))
    assert "pairs_per_request=2 (of 8: what max_tokens=16 holds) est_calls=16" in j.explain(show_all=False)
    assert _pairs(j) == _gold(REVIEWS[:4], REVIEWS[4:12])
    assert sim.stats()["total_requests"] == 4 * math.ceil(8 / 2)


def test_the_answer_list_is_bounded_by_the_candidates(sim):
    # A grammar then cannot let a small model write one number over and over until max_tokens.
    sim.configure(record_requests=True)
    left, right = ifr.from_pydict({"review": REVIEWS[:1]}), ifr.from_pydict({"review": REVIEWS[4:7]})
    left.sem_join(right, AGREE, plan="batched", **_opts(sim)).collect()
    body = sim.requests()[-1]["body"]
    body = json.loads(body) if isinstance(body, (str, bytes)) else body
    matches = body["response_format"]["json_schema"]["schema"]["properties"]["matches"]
    assert matches["maxItems"] == 3 and matches["items"]["maximum"] == 3


def test_most_calls_failing_stops_the_job_with_one_error(sim):
    # Every request fails (HTTP 400): the first 16 are asked, then the job stops instead of sending the rest.
    sim.configure(fail_rules=[{"match": "Statement:", "status": 400}])
    df = ifr.from_pydict({"review": REVIEWS})
    with pytest.raises(ServiceError, match=r"sem_join stopped: 16 of 16 model calls failed \(bad_request: 16\)"):
        df.sem_join(df, AGREE, plan="batched", **_opts(sim)).collect()
    assert sim.stats()["total_requests"] == 16  # of 20 x 3 = 60


def test_on_error_raise_stops_at_the_first_failure_not_at_a_cut_off_answer(sim):
    sim.configure(fail_rules=[{"match": "\n5. ", "kind": "length"}])
    df = ifr.from_pydict({"review": REVIEWS[:6]})
    right = ifr.from_pydict({"review": REVIEWS[6:14]})
    # cut-off answers are split, not raised
    assert _pairs(df.sem_join(right, AGREE, plan="batched", on_error="raise", **_opts(sim))) == _gold(
        REVIEWS[:6], REVIEWS[6:14])
    sim.configure(fail_rules=[{"match": "Statement: good film number 1 and", "status": 400}])
    with pytest.raises(RowFailed):
        df.sem_join(right, AGREE, plan="batched", on_error="raise", cache="off", **_opts(sim)).collect()


def test_blocking_batched_splits_too(sim):
    sim.configure(fail_rules=[{"match": "\n3. ", "kind": "length"}])
    df = ifr.from_pydict({"review": REVIEWS[:6]})
    found = _pairs(df.sem_join(df, AGREE, plan="blocking_batched", k=4, pairs_per_request=4, **_opts(sim)))
    assert found <= _gold(REVIEWS[:6], REVIEWS[:6]) and all((r, r) in found for r in REVIEWS[:6])
    assert sim.stats()["total_requests"] == 6 * (1 + 2)  # each left row's 4 candidates: cut off, then 2 + 2


def test_explain_says_why_a_cheaper_plan_was_not_chosen():
    # issue 31: on 40x40, explain() showed plan=blocking_batched est_calls=520 beside batched: est_calls=200
    # with no word on why the cheaper one was not taken (1,600 pairs > max_nested_pairs).
    # k given: no sample of pair checks is run to plan
    df = ifr.from_pydict({"review": [f"review {i}" for i in range(40)]})
    text = df.sem_join(df, AGREE, model="gemma-3-270m", k=40).explain(show_all=False)
    line = next(l for l in text.splitlines() if "SemJoin" in l)
    assert "plan=blocking_batched pairs_per_request=8 k=40 est_calls=200" in line
    assert "| batched: est_calls=200" in line and "(not considered: 1600 pairs > max_nested_pairs=1024)" in line
    assert "nested: est_calls=1600" in line
    # within max_nested_pairs the all-pairs plans are considered: batched wins the tie
    text = df.sem_join(df, AGREE, model="gemma-3-270m", k=40, max_nested_pairs=2000).explain(show_all=False)
    assert "plan=batched pairs_per_request=8 est_calls=200" in text and "not considered" not in text


def test_a_given_plan_is_said_to_be_given():
    df = ifr.from_pydict({"review": REVIEWS[:4]})
    assert "(plan='nested' given)" in df.sem_join(df, AGREE, plan="nested", model="gemma-3-270m").explain(
        show_all=False)


def _proposing(body):
    """The proposal call names "mood"; each side's property is "up" iff the text says "good"."""
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system.startswith("A join keeps the pairs"):
        assert text == "Statement: A would please whoever enjoys B"
        return json.dumps({"property": "Mood", "comparison": "equal"})
    return json.dumps({"value": "up" if "good" in text else "down"})


def test_a_capable_model_proposes_the_property_in_one_call():
    with Simulator(SimulatorConfig(responder=_proposing)) as sim:
        df = ifr.from_pydict({"review": REVIEWS[:6]})
        j = df.sem_join(df, "{review:left} would please whoever enjoys {review:right}", **_opts(sim))
        # issue 32: the proposal is asked when the job runs; explain() before it says so
        line = next(l for l in j.explain(show_all=False).splitlines() if "SemJoin" in l)
        assert sim.stats()["total_requests"] == 0
        assert "plan=auto (chosen when the job runs: the compared property is proposed by gpt-5-mini" in line
        assert _pairs(j) == _gold(REVIEWS[:6], REVIEWS[:6])
        line = next(l for l in j.explain(show_all=False).splitlines() if "SemJoin" in l)
        assert "plan=projection on_property=mood (proposed by gpt-5-mini) est_calls=12" in line
        assert sim.stats()["total_requests"] == 1 + 6  # the proposal, then each row's property once


def test_the_embedded_model_is_not_asked_for_a_property():
    df = ifr.from_pydict({"review": REVIEWS[:4]})
    text = df.sem_join(df, "{review:left} would please whoever enjoys {review:right}",
                       model="gemma-3-270m").explain(show_all=False)
    assert "proposed" not in text and "projection" not in text


def _checks(body):
    """Pair checks: yes iff both reviews say "good" or neither; a property: positive iff the text says "good"."""
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "Decide" in system:
        a, b = text.removesuffix(" agree").split(" and ", 1)
        return json.dumps({"label": "yes" if _good(a) == _good(b) else "no"})
    return json.dumps({"label": "positive" if _good(text) else "negative"})


def test_failed_pair_checks_warn_once_with_the_count():
    # Before: the 4 failed checks vanished; only last_run() said errors: 4.
    with Simulator(SimulatorConfig(responder=_checks)) as sim:
        sim.configure(fail_rules=[{"match": "good film number 1 and", "status": 400}])
        df = ifr.from_pydict({"review": REVIEWS[:4]})
        with pytest.warns(SemanticFailuresWarning) as seen:
            found = _pairs(df.sem_join(df, AGREE, plan="nested", **_opts(sim)))
    messages = [str(w.message) for w in seen if issubclass(w.category, SemanticFailuresWarning)]
    assert len(messages) == 1 and "sem_join: 4 of 16 model calls failed (bad_request: 4)" in messages[0]
    assert found == {(a, b) for a, b in _gold(REVIEWS[:4], REVIEWS[:4]) if a != "good film number 1"}
    assert last_run()[0]["label"] == "sem_join.check[gpt-5-mini]" and last_run()[0]["errors"] == 4


def test_failed_properties_of_both_sides_warn_once():
    with Simulator(SimulatorConfig(responder=_checks)) as sim:
        sim.configure(fail_rules=[{"match": "film number 2", "status": 400}])
        df = ifr.from_pydict({"review": REVIEWS[:4]})
        with pytest.warns(SemanticFailuresWarning) as seen:
            df.sem_join(df, "{review:left} and {review:right} have the same sentiment",
                        property_values=["positive", "negative"], **_opts(sim)).collect()
    messages = [str(w.message) for w in seen if issubclass(w.category, SemanticFailuresWarning)]
    assert len(messages) == 1 and "sem_join: 2 of 8 model calls failed (bad_request: 2)" in messages[0]


def test_pair_checks_failing_past_half_stop_the_job():
    with Simulator(SimulatorConfig(responder=_checks)) as sim:
        sim.configure(fail_rules=[{"match": "film number", "status": 400}])
        df = ifr.from_pydict({"review": REVIEWS[:4]})
        # on_error="null": the calls' failures are data, so sem_join's own guard counts them (by default the
        # same 400 on the first 3 calls stops the job sooner: tests/test_promise_stops.py).
        with pytest.raises(ServiceError, match=r"sem_join stopped: 16 of 16 model calls failed"):
            df.sem_join(df, AGREE, plan="nested", on_error="null", **_opts(sim)).collect()


def test_every_candidate_named_is_reported_as_no_information():
    def everything(body):
        candidates = body["messages"][-1]["content"].split("\n\nCandidates:\n", 1)[1]
        return json.dumps({"matches": list(range(1, len(candidates.splitlines()) + 1))})

    with Simulator(SimulatorConfig(responder=everything)) as sim:
        df = ifr.from_pydict({"review": REVIEWS[:6]})
        with pytest.warns(ifr.LowInformationWarning, match="36/36 pair checks said yes"):
            assert len(_pairs(df.sem_join(df, AGREE, plan="batched", **_opts(sim)))) == 36


@pytest.mark.timeout(1200)
def test_on_the_embedded_model_a_batched_answer_fits():
    """issue 31: people x companies on Gemma 3 270M chose `batched` and 18 of 20 calls failed with `length` (a list
    of numbers written until max_tokens). The list is now bounded by the candidates and fits its output budget."""
    people = ifr.from_pydict({"bio": ["A nurse caring for patients after surgery.",
                                      "A pastry chef who bakes bread before dawn."]})
    companies = ifr.from_pydict({"description": ["A city hospital with surgical wards.", "A bakery selling fresh bread.",
                                                 "A software company building cloud services.",
                                                 "A logistics firm moving goods by truck."]})
    j = people.sem_join(companies, "{bio:left} describes a person who would work at {description:right}",
                        model="gemma-3-270m", cache="off")
    assert "plan=batched pairs_per_request=8 est_calls=2" in j.explain(show_all=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        j.collect()
    run = last_run()[0]
    assert run["label"] == "sem_join.batch[gemma-3-270m]" and run["rows_done"] == 2 and run["errors"] == 0
    assert not [w for w in seen if issubclass(w.category, SemanticFailuresWarning)]
