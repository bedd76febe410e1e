"""sem_topk / sem_rank, sem_agg, sem_dedup / sem_cluster_by on the simulator (planted answers), their pure
algorithms (quickselect with a comparator, packing and folding, union-find), and one tiny embedded-model run."""

import json
import random
import re

import numpy as np
import pytest

import inferframe as ifr
from inferframe.errors import PlanError, RowFailed
from inferframe.functions.ai import prompt
from inferframe.plan.semantic.agg import pack, reduce_groups
from inferframe.plan.semantic.cluster import UnionFind, candidate_pairs
from inferframe.plan.semantic.topk import order_by_wins, quickselect_top
from inferframe.simulator import Simulator, SimulatorConfig


def api(sim, **kw):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-t", model="gpt-5-mini", use_chat_completions=True,
                cache="off", **kw)


def text_of(body):
    return body["messages"][-1]["content"]


# --- pure algorithms -------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_quickselect_finds_the_top_k_in_order_with_far_fewer_comparisons_than_all_pairs(seed):
    rng = random.Random(seed)
    value = list(range(60))
    rng.shuffle(value)
    asked = []

    def better(pairs):
        asked.extend(pairs)
        return [value[a] > value[b] for a, b in pairs]

    top = quickselect_top(list(range(60)), 5, better, random.Random(seed))
    assert [value[i] for i in top] == [59, 58, 57, 56, 55]
    assert len(asked) <= 0.3 * 60 * 59 / 2
    assert all(a != b for a, b in asked)


def test_quickselect_with_no_preference_and_small_inputs():
    assert quickselect_top([4, 2], 5, lambda pairs: [a > b for a, b in pairs], random.Random(0)) == [4, 2]
    # A comparator that never prefers: k rows come back all the same (no row is "better" than a pivot).
    assert len(quickselect_top(list(range(10)), 3, lambda pairs: [None] * len(pairs), random.Random(0))) == 3
    assert order_by_wins([1, 2, 3], lambda pairs: [None] * len(pairs)) == [1, 2, 3]


def test_pack_preserves_order_and_the_budget_and_folds_shrink():
    texts = [f"t{i:02d}" for i in range(9)]  # 3 characters each
    packs = pack(texts, 7)
    assert [x for p in packs for x in p] == texts and all(sum(map(len, p)) <= 7 for p in packs)
    assert [len(p) for p in pack(["x" * 10] * 3, 4, at_least=2)] == [2, 1]  # cut to 2 characters, two per pack

    def first_last(work):
        return [f"{p[0].split('-')[0]}-{p[-1].split('-')[-1]}" for _, p in work]

    answers, levels = reduce_groups({"a": texts, "b": ["t99"]}, 7, first_last)
    assert answers == {"a": "t00-t08", "b": "t99-t99"}
    assert levels == {"a": 4, "b": 1}  # 9 texts -> 5 answers -> 3 -> 2 -> 1


def test_union_find_and_candidate_pairs():
    uf = UnionFind(6)
    for a, b in [(0, 4), (4, 5), (2, 3)]:
        uf.union(a, b)
    assert uf.cluster_ids() == [0, 1, 2, 2, 0, 0]
    v = np.array([[1, 0, 0], [0.95, 0.05, 0], [0, 1, 0], [0, 0.9, 0.1], [0, 0, 1]], dtype=float)
    assert candidate_pairs(v, k=1) == [(0, 1), (2, 3), (3, 4)]
    assert candidate_pairs(v, k=1, threshold=0.9) == [(0, 1), (2, 3)]


# --- sem_topk / sem_rank ---------------------------------------------------------------------------

def scored_reviews(n, seed=3):
    rng = random.Random(seed)
    score = list(range(n))
    rng.shuffle(score)
    return score, ifr.from_pydict({"id": list(range(n)), "review": [f"review {i} with enthusiasm {s}" for i, s in
                                                                     enumerate(score)]})


def compare_by_planted_score(body):
    text = text_of(body)
    if "Answer A or B" not in text:
        return None
    a, b = (int(x) for x in re.findall(r"enthusiasm (\d+)", text))
    return json.dumps({"label": "A" if a > b else "B"})


def test_sem_topk_returns_the_planted_top_k_with_few_calls():
    score, df = scored_reviews(60)
    with Simulator(SimulatorConfig(responder=compare_by_planted_score)) as s:
        out = df.sem_topk("{review} is the most enthusiastic", k=5, plan="quick", **api(s))
        assert s.stats()["total_requests"] == 0  # lazy: nothing is asked until a run reaches it
        got = out.to_pydict()
        requests = s.stats()["total_requests"]
        assert out.to_pydict() == got and s.stats()["total_requests"] == requests  # computed once, kept
    assert [score[i] for i in got["id"]] == [59, 58, 57, 56, 55]
    assert out.column_names == ["id", "review"]
    assert out.sem_stats["calls"] == requests <= 0.3 * 60 * 59 / 2
    assert out.sem_stats["failed"] == 0 and out.sem_stats["jobs"] < requests  # rounds batched into jobs
    assert out.sem_stats["plan"] == "quick" and out.sem_stats["score_calls"] == 0


def test_sem_topk_asks_a_pairwise_question_constrained_to_a_or_b():
    seen = []

    def spy(body):
        seen.append(text_of(body))
        return json.dumps({"label": "A"})

    with Simulator(SimulatorConfig(responder=spy)) as s:
        ifr.from_pydict({"r": ["x", "y"]}).sem_topk("{r} is the most enthusiastic", k=1, **api(s)).collect()
    assert seen[0] in ("Which one better fits: r is the most enthusiastic?\nA: x\nB: y\nAnswer A or B.",
                       "Which one better fits: r is the most enthusiastic?\nA: y\nB: x\nAnswer A or B.")


def test_sem_topk_failed_comparisons_are_counted_or_raise():
    score, df = scored_reviews(12)

    def flaky(body):
        return json.dumps({"label": "maybe"}) if "enthusiasm 3" in text_of(body) else compare_by_planted_score(body)

    with Simulator(SimulatorConfig(responder=flaky)) as s:
        out = df.sem_topk("{review} is the most enthusiastic", k=2, **api(s))
        assert [score[i] for i in out.to_pydict()["id"]] == [11, 10]
        assert out.sem_stats["failed"] > 0  # every row meets the first pivot, the row of enthusiasm 3 too
        with pytest.raises(RowFailed):
            ifr.from_pydict({"review": ["enthusiasm 3", "enthusiasm 4"]}).sem_topk(
                "{review} is enthusiastic", k=1, on_error="raise", **api(s)).collect()


def test_sem_rank_scores_every_row_and_sorts_lazily():
    def stars(body):
        return json.dumps({"label": re.search(r"stars (\d)", text_of(body)).group(1)})

    df = ifr.from_pydict({"r": ["stars 2", "stars 5", "stars 1", "stars 4"]})
    with Simulator(SimulatorConfig(responder=stars)) as s:
        ranked = df.sem_rank("{r} is enthusiastic", **api(s))
        assert s.stats()["total_requests"] == 0  # lazy
        out = ranked.to_pydict()
    assert out == {"r": ["stars 5", "stars 4", "stars 2", "stars 1"], "sem_rank": [5, 4, 2, 1], "sem_rank_error": [None] * 4}


# --- sem_agg ---------------------------------------------------------------------------------------

def first_last_ids(body):
    """A stand-in summary: the first and last row id the prompt mentions, e.g. "c03-c07" (shows the order kept)."""
    ids = re.findall(r"c\d\d", text_of(body))
    return f"{ids[0]}-{ids[-1]}"


def test_sem_agg_folds_each_group_level_by_level_in_order():
    groups = ["A"] * 10 + ["B"] * 2 + ["C"] * 3
    df = ifr.from_pydict({"g": groups, "review": [f"c{i:02d} late" for i in range(15)]})
    with Simulator(SimulatorConfig(responder=first_last_ids)) as s:
        out = df.sem_agg("Summarise the complaints in {review}", group_by="g", max_chars=20, **api(s))
        got = out.to_pydict()
        requests = s.stats()["total_requests"]
    assert got == {"g": ["A", "B", "C"], "sem_agg": ["c00-c09", "c10-c11", "c12-c14"]}
    # 8-character rows, 20 characters a prompt: A packs 10 rows into 5, folds 5 -> 3 -> 2 -> 1; C 3 -> 2 -> 1.
    assert out.sem_stats["levels"] == {"A": 4, "B": 1, "C": 2}
    assert out.sem_stats["calls"] == requests == 5 + 3 + 2 + 1 + 1 + 2 + 1
    assert out.sem_stats["jobs"] == 4  # one job per level, all groups together


def test_sem_agg_without_groups_and_failed_parts_left_out_and_counted():
    df = ifr.from_pydict({"review": [f"c{i:02d} late" for i in range(6)]})

    def flaky(body):
        if "c02" in text_of(body):
            raise ValueError("planted failure")  # the simulator answers 500
        return first_last_ids(body)

    with Simulator(SimulatorConfig(responder=first_last_ids)) as s:
        out = df.sem_agg("Summarise the complaints in {review}", max_chars=20, **api(s))
        assert out.to_pydict() == {"sem_agg": ["c00-c05"]} and out.sem_stats["failed"] == 0
        assert out.sem_stats["levels"] == {None: 3}
        s.configure(responder=flaky)
        # Level 1 packs (c00 c01) (c02 c03) (c04 c05): the middle one fails and is left out of the fold.
        out = df.sem_agg("Summarise the complaints in {review}", max_chars=20, max_retries=0, **api(s))
        assert out.to_pydict() == {"sem_agg": ["c00-c05"]} and out.sem_stats["failed"] == 1
        assert out.sem_stats["calls"] == 3 + 1
        with pytest.raises(RowFailed):
            df.sem_agg("Summarise the complaints in {review}", max_chars=20, max_retries=0, on_error="raise",
                       **api(s)).collect()


# --- sem_dedup / sem_cluster_by --------------------------------------------------------------------

BUSINESSES = [
    [("Joe's Pizza", "12 Main St"), ("Joes Pizza", "12 Main Street"), ("Joe's Pizzeria", "12 Main St.")],
    [("Blue Fern Cafe", "4 Oak Ave"), ("The Blue Fern Cafe", "4 Oak Avenue")],
    [("Golden Dragon Restaurant", "88 King Rd"), ("Golden Dragon", "88 King Road")],
    [("City Hardware", "301 Elm St")],
    [("Sunrise Bakery", "9 Lake Dr"), ("Sunrise Bakery and Cafe", "9 Lake Drive")],
    [("Harbor Dental Clinic", "77 Pier Ln")],
    [("Maple Books", "15 Birch Way"), ("Maple Bookshop", "15 Birch Way")],
]


def business_rows():
    rows = [(name, address, c) for c, members in enumerate(BUSINESSES) for name, address in members]
    random.Random(5).shuffle(rows)
    truth = {f"name: {n}; address: {a}": c for n, a, c in rows}
    df = ifr.from_pydict({"name": [r[0] for r in rows], "address": [r[1] for r in rows]})
    return df, [r[2] for r in rows], truth


def same_by_truth(truth, fail=None):
    def answer(body):
        m = re.match(r"Record 1: (.*)\nRecord 2: (.*)\n", text_of(body))
        if fail and fail in text_of(body):
            return json.dumps({"label": "maybe"})
        return json.dumps({"label": "yes" if truth[m.group(1)] == truth[m.group(2)] else "no"})
    return answer


def partition(ids):
    out = {}
    for i, c in enumerate(ids):
        out.setdefault(c, set()).add(i)
    return sorted(map(sorted, out.values()))


def test_sem_cluster_by_finds_the_planted_clusters_checking_only_candidate_pairs():
    df, planted, truth = business_rows()
    n = len(planted)
    with Simulator(SimulatorConfig(responder=same_by_truth(truth))) as s:
        out = df.sem_cluster_by("{name} and {address} are the same business", k=3, **api(s))
        got = out.to_pydict()
        requests = s.stats()["total_requests"]
    assert got["name"] == df.to_pydict()["name"]
    assert partition(got["cluster_id"]) == partition(planted)
    assert out.sem_stats["calls"] == out.sem_stats["pairs"] == requests <= 3 * n < n * (n - 1) // 2
    assert out.sem_stats["clusters"] == len(BUSINESSES) and out.sem_stats["jobs"] == 1


def test_sem_dedup_keeps_the_first_row_of_each_cluster():
    df, planted, truth = business_rows()
    with Simulator(SimulatorConfig(responder=same_by_truth(truth))) as s:
        out = df.sem_dedup("{name} and {address} are the same business", k=3, **api(s)).to_pydict()
    first = {}
    for i, c in enumerate(planted):
        first.setdefault(c, i)
    names = df.to_pydict()["name"]
    assert out["name"] == [names[i] for i in sorted(first.values())]
    assert out["cluster_id"] == list(range(len(BUSINESSES)))


def test_sem_dedup_failed_checks_are_not_the_same_and_counted_or_raise():
    df, planted, truth = business_rows()
    with Simulator(SimulatorConfig(responder=same_by_truth(truth, fail="Golden Dragon Restaurant"))) as s:
        out = df.sem_cluster_by("{name} and {address} are the same business", k=3, **api(s))
        names, ids = out.to_pydict()["name"], out.to_pydict()["cluster_id"]
        assert out.sem_stats["failed"] > 0
        assert ids[names.index("Golden Dragon")] != ids[names.index("Golden Dragon Restaurant")]
        assert out.sem_stats["clusters"] == len(BUSINESSES) + 1
        with pytest.raises(RowFailed):
            df.sem_dedup("{name} and {address} are the same business", k=3, on_error="raise", **api(s)).collect()


def test_one_wrong_yes_does_not_chain_two_clusters_unless_merge_any():
    """The model wrongly says Joe's Pizza is The Blue Fern Cafe; the other checks between the two groups say no."""
    df, planted, truth = business_rows()

    def answer(body):
        m = re.match(r"Record 1: (.*)\nRecord 2: (.*)\n", text_of(body))
        pair = {m.group(1).split(";")[0], m.group(2).split(";")[0]}
        if pair == {"name: Joe's Pizza", "name: The Blue Fern Cafe"}:
            return json.dumps({"label": "yes"})
        return json.dumps({"label": "yes" if truth[m.group(1)] == truth[m.group(2)] else "no"})

    # Every row a candidate of every other, so the two groups' other pairs are checked too.
    with Simulator(SimulatorConfig(responder=answer)) as s:
        kept = df.sem_cluster_by("{name} and {address} are the same business", k=12, **api(s))
        chained = df.sem_cluster_by("{name} and {address} are the same business", k=12, merge="any", **api(s))
        kept_ids, chained_ids = kept.to_pydict()["cluster_id"], chained.to_pydict()["cluster_id"]
    assert partition(kept_ids) == partition(planted)
    assert kept.sem_stats["refused_merges"] == 1
    assert len(partition(chained_ids)) == len(BUSINESSES) - 1
    with pytest.raises(PlanError, match="merge='all'"):
        df.sem_dedup("{name} are the same", merge="all", model="gemma-3-270m")


# --- mistakes and the embedded model ----------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda df: df.sem_topk("{r} is best", k=0, model="gemma-3-270m"), "k=0"),
    (lambda df: df.sem_topk("{nope} is best", k=2, model="gemma-3-270m"), "no column 'nope'"),
    (lambda df: df.sem_agg("Summarise {rr}", model="gemma-3-270m"), "no column 'rr'; name one of its columns in the "
                                                                    "template. Column 'rr' not found. Did you mean 'r'?"),
    (lambda df: df.sem_agg("Summarise {r}", group_by=3, model="gemma-3-270m"), "group_by=3"),
    (lambda df: df.sem_agg("Summarise {r}", max_chars=5, model="gemma-3-270m"), "max_chars=5"),
    (lambda df: df.sem_dedup("{r} are the same", threshold=2.0, model="gemma-3-270m"), "threshold=2.0"),
    (lambda df: df.sem_rank("{r} is good", scale=12, model="gemma-3-270m"), "scale=12"),
    (lambda df: df.sem_rank("{r} is good", column="r", model="gemma-3-270m"), "column='r'"),
    (lambda df: df.sem_cluster_by("no fields", model="gemma-3-270m"), "names no column"),
])
def test_mistakes_are_plan_errors_before_any_request(call, message):
    with pytest.raises(PlanError, match=re.escape(message)):
        call(ifr.from_pydict({"r": ["a", "b"]}))


def test_sem_topk_on_the_embedded_model_label_scores_a_or_b():
    df = ifr.from_pydict({"r": ["I absolutely loved it, wonderful!", "It was okay.", "Boring.", "Fine, I guess."]})
    out = df.sem_topk("{r} is the most enthusiastic review", k=2, model="gemma-3-270m")
    got = out.to_pydict()["r"]
    assert len(got) == 2 and set(got) <= set(df.to_pydict()["r"])
    assert out.sem_stats["failed"] == 0 and 0 < out.sem_stats["calls"] <= 3 + 2 + 1


@pytest.mark.parametrize("name", ["max_tokens", "max_output_tokens", "max_completion_tokens"])
def test_sem_agg_reads_the_answers_cap_under_each_of_its_names(name):
    # Issue 43: sem_agg read options["max_tokens"] only, so max_output_tokens=2000 left its packing as if
    # the answer took 512 tokens, and a prompt that cannot fit went to the server.
    df = ifr.from_pydict({"review": ["late", "cold"]})
    with pytest.raises(PlanError, match="leaves no room for rows after max_tokens=2000"):
        df.sem_agg("Summarise the complaints in {review}", model="gemma-3-270m", **{name: 2000})
    from inferframe.functions._sem_agg import context_budget

    assert context_budget({"model": "gemma-3-270m", name: 1000}) == (
        (2048 - 1000 - 200) * 3, "gemma-3-270m: context of 2,048 tokens less 1000 for the answer and 200 for the prompt")


def test_sem_agg_packs_as_many_rows_as_the_models_context_holds():
    from inferframe.functions._sem_agg import context_budget

    assert context_budget({"model": "gemma-3-270m"})[0] == (2048 - 512 - 200) * 3
    assert context_budget({"model": "gemma-3-270m", "max_tokens": 1000})[0] == (2048 - 1000 - 200) * 3
    assert context_budget({"provider": "openai", "model": "gpt-5-mini", "api_key": "sk-x"})[0] == (400_000 - 712) * 3
    with pytest.raises(PlanError, match="lower max_tokens"):
        context_budget({"model": "gemma-3-270m", "max_tokens": 2000})
    df = ifr.from_pydict({"review": [f"c{i:02d} late" for i in range(100)]})
    with Simulator(SimulatorConfig(responder=first_last_ids)) as s:
        out = df.sem_agg("Summarise the complaints in {review}", **api(s))  # gpt-5-mini: the whole table fits one prompt
        small = df.sem_agg("Summarise the complaints in {review}", max_chars=200, **api(s))
        got, _ = out.to_pydict(), small.to_pydict()
    assert got == {"sem_agg": ["c00-c99"]} and out.sem_stats["calls"] == 1
    assert out.sem_stats["max_chars"] == (400_000 - 712) * 3 and "context of 400,000 tokens" in out.sem_stats["budget"]
    assert small.sem_stats["calls"] > 3 and small.sem_stats["budget"] == "max_chars=200 (given)"


# --- the input is collected once --------------------------------------------------------------------

@pytest.mark.parametrize("op", ["sem_topk", "sem_agg", "sem_dedup"])
def test_a_lazy_input_with_model_calls_is_run_once(op):
    """The operator's result is built from the rows it asked about: the input's plan (its model calls too) runs once."""
    def answer(body):
        text = text_of(body)
        if "Answer A or B" in text:
            a, b = (int(x) for x in re.findall(r"n(\d+)", text))
            return json.dumps({"label": "A" if a > b else "B"})
        if text.startswith("Record 1: "):
            return json.dumps({"label": "no"})
        if text.startswith("say "):
            return "n" + text[4:]
        return "summary"

    with Simulator(SimulatorConfig(responder=answer)) as s:
        df = ifr.from_pydict({"q": [f"say {i}" for i in range(6)]}).with_column("r", prompt(ifr.col("q"), **api(s)))
        out = {"sem_topk": lambda: df.sem_topk("{r} is the largest", k=2, **api(s)),
               "sem_agg": lambda: df.sem_agg("Summarise {r}", **api(s)),
               "sem_dedup": lambda: df.sem_dedup("{r} are the same", k=2, **api(s))}[op]()
        got = out.to_pydict()
        assert s.stats()["total_requests"] == 6 + out.sem_stats["calls"]
    if op == "sem_topk":
        assert got["r"] == ["n5", "n4"]
