"""The cascaded filter's thresholds (ai.filter_thresholds): exact bounds, and a planted ground truth over 100 seeded runs."""

import math
import random

import pytest

from inferframe.errors import PlanError

from inferframe.ai.filter_thresholds import (
    binomial_cdf, choose_filter_thresholds, precision_lower_bound, precision_threshold, recall_rank, recall_threshold,
)


def test_binomial_cdf_matches_a_direct_sum():
    n, p = 30, 0.2
    direct = sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(8))
    assert binomial_cdf(7, n, p) == pytest.approx(direct, rel=1e-9)
    assert binomial_cdf(-1, n, p) == 0.0 and binomial_cdf(n, n, p) == 1.0


def test_recall_rank_is_the_largest_rank_whose_miss_probability_is_at_most_delta():
    for m in (22, 50, 100, 400):
        j = recall_rank(m, 0.9, 0.1)
        assert binomial_cdf(j - 1, m, 0.1) <= 0.1 < binomial_cdf(j, m, 0.1)
    assert recall_rank(10, 0.9, 0.1) == 0  # too few positives: drop nothing


def test_recall_threshold_drops_nothing_without_enough_positives():
    assert recall_threshold([0.5] * 30, [True] * 5 + [False] * 25, 0.9, 0.1) == -math.inf


def test_precision_bound_is_clopper_pearson():
    lo = precision_lower_bound(40, 50, 0.05)
    assert 1 - binomial_cdf(39, 50, lo) == pytest.approx(0.05, abs=1e-6)


def test_precision_threshold_stops_at_the_first_candidate_that_fails():
    # The top 22 are all positive, the next 22 mostly negative: only the first candidate passes.
    scores = [1 - i / 100 for i in range(66)]
    labels = [True] * 22 + [False] * 44
    assert precision_threshold(scores, labels, 0.9, 0.1) == scores[21]
    assert precision_threshold(scores, [False] + labels[1:], 0.9, 0.1) == math.inf


def test_both_targets_split_delta_and_high_is_not_below_low():
    scores = [i / 10 for i in range(300)]
    labels = [i >= 150 for i in range(300)]
    low, high = choose_filter_thresholds(scores, labels, target_recall=0.9, target_precision=0.9, delta=0.1)
    assert low == recall_threshold(scores, labels, 0.9, 0.05)
    assert high >= low
    with pytest.raises(PlanError):
        choose_filter_thresholds(scores, labels, delta=0.1)


def planted_run(seed: int, sample: int, choose) -> float:
    """One run: 3000 rows, 30% positive, a noisy proxy; the threshold from a random sample; the true recall."""
    rng = random.Random(seed)
    labels = [rng.random() < 0.3 for _ in range(3000)]
    scores = [rng.gauss(1.0 if y else 0.0, 0.8) for y in labels]
    picked = rng.sample(range(3000), sample)
    low = choose([scores[i] for i in picked], [labels[i] for i in picked])
    kept = sum(1 for s, y in zip(scores, labels) if y and s >= low)
    return kept / sum(labels)


def test_planted_ground_truth_meets_target_recall_in_at_least_90_of_100_seeded_runs():
    recalls = [planted_run(seed, 300, lambda s, y: recall_threshold(s, y, 0.9, 0.1)) for seed in range(100)]
    assert sum(r >= 0.9 for r in recalls) >= 90
    # The threshold does drop rows: the bound is not met by keeping everything.
    assert sum(r < 1.0 for r in recalls) >= 90


def test_the_planted_check_catches_a_threshold_without_a_bound():
    # The sample's own 10th percentile of positives (no bound) misses the target about half the time.
    def naive(s, y):
        pos = sorted(a for a, b in zip(s, y) if b)
        return pos[int(0.1 * len(pos))]

    recalls = [planted_run(seed, 300, naive) for seed in range(100)]
    assert sum(r >= 0.9 for r in recalls) < 90
