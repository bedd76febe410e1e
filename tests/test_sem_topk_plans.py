"""sem_topk's two plans on the simulator with planted answers: quickselect ("quick") and score-then-rerank
("rerank"), the choice of plan="auto", the plan and the calls of each phase in sem_stats, mistakes before
any request, and a failed score handled as data."""

import json
import re

import pytest

import inferframe as ifr
from inferframe.errors import PlanError, RowFailed
from inferframe.plan.semantic.topk import candidates_by_score, choose_plan
from inferframe.simulator import Simulator, SimulatorConfig
from test_sem_global import api, compare_by_planted_score, scored_reviews, text_of

STATEMENT = "{review} is the most enthusiastic"


def planted(n, fail=None):
    """Comparisons by the planted enthusiasm; scores 1-5 in five bands of n/5 rows (so the top band ties);
    the score of the row of enthusiasm ``fail`` answers outside the digits (a failed row)."""
    def answer(body):
        text = text_of(body)
        if "Answer 1 to 5" in text:
            e = int(re.search(r"enthusiasm (\d+)", text).group(1))
            return json.dumps({"label": "maybe" if e == fail else str(1 + e * 5 // n)})
        return compare_by_planted_score(body)
    return answer


def run(n, k, fail=None, **kw):
    score, df = scored_reviews(n)
    with Simulator(SimulatorConfig(responder=planted(n, fail))) as s:
        out = df.sem_topk(STATEMENT, k=k, **api(s, **kw))
        got = out.to_pydict()
        requests = s.stats()["total_requests"]
    return [score[i] for i in got["id"]], out.sem_stats, requests


def test_rerank_returns_the_planted_top_k_in_order_with_fewer_calls_than_quick():
    top_r, stats_r, requests_r = run(60, 5, plan="rerank")
    top_q, stats_q, requests_q = run(60, 5, plan="quick")
    print(f"\n60 rows, k=5: rerank {stats_r}\n              quick  {stats_q}")
    assert top_r == top_q == [59, 58, 57, 56, 55]
    assert stats_r["plan"] == "rerank" and stats_q["plan"] == "quick"
    # One score per row in one job; the 12 rows of the top band (m = 10, tied with the 10th) are compared.
    assert stats_r["score_calls"] == 60 and stats_r["candidates"] == 12
    # The quality guard asks 10 comparisons again with A and B swapped (a planted judge agrees with itself).
    assert stats_r["swap_calls"] == stats_r["swap_asked"] == stats_r["swap_agree"] == 10
    assert stats_r["calls"] == stats_r["score_calls"] + stats_r["compare_calls"] + stats_r["swap_calls"] == requests_r
    assert stats_r["compare_calls"] <= 2 * 12 + 5 * 4 // 2 + 12  # about 2m' + k(k-1)/2
    assert stats_q["score_calls"] == 0 and stats_q["calls"] == stats_q["compare_calls"] + stats_q["swap_calls"] == requests_q
    assert requests_r < requests_q
    assert stats_r["failed"] == stats_q["failed"] == 0


def test_oversample_sets_the_candidates_and_ties_with_the_mth_are_kept():
    # m = max(5, ceil(1.5 * 5)) = 8 falls inside the top band of 12 tied rows: all 12 are kept.
    top, stats, _ = run(60, 5, plan="rerank", oversample=1.5)
    assert top == [59, 58, 57, 56, 55] and stats["candidates"] == 12
    # m = 15 reaches into the next band (rows 36-47 score 4): 12 + 12 candidates.
    assert run(60, 5, plan="rerank", oversample=3)[1]["candidates"] == 24
    assert candidates_by_score([5, 5, 4, 4, 4, 1], m=3) == [0, 1, 2, 3, 4]


def test_auto_picks_quick_for_few_rows_and_rerank_for_many():
    assert [choose_plan(n, k=5, m=10) for n in (10, 30, 31, 60)] == ["quick", "quick", "rerank", "rerank"]
    top, stats, _ = run(60, 5)  # 60 > 3 * 10
    assert top == [59, 58, 57, 56, 55] and stats["plan"] == "rerank" and stats["score_calls"] == 60
    top, stats, _ = run(30, 5)  # 30 <= 3 * 10
    assert top == [29, 28, 27, 26, 25] and stats["plan"] == "quick" and stats["score_calls"] == 0
    # oversample moves the line: m = 5 with oversample=1, so 30 rows are rerank.
    assert run(30, 5, oversample=1)[1]["plan"] == "rerank"


def test_rerank_with_no_more_rows_than_candidates_asks_no_scores():
    top, stats, requests = run(8, 3, plan="rerank")  # m = 6 < 8: scored
    assert top == [7, 6, 5] and stats["score_calls"] == 8
    top, stats, requests = run(6, 3, plan="rerank")  # m = 6: every row is a candidate anyway
    assert top == [5, 4, 3] and stats["plan"] == "rerank" and stats["score_calls"] == 0 < requests


def test_a_failed_score_is_not_chosen_and_counted_or_raises():
    top, stats, requests = run(60, 5, fail=59, plan="rerank")
    print(f"\n60 rows, k=5, the best row's score failed: {stats}")
    assert top == [58, 57, 56, 55, 54]  # the row of enthusiasm 59 ranks below every scored row
    assert stats["score_failed"] == stats["failed"] == 1 and stats["compare_failed"] == 0
    assert stats["candidates"] == 11 and stats["calls"] == requests
    score, df = scored_reviews(60)
    with Simulator(SimulatorConfig(responder=planted(60, fail=59))) as s, pytest.raises(RowFailed):
        df.sem_topk(STATEMENT, k=5, plan="rerank", on_error="raise", **api(s)).collect()


@pytest.mark.parametrize("options, message", [
    (dict(plan="fast"), "plan='fast' is not a plan; pass one of 'auto', 'quick', 'rerank'"),
    (dict(oversample=0.5), "oversample=0.5 must be a number >= 1"),
    (dict(oversample=True), "oversample=True must be a number >= 1"),
    (dict(oversample=float("nan")), "oversample=nan must be a number >= 1"),
    (dict(oversample="2"), "oversample='2' must be a number >= 1"),
    (dict(plan="rerank", scale=12), "scale=12"),
    (dict(method="guess"), "method='guess'"),
])
def test_bad_plan_options_are_plan_errors_before_any_request(options, message):
    _, df = scored_reviews(60)
    with Simulator(SimulatorConfig(responder=planted(60))) as s:
        with pytest.raises(PlanError, match=re.escape(message)):
            df.sem_topk(STATEMENT, k=5, **api(s, **options))
        assert s.stats()["total_requests"] == 0
