"""The quality guard (issue 31 item 3): answers that carry no information are reported with the measurement and the
fix, once per operator; failures inside a semantic operator give one warning with the count (item 4).

On the simulator with planted answers: a model that says yes to everything, one that always picks the first
position, one that says every pair is the same; and, against each, a model whose answers follow the rows.
"""

import json
import re
import warnings

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import LowInformationWarning, RowFailed, SemanticFailuresWarning
from inferframe.functions import classify_text
from inferframe.observe.progress import last_run
from inferframe.observe.quality import all_yes, binomial_tail, same_answer, swap_agreement
from inferframe.observe.report import render_report
from inferframe.simulator import Simulator, SimulatorConfig


def api(sim, **kw):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-t", model="gpt-5-mini", use_chat_completions=True,
                cache="off", **kw)


def text_of(body):
    return body["messages"][-1]["content"]


def always(label):
    return lambda body: json.dumps({"label": label})


def caught(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in seen if issubclass(w.category, (LowInformationWarning, SemanticFailuresWarning))]


REVIEWS = [f"review {i}: " + ("good" if i % 3 else "bad") for i in range(20)]


# --- the pure checks -------------------------------------------------------------------------------

def test_same_answer_fires_on_nearly_one_label_over_enough_rows_only():
    assert same_answer({"yes": 20, "no": 0}).summary == "20/20 yes"
    assert same_answer({"yes": 19, "no": 1}) is not None
    assert same_answer({"yes": 18, "no": 2}) is None
    assert same_answer({"no": 9}) is None  # too few rows to tell
    assert same_answer({"no": 20}, raw={"yes": 20}).summary == "20/20 yes before calibration, 0/20 yes after"
    # The model said yes to every row; calibration turned 2 of them into the answer: still no information.
    assert same_answer({"yes": 2, "no": 18}, raw={"yes": 20}).summary == "20/20 yes before calibration, 2/20 yes after"
    assert same_answer({"yes": 5, "no": 15}, raw={"yes": 12, "no": 8}) is None


def test_swap_agreement_fires_at_chance_and_not_on_a_consistent_judge():
    assert round(binomial_tail(7, 10), 3) == 0.172
    assert swap_agreement(0, 10) is not None and swap_agreement(6, 10) is not None
    assert swap_agreement(8, 10) is None and swap_agreement(10, 10) is None
    assert swap_agreement(0, 4) is None  # too few to judge


def test_all_yes_fires_only_when_every_pair_is_a_match():
    assert all_yes(20, 20).summary == "20/20 pair checks said yes"
    assert all_yes(5, 20) is None and all_yes(0, 20) is None and all_yes(3, 3) is None


# --- per-row operators: one warning at the end of the job, the measurement in last_run() --------------

def test_a_filter_that_says_yes_to_every_row_warns_once_with_the_measurement_and_the_fix():
    df = ifr.from_pydict({"r": REVIEWS})
    with Simulator(SimulatorConfig(responder=always("yes"))) as s:
        out, seen = caught(lambda: df.sem_filter("{r} mentions a cat", **api(s)).to_pydict())
    assert len(out["r"]) == 20
    assert len(seen) == 1 and seen[0].category is LowInformationWarning
    text = str(seen[0].message)
    assert "20/20 yes" in text and "gpt-5-mini" in text and "stronger model: provider=" not in text
    assert "use a stronger model (e.g. provider='openai', model='gpt-5-mini')" in text
    assert seen[0].filename == __file__  # at the user's line
    (run,) = last_run()
    assert run["quality"]["check"] == "same_answer" and run["quality"]["summary"] == "20/20 yes"
    assert run["answers"] == {"yes": 20}


def test_answers_that_follow_the_rows_give_no_warning():
    df = ifr.from_pydict({"r": REVIEWS})
    planted = lambda body: json.dumps({"label": "yes" if "good" in text_of(body) else "no"})  # noqa: E731
    with Simulator(SimulatorConfig(responder=planted)) as s:
        out, seen = caught(lambda: df.sem_filter("{r} is positive", **api(s)).to_pydict())
    assert len(out["r"]) == 13 and seen == []
    (run,) = last_run()
    assert run["quality"] is None and run["answers"] == {"yes": 13, "no": 7}


def test_classify_text_with_one_label_for_every_row_warns():
    df = ifr.from_pydict({"r": REVIEWS})
    with Simulator(SimulatorConfig(responder=always("positive"))) as s:
        _, seen = caught(lambda: df.with_column("s", classify_text(col("r"), ["positive", "negative"], **api(s)))
                         .to_pydict())
    assert len(seen) == 1 and "20/20 positive" in str(seen[0].message)
    assert "give labelled examples (examples=[...])" in str(seen[0].message)  # classify_text shows them


def test_a_filter_whose_rows_fail_says_how_many_in_one_warning():
    df = ifr.from_pydict({"r": REVIEWS})
    flaky = lambda body: json.dumps({"label": "maybe" if "review 1:" in text_of(body) else "yes"})  # noqa: E731
    with Simulator(SimulatorConfig(responder=flaky)) as s:
        # error_column=False drops a failed row (the default keeps it with its error: no rows lost, no warning)
        _, seen = caught(lambda: df.sem_filter("{r} is positive", error_column=False, **api(s)).to_pydict())
        failures = [w for w in seen if w.category is SemanticFailuresWarning]
        assert len(failures) == 1 and "1 of 20 rows failed" in str(failures[0].message)
        assert "on_error='raise'" in str(failures[0].message)
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always")
            with pytest.raises(RowFailed):
                df.sem_filter("{r} is positive", on_error="raise", **api(s)).to_pydict()
    assert not [w for w in again if w.category is SemanticFailuresWarning]  # the error says it; no warning on top


# --- sem_topk: comparisons asked both ways -----------------------------------------------------------

def enthusiasm_rows(n=20):
    return ifr.from_pydict({"review": [f"review with enthusiasm {(7 * i) % n}" for i in range(n)]})


def by_enthusiasm(body):
    a, b = (int(x) for x in re.findall(r"enthusiasm (\d+)", text_of(body)))
    return json.dumps({"label": "A" if a > b else "B"})


def test_sem_topk_that_always_picks_the_first_position_warns_from_swapped_re_asks():
    with Simulator(SimulatorConfig(responder=always("A"))) as s:
        q = enthusiasm_rows().sem_topk("{review} is the most enthusiastic", k=3, plan="quick", **api(s))
        _, seen = caught(q.to_pydict)
    low = [w for w in seen if w.category is LowInformationWarning]
    assert len(low) == 1 and "0/10 A/B comparisons gave the same winner when shown both ways" in str(low[0].message)
    st = q.sem_stats
    assert (st["swap_asked"], st["swap_agree"], st["swap_calls"]) == (10, 0, 10)
    assert st["quality"][0]["check"] == "swap_agreement"
    assert last_run()[0]["quality"] == st["quality"]


def test_sem_topk_with_a_consistent_judge_gives_no_warning_even_when_a_round_is_one_sided():
    with Simulator(SimulatorConfig(responder=by_enthusiasm)) as s:
        q = enthusiasm_rows().sem_topk("{review} is the most enthusiastic", k=3, plan="quick", **api(s))
        out, seen = caught(q.to_pydict)
    assert out["review"] == [f"review with enthusiasm {e}" for e in (19, 18, 17)]
    assert seen == []
    assert q.sem_stats["swap_agree"] == q.sem_stats["swap_asked"] == 10 and q.sem_stats["quality"] == []


# --- sem_dedup: every pair a match -------------------------------------------------------------------

PRODUCTS = ["red kettle", "steel kettle", "blue lamp", "desk lamp", "office chair", "garden chair", "yoga mat",
            "camping tent", "rain jacket", "coffee grinder"]


def test_sem_dedup_that_says_every_pair_is_the_same_warns():
    df = ifr.from_pydict({"p": PRODUCTS})
    with Simulator(SimulatorConfig(responder=always("yes"))) as s:
        q = df.sem_dedup("{p} are the same product", k=3, **api(s))
        out, seen = caught(q.to_pydict)
    assert len(seen) == 1 and "pair checks said yes" in str(seen[0].message)
    assert q.sem_stats["yes"] == q.sem_stats["pairs"] and q.sem_stats["quality"][0]["check"] == "all_yes"


def test_sem_dedup_failures_give_one_warning_with_the_count_and_raise_stops():
    df = ifr.from_pydict({"p": PRODUCTS})
    flaky = lambda body: json.dumps({"label": "maybe" if "kettle" in text_of(body) else "no"})  # noqa: E731
    with Simulator(SimulatorConfig(responder=flaky)) as s:
        q = df.sem_dedup("{p} are the same product", k=3, **api(s))
        _, seen = caught(q.to_pydict)
        failed = q.sem_stats["failed"]
        assert failed > 0
        assert [w.category for w in seen] == [SemanticFailuresWarning]
        assert f"{failed} of {q.sem_stats['calls']} model calls failed" in str(seen[0].message)
        with pytest.raises(RowFailed):
            df.sem_dedup("{p} are the same product", k=3, on_error="raise", **api(s)).collect()


# --- the run report ------------------------------------------------------------------------------------

def test_the_run_report_shows_a_column_whose_answers_were_all_one_value():
    run = {"run_id": "r1", "started": 0.0, "ended": 1.0, "rows": 20,
           "distributions": {"is_cat": {"rows": 20, "categories": {"true": 20}}}}
    page = render_report(run, [], [])
    assert "Answers that carry little information" in page and "is_cat: 20/20 true" in page
    run["distributions"]["is_cat"]["categories"] = {"true": 12, "false": 8}
    assert "little information" not in render_report(run, [], [])
