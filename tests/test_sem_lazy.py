"""sem_topk, sem_agg, sem_dedup and sem_cluster_by are lazy plan nodes (``plan.whole_table``): explain() and
estimate() show them and their expected calls before any request, a run computes them once, and they
compose with the operators before and after them."""

import json
import pickle
import re

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import format, prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig


def api(sim, **kw):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-t", model="gpt-5-mini", use_chat_completions=True,
                cache="off", **kw)


def answer(body):
    text = body["messages"][-1]["content"]
    if "Answer A or B" in text:
        a, b = (int(x) for x in re.findall(r"enthusiasm (\d+)", text))
        return json.dumps({"label": "A" if a > b else "B"})
    if "How true is the statement" in text:
        return json.dumps({"label": str(1 + int(re.search(r"enthusiasm (\d+)", text).group(1)) // 10)})
    if text.startswith("Record 1: "):
        a, b = re.findall(r"\[(\d+)\]", text)
        return json.dumps({"label": "yes" if a == b else "no"})
    if text.startswith("Tag: "):
        return "tagged " + text[5:]
    ids = re.findall(r"enthusiasm (\d+)", text)
    return f"{ids[0]}-{ids[-1]}" if ids else "none"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=answer)) as s:
        yield s


def reviews(n):
    # Enthusiasm is a permutation of 0..n-1, so the top-k is known.
    order = [(i * 7) % n for i in range(n)]
    return ifr.from_pydict({"id": list(range(n)), "review": [f"review {i} enthusiasm {e}" for i, e in enumerate(order)]}), order


def test_explain_shows_the_operator_and_its_expected_calls_before_any_request(sim):
    df, _ = reviews(50)
    out = df.sem_topk("{review} is the most enthusiastic", k=5, **api(sim))
    text = out.explain()
    assert "SemTopK '{review} is the most enthusiastic' k=5 plan=auto" in text
    # 50 rows > 3m (m = 10): auto chooses rerank; 50 scores + 2 * 15 + 10 comparisons.
    assert "plan=rerank for 50 rows: about 90 calls (50 scores, about 40 comparisons)" in text
    agg = df.sem_agg("Summarise {review}", max_chars=400, **api(sim)).explain(show_all=True)
    assert "SemAgg 'Summarise {review}' max_chars=400" in agg
    assert "at most 50 calls at the first level for 50 rows" in agg
    dedup = df.sem_dedup("{review} are the same", k=3, **api(sim)).explain()
    assert "SemDedup '{review} are the same' k=3 merge=evidence" in dedup and "at most 150 pair checks" in dedup
    assert sim.stats()["total_requests"] == 0


def test_estimate_lists_the_operator_with_its_calls_and_an_unknown_price(sim):
    df, _ = reviews(20)
    out = df.sem_topk("{review} is the most enthusiastic", k=3, plan="quick", **api(sim))
    found = out.estimate()
    (entry,) = [c for c in found["calls"] if c["call"].startswith("SemTopK")]
    assert entry["note"].startswith("plan=quick for 20 rows: about 43 calls") and found["cost_usd"] is None
    text = out.explain(estimate=True)
    assert "tokens and price known after the run" in text
    assert "total: at least 0 input tokens (the calls above without a count: known after the run), price unknown" in text
    assert sim.stats()["total_requests"] == 0


def test_a_run_computes_it_once_and_keeps_the_rows(sim):
    df, order = reviews(12)
    out = df.sem_topk("{review} is the most enthusiastic", k=3, plan="quick", **api(sim))
    assert out.column_names == ["id", "review"] and sim.stats()["total_requests"] == 0
    first = out.to_pydict()
    asked = sim.stats()["total_requests"]
    assert [order[i] for i in first["id"]] == [11, 10, 9] and asked == out.sem_stats["calls"] > 0
    assert out.to_pydict() == first and len(out) == 3 and out.count_rows() == 3
    assert sim.stats()["total_requests"] == asked
    assert "(computed)" in out.explain(show_all=False)


def test_sem_stats_reads_the_last_run_and_starts_no_job(sim):
    # issue 43: a property starts no job; before the run there is nothing to read
    df, _ = reviews(6)
    out = df.sem_agg("Summarise {review}", **api(sim))
    assert out.sem_stats is None and sim.stats()["total_requests"] == 0
    assert out.to_pydict() == {"sem_agg": ["0-5"]} and sim.stats()["total_requests"] == 1
    assert out.sem_stats["calls"] == sim.stats()["total_requests"] == 1
    assert df.sem_stats is None and out.select("sem_agg").sem_stats is None


def test_it_composes_with_operators_before_and_after(sim):
    df, order = reviews(30)
    # A filter before it runs first (only its rows are compared); a prompt and a limit after it run on its rows.
    top = (df.where(col("id") % 2 == 0)
             .sem_topk("{review} is the most enthusiastic", k=4, plan="quick", **api(sim))
             .with_column("tag", prompt(format("Tag: {}", col("review")), **api(sim)))
             .limit(3))
    text = top.explain()
    assert "prompt[gpt-5-mini]" in text and sim.stats()["total_requests"] == 0
    assert top.estimate()["calls"][0]["note"] == "depends on another AI call's output"
    got = top.to_pydict()
    best_even = sorted((order[i] for i in range(0, 30, 2)), reverse=True)[:3]
    assert [order[i] for i in got["id"]] == best_even
    assert got["tag"] == [f"tagged {r}" for r in got["review"]]


def test_one_operator_over_another(sim):
    names = ["Joe's Pizza [0]", "Joes Pizza [0]", "Blue Fern [1]", "City Hardware [2]", "The Blue Fern [1]"]
    df = ifr.from_pydict({"name": names, "review": [f"{n} enthusiasm {e}" for n, e in zip(names, [3, 9, 5, 1, 2])]})
    out = df.sem_dedup("{name} are the same business", k=2, **api(sim)).sem_topk(
        "{review} is the most enthusiastic", k=2, plan="quick", **api(sim))
    assert out.explain(show_all=False).count("* Sem") == 2
    # Dedup keeps the first row of each cluster, so "Joes Pizza" (enthusiasm 9) is not among those ranked.
    assert out.to_pydict()["name"] == ["Blue Fern [1]", "Joe's Pizza [0]"]


def test_its_plan_pickles_uncomputed_and_its_copy_computes_its_own_result(sim):
    # issue 32: the node is plain data (it refused to pickle before it was computed)
    import cloudpickle

    df, _ = reviews(4)
    out = df.sem_topk("{review} is the most enthusiastic", k=1, **api(sim))
    copy = ifr.DataFrame(pickle.loads(cloudpickle.dumps(out._plan)))
    assert sim.stats()["total_requests"] == 0
    first = out.to_pydict()
    asked = sim.stats()["total_requests"]
    # issue 43: the result is kept on the plan that computed it, not in the process: the copy is another plan,
    # it computes its own (the same rows; with the response cache on, its calls are answered from it)
    assert copy.sem_stats is None and ifr.DataFrame(pickle.loads(pickle.dumps(out._plan))).sem_stats is None
    assert copy.to_pydict() == first and sim.stats()["total_requests"] == 2 * asked
    assert out.to_pydict() == first and sim.stats()["total_requests"] == 2 * asked
    assert pickle.loads(pickle.dumps(out._runnable())).schema == out.schema().to_arrow()


def test_sem_stats_and_last_run_hold_what_its_rounds_sent_and_cost(sim):
    df, _ = reviews(12)
    out = df.sem_topk("{review} is the most enthusiastic", k=3, plan="quick", **api(sim))
    out.to_pydict()
    st = out.sem_stats
    assert st["requests"] == st["calls"] == sim.stats()["total_requests"] and st["jobs"] > 1
    assert st["input_tokens"] > 0 and st["output_tokens"] > 0 and st["cost_usd"] > 0 and st["cache_hits"] == 0
    (entry,) = last_run()  # the rounds summed into one entry, not the last round's job alone
    assert entry["label"] == "SemTopK '{review} is the most enthusiastic' k=3 plan=quick"
    assert (entry["requests"], entry["input_tokens"], entry["cost"]) == (st["requests"], st["input_tokens"], st["cost_usd"])


def test_show_then_write_asks_the_model_once(sim, tmp_path, capsys):
    df = ifr.from_pydict({"name": [f"shop {i % 4} [{i % 4}]" for i in range(10)]})
    out = df.sem_cluster_by("{name} are the same business", k=2, **api(sim))
    out.show()
    asked = sim.stats()["total_requests"]
    assert asked == out.sem_stats["requests"] > 0 and out.sem_stats["failed"] == 0  # identical questions sent once
    assert "cluster_id" in capsys.readouterr().out
    out.write_parquet(str(tmp_path / "clusters"))
    assert ifr.read_parquet(str(tmp_path / "clusters")).count_rows() == 10
    assert sim.stats()["total_requests"] == asked


def test_a_computed_operator_under_other_operators_is_read_from_what_it_kept(sim):
    df, order = reviews(8)
    out = df.sem_topk("{review} is the most enthusiastic", k=3, plan="quick", **api(sim))
    ids = out.to_pydict()["id"]
    asked = sim.stats()["total_requests"]
    assert out.limit(2).to_pydict()["id"] == ids[:2] and out.select("id").where(col("id") >= 0).count_rows() == 3
    assert sim.stats()["total_requests"] == asked
