"""No job state in the process (issue 43, item 2): what a job computes once belongs to the job or to its plan.

A cascade's thresholds and a fitted classifier head live on the job's services (``RunServices.memo``), a
whole-table operator's result on its plan node (its ``Key``). Two jobs in two threads with different options
and data share none of them, and a third job in the same process starts clean. ``sem_stats`` reads the last
run and starts no job.
"""

import json
import pathlib
import re
import threading

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.ai import cascade as cascade_module
from inferframe.ai import head as head_module
from inferframe.ai.run import JobMemo, RunServices, local_services, services_or_default
from inferframe.functions import classify_text
from inferframe.plan.whole_table import kept
from inferframe.simulator import Simulator, SimulatorConfig

LABELS = ["positive", "negative"]
PAIRS = [("A delight from start to finish.", "positive"), ("Dull, slow and badly acted.", "negative"),
         ("One of the best films of the decade.", "positive"), ("I walked out after an hour.", "negative"),
         ("Wonderful acting and a moving story.", "positive"), ("A boring, pointless mess.", "negative"),
         ("I loved every minute of it.", "positive"), ("The worst film I have seen this year.", "negative")]
MORE = [("Great fun for the whole family.", "positive"), ("Awful, I want my money back.", "negative")]


def answer(body):
    text = body["messages"][-1]["content"]
    if "Answer A or B" in text:
        a, b = (int(x) for x in re.findall(r"enthusiasm (\d+)", text))
        return json.dumps({"label": "A" if a > b else "B"})
    if "enthusiasm" in text:  # sem_agg's summary: the first and last row it read
        ids = re.findall(r"enthusiasm (\d+)", text)
        return f"{ids[0]}-{ids[-1]}"
    bad = any(w in text for w in ("Dull", "walked", "boring", "worst", "Awful", "awful"))
    return json.dumps({"label": "negative" if bad else "positive"})


def api(sim, **kw):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-j", model="gpt-5-mini", use_chat_completions=True,
                cache="off", **kw)


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=answer)) as s:
        yield s


def in_threads(*jobs):
    """Run each job in its own thread, all started together; their results, or the first error raised."""
    results, errors = [None] * len(jobs), []
    start = threading.Barrier(len(jobs))

    def run(i):
        try:
            start.wait()
            results[i] = jobs[i]()
        except BaseException as e:  # handed to the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    if errors:
        raise errors[0]
    return results


def test_a_job_memo_computes_once_and_the_next_job_starts_with_an_empty_one():
    first, second = local_services(), local_services()
    made = []
    value = first.memo.once("head", lambda: made.append(1) or object())
    assert first.memo.once("head", lambda: made.append(1) or object()) is value and made == [1]
    assert second.memo.get("head") is None and len(second.memo) == 0
    assert services_or_default(None).memo is not services_or_default(None).memo
    with pytest.raises(TypeError):  # still one process's run: never pickled to a worker
        import pickle
        pickle.dumps(RunServices(first.coordinator, first.counters))


def test_a_memo_makes_one_value_per_key_while_other_threads_wait():
    memo, made, gate = JobMemo(), [], threading.Event()

    def make():
        gate.wait(5)
        made.append(1)
        return object()

    threads = [threading.Thread(target=lambda: memo.once("k", make)) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(5)
    assert made == [1] and len(memo) == 1


def test_two_cascade_jobs_in_two_threads_share_no_choice_or_head_and_a_third_starts_clean(sim, monkeypatch):
    chosen, fitted, lock = [], [], threading.Lock()
    real_choose, real_fit = cascade_module.choose_thresholds, head_module.EmbeddingHead._fit

    def choose(predictions, confidences, gold, target):
        with lock:
            chosen.append((len(gold), target))
        return real_choose(predictions, confidences, gold, target)

    def fit(self, examples, descriptions, C):
        with lock:
            fitted.append(len(examples))
        return real_fit(self, examples, descriptions, C)

    monkeypatch.setattr(cascade_module, "choose_thresholds", choose)
    monkeypatch.setattr(head_module.EmbeddingHead, "_fit", fit)

    def job(pairs, target, rows):
        def run():
            expr = classify_text(col("t"), LABELS, cascade=["embedding", "generate"], examples=pairs,
                                 target_accuracy=target, **api(sim))
            return ifr.from_pydict({"t": rows}).with_column("s", expr).to_pydict()["s"]
        return run

    a = job(PAIRS * 2, 0.8, ["A delight, wonderful. (#1)", "The worst, dull. (#2)"])
    b = job((PAIRS + MORE) * 2, 0.7, ["Loved it. (#3)", "Awful and boring. (#4)", "Great fun. (#5)"])
    got_a, got_b = in_threads(a, b)
    assert len(got_a) == 2 and len(got_b) == 3 and set(got_a + got_b) <= set(LABELS)
    # Each job chose its own thresholds (its own held-back examples and target) and fitted its own head.
    assert sorted(chosen) == sorted([(8, 0.8), (10, 0.7)]) and len(fitted) == 2
    # A third job, the same as the first, computes both again: nothing is left over from the earlier jobs.
    assert a() == got_a
    assert chosen[-1] == (8, 0.8) and len(chosen) == 3 and len(fitted) == 3


def reviews(n, offset=0):
    return ifr.from_pydict({"id": list(range(n)), "review": [f"review {i} enthusiasm {offset + i}" for i in range(n)]})


def test_two_whole_table_jobs_in_two_threads_share_no_kept_result_and_a_third_starts_clean(sim):
    top = reviews(8).sem_topk("{review} is the most enthusiastic", k=2, plan="quick", **api(sim))
    agg = reviews(5, offset=20).sem_agg("Summarise {review}", **api(sim))
    got_top, got_agg = in_threads(top.to_pydict, agg.to_pydict)
    assert got_top["id"] == [7, 6] and got_agg == {"sem_agg": ["20-24"]}
    # Each result is kept on its own plan node, not in a table of the process.
    assert kept(top._plan)["table"].to_pydict()["id"] == [7, 6] and kept(agg._plan)["table"] is not kept(top._plan)["table"]
    asked = sim.stats()["total_requests"]
    assert asked == top.sem_stats["calls"] + agg.sem_stats["calls"]
    # A third job with the same data and options is a new plan: it starts with nothing kept and asks again.
    again = reviews(8).sem_topk("{review} is the most enthusiastic", k=2, plan="quick", **api(sim))
    assert kept(again._plan) is None and again.sem_stats is None
    assert again.to_pydict() == got_top and sim.stats()["total_requests"] == asked + top.sem_stats["calls"]
    # The first job's result is still its own: reading it again asks nothing.
    assert top.to_pydict() == got_top and sim.stats()["total_requests"] == asked + top.sem_stats["calls"]


def test_reading_sem_stats_starts_no_job(sim):
    out = reviews(6).sem_agg("Summarise {review}", **api(sim))
    assert out.sem_stats is None and sim.stats()["total_requests"] == 0  # before any run: None, nothing asked
    assert out.to_pydict() == {"sem_agg": ["0-5"]}
    assert out.sem_stats["calls"] == sim.stats()["total_requests"] == 1  # the last run's counts
    assert out.select("sem_agg").sem_stats is None  # not a whole-table operator's own DataFrame


def test_no_module_keeps_job_results():
    from test_module_state import all_module_state

    state = all_module_state()
    root = pathlib.Path(ifr.__file__).parent
    for name in ("inferframe.ai.cascade:_CHOSEN", "inferframe.ai.head:_HEADS", "inferframe.ai.head:_HEADS_LOCK",
                 "inferframe.plan.whole_table:_KEPT"):
        assert name not in state
        module, attr = name.split(":")
        assert attr not in (root.parent / (module.replace(".", "/") + ".py")).read_text()
