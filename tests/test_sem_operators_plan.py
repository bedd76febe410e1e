"""sem_topk, sem_agg, sem_dedup and sem_cluster_by are plan nodes whose planners live in ``plan/semantic`` (issue 32
item 1): calling them reads no data and sends no request, the plan is chosen when the job runs and explain() shows
it with its estimate, a plan holding them pickles with plain pickle (no closure) and runs the same, and
``df.estimate()`` lists an unplanned sem_join with its estimated calls."""

import ast
import dataclasses
import json
import pathlib
import pickle
import re

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import inferframe as ifr
from inferframe.plan.whole_table import WholeTable
from inferframe.simulator import Simulator, SimulatorConfig


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
    if "Decide whether the statement is true" in body["messages"][0]["content"]:
        return json.dumps({"label": "yes" if "1" in text else "no"})
    if "What is the tag" in body["messages"][0]["content"]:  # sem_join's property
        return json.dumps({"label": re.search(r"\[(\d+)\]", text).group(1)})
    if "Candidates:" in text:  # sem_join's batched check: the candidates of the same tag
        tag = re.search(r"\[(\d+)\]", text).group(1)
        lines = text.split("Candidates:\n", 1)[1].splitlines()
        return json.dumps({"matches": [i for i, l in enumerate(lines, 1) if l.endswith(f"[{tag}]")]})
    ids = re.findall(r"enthusiasm (\d+)", text)
    return f"{ids[0]}-{ids[-1]}" if ids else "none"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=answer)) as s:
        yield s


def api(sim):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-plan", model="gpt-5-mini",
                use_chat_completions=True, cache="off")


def reviews(n):
    order = [(i * 7) % n for i in range(n)]  # a permutation of 0..n-1: the top-k is known
    return {"id": list(range(n)), "review": [f"review {i} enthusiasm {e} [{e % 3}]" for i, e in enumerate(order)]}, order


def operators(df, sim):
    return {
        "topk": df.sem_topk("{review} is the most enthusiastic", k=3, **api(sim)),
        "agg": df.sem_agg("Summarise {review}", max_chars=200, **api(sim)),
        "dedup": df.sem_dedup("{review} are the same", k=2, **api(sim)),
        "cluster": df.sem_cluster_by("{review} are the same", k=2, **api(sim)),
    }


def test_calling_them_reads_no_data_and_sends_no_request(sim, tmp_path):
    data, _ = reviews(12)
    path = tmp_path / "reviews.csv"
    pacsv.write_csv(pa.table(data), path)
    df = ifr.read_csv(str(path))
    path.unlink()  # a call that read or counted its rows would fail now
    for name, out in operators(df, sim).items():
        line = next(l for l in out.explain(show_all=False).splitlines() if "* Sem" in l)
        assert ("plan chosen when the job runs: rows unknown before the run" if name == "topk" else "est_calls=?") \
            in line, line
        assert dataclasses.is_dataclass(out._plan.op)  # the planner, plain data: no closure
    assert sim.stats()["total_requests"] == 0


def test_explain_shows_the_plan_chosen_for_the_rows_and_after_the_run_the_one_that_ran(sim):
    data, order = reviews(50)
    df = ifr.from_pydict(data)
    top = df.sem_topk("{review} is the most enthusiastic", k=5, **api(sim))
    before = top.explain(show_all=False)
    # 50 rows > 3m (m = 10): the rule chooses rerank, 50 scores + 2 * 15 + 10 comparisons.
    assert "SemTopK '{review} is the most enthusiastic' k=5 plan=auto -> rerank est_calls=90" in before
    small = ifr.from_pydict(reviews(20)[0]).sem_topk("{review} is the most enthusiastic", k=5, **api(sim))
    assert "plan=auto -> quick est_calls=50" in small.explain(show_all=False)
    assert sim.stats()["total_requests"] == 0
    got = top.to_pydict()
    assert [order[i] for i in got["id"]] == [49, 48, 47, 46, 45]
    after = top.explain(show_all=False)
    calls = top.sem_stats["calls"]
    assert f"plan=auto -> rerank for 50 rows: {calls} calls (computed)" in after and calls == sim.stats()["total_requests"]
    agg = df.sem_agg("Summarise {review}", max_chars=200, **api(sim))
    assert "max_chars=200 -> fold est_calls=99 (at most)" in agg.explain(show_all=False)
    dedup = df.sem_dedup("{review} are the same", k=3, **api(sim))
    assert "k=3 merge=evidence -> blocking est_calls=150 (at most)" in dedup.explain(show_all=False)


def test_a_plan_holding_them_pickles_without_closures_and_the_copy_runs_the_same(sim):
    data, order = reviews(12)
    df = ifr.from_pydict(data)
    outs = operators(df, sim)
    copies = {name: ifr.DataFrame(pickle.loads(pickle.dumps(out._plan))) for name, out in outs.items()}  # plain pickle
    assert b"sk-plan" not in pickle.dumps(outs["topk"]._plan)
    assert sim.stats()["total_requests"] == 0
    # the copies run first (their planners ask the model), then the originals: other plans, so they compute
    # their own results (issue 43: no result kept in the process), the same rows
    got = {name: copy.to_pydict() for name, copy in copies.items()}
    asked = sim.stats()["total_requests"]
    assert [order[i] for i in got["topk"]["id"]] == [11, 10, 9] and asked > 0
    tags = {}
    for review, cid in zip(got["cluster"]["review"], got["cluster"]["cluster_id"]):
        tags.setdefault(cid, set()).add(review[-3:])  # a cluster holds rows of one planted tag "[t]"
    assert all(len(t) == 1 for t in tags.values()) and len(tags) < 12
    assert len(got["dedup"]["id"]) == len(set(got["cluster"]["cluster_id"]))
    assert {name: out.to_pydict() for name, out in outs.items()} == got
    assert sim.stats()["total_requests"] == 2 * asked


def test_the_planners_import_nothing_above_the_plan_layer():
    root = pathlib.Path(ifr.__file__).parent / "plan" / "semantic"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("inferframe.functions", "inferframe.dataframe", "inferframe.runners",
                                                   "inferframe.udf", "inferframe.execution")), (path, node.module)


def test_estimate_lists_an_unplanned_sem_join_with_its_estimated_calls(sim):
    a = ifr.from_pydict({"review": [f"film {i}" for i in range(6)]})
    b = ifr.from_pydict({"review": [f"film {i}" for i in range(4)]})
    j = a.sem_join(b, "{review:left} and {review:right} name the same film", plan="nested", **api(sim))
    found = j.estimate()
    (entry,) = [c for c in found["calls"] if c["call"].startswith("SemJoin")]
    assert entry["rows"] == 24 and entry["note"].startswith("plan=nested")  # 6 x 4 pair checks
    assert found["input_tokens"] >= entry["input_tokens"] > 0 and found["cost_usd"] is not None
    text = j.explain(estimate=True)
    assert "SemJoin plan=nested: 24 calls" in text
    assert sim.stats()["total_requests"] == 0
    # a whole-table operator is listed as before: its calls in words
    top = a.sem_topk("{review} is the best", k=2, plan="quick", **api(sim))
    assert [c for c in top.estimate()["calls"] if c["call"].startswith("SemTopK")][0]["note"].startswith(
        "plan=quick for 6 rows: about 13 calls")


@pytest.mark.parametrize("plan", ["nested", "batched", "projection"])
def test_a_chosen_sem_join_plan_pickles_with_plain_pickle_and_runs_the_same(sim, plan):
    """Before (issue 43 item 1): the chosen plan held sem_join's counted checks and batched rounds as closures
    (``WholeTable(compute=...)``), which plain pickle refuses; now their planners are plain data in plan/semantic/join."""
    from inferframe.dataframe.plan_runtime import FrameRuntime
    from inferframe.plan.semantic.resolve import planned

    a = ifr.from_pydict({"review": [f"review {i} enthusiasm {i} [{i % 3}]" for i in range(5)]})
    extra = {"on_property": "tag", "property_values": ["0", "1", "2"]} if plan == "projection" else {}
    j = a.sem_join(a, "{review:left} and {review:right} are about the same", plan=plan, **extra, **api(sim))
    chosen = planned(j._plan, FrameRuntime(ifr.DataFrame))["plan"]
    wholes = [n for n in _nodes(chosen) if isinstance(n, WholeTable)]
    assert wholes and all(dataclasses.is_dataclass(n.op) for n in wholes)
    copy = ifr.DataFrame(pickle.loads(pickle.dumps(chosen)))  # plain pickle: no closure anywhere
    assert b"sk-plan" not in pickle.dumps(chosen)
    assert sorted(copy.to_pydict()["review"]) == sorted(ifr.DataFrame(chosen).to_pydict()["review"])


def _nodes(plan):
    yield plan
    for child in plan.children():
        yield from _nodes(child)


def film_answer(body):
    text = body["messages"][-1]["content"]
    return json.dumps({"label": "maybe" if "broken" in text else "yes" if "good" in text else "no"})


@pytest.fixture
def films():
    with Simulator(SimulatorConfig(responder=film_answer)) as s:
        yield s


def test_sem_filter_keeps_failed_rows_by_default_and_limit_still_stops_sending(films):
    # issue 32 item 5: error_column=True by default; before the rules saw through the kept-errors plan, .limit(5)
    # sent one request per row (239 of 500 here) instead of stopping.
    df = ifr.from_pydict({"r": [("broken" if i == 2 else "bad" if i % 10 == 0 else "good") + f" film {i}"
                                for i in range(500)]})
    out = df.sem_filter("{r} is a positive review", **api(films)).limit(5).to_pydict()
    assert out["r"] == ["good film 1", "broken film 2", "good film 3", "good film 4", "good film 5"]
    assert out["sem_filter"] == [True, None, True, True, True] and out["sem_filter_error"][1]["kind"] == "schema"
    assert films.stats()["total_requests"] <= 6 + 16  # a window of 16 rows past the earliest pending one
    assert "stops once 5 rows pass" in df.sem_filter("{r} is positive", **api(films)).limit(5).explain()


@pytest.mark.parametrize("error_column", [True, False])
def test_a_cheap_where_after_sem_filter_runs_first_with_or_without_kept_errors(films, error_column):
    df = ifr.from_pydict({"r": [("bad" if i % 3 == 0 else "good") + f" film {i}" for i in range(30)], "n": list(range(30))})
    q = df.sem_filter("{r} is a positive review", error_column=error_column, **api(films)).where(ifr.col("n") < 6)
    assert q.to_pydict()["r"] == ["good film 1", "good film 2", "good film 4", "good film 5"]
    assert films.stats()["total_requests"] == 6  # only the rows with n < 6 were asked
    limited = df.sem_filter("{r} is a positive review", error_column=error_column, **api(films)).where(
        ifr.col("n") >= 10).limit(2)
    assert limited.to_pydict()["r"] == ["good film 10", "good film 11"]
    assert films.stats()["total_requests"] - 6 <= 2 + 16


def test_a_where_on_the_predicate_column_keeps_the_limit_above_it(films):
    # A test of the kept-errors columns themselves is not the kept-errors plan: the limit must not go into the call.
    df = ifr.from_pydict({"r": [("broken" if i < 3 else "good") + f" film {i}" for i in range(40)]})
    q = df.sem_filter("{r} is a positive review", **api(films)).where(ifr.col("sem_filter_error").is_null()).limit(2)
    assert q.to_pydict()["r"] == ["good film 3", "good film 4"]
