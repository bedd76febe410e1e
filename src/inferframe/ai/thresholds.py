"""How a cascade chooses its thresholds: the most rows answered early while the accuracy bound keeps the target.

The labelled examples are split per label (``split_examples``): a part teaches the stages, the rest
is held back; on those, each stage's confidence threshold is the lowest at which the cascade's
accuracy still meets the target with 90% confidence (``accuracy_bound``, a one-sided Wilson bound).

Example:
    >>> round(accuracy_bound(20, 20), 3)
    0.924
"""

from __future__ import annotations

import math
from typing import Any

from inferframe.ai.examples import load_examples
from inferframe.errors import PlanError

__all__ = ["accuracy_bound", "choose_thresholds", "split_examples"]


def choose_thresholds(predictions: list[list[int | None]], confidences: list[list[float | None]], gold: list[int],
                      target: float) -> tuple[list[float], float, bool]:
    """Each stage's confidence threshold (the last stage's is 0): the most rows answered early at ``target`` accuracy.

    Stage by stage, rows still unanswered are sorted by the stage's confidence and the stage takes
    the most confident ones, as many as keeps the cascade's accuracy at ``target`` when every row it
    leaves is answered by the last stage (the best one, as the cascade is ordered). A later stage
    then keeps the target the same way, so it holds to the end. "At target" means with 90%
    confidence: the lower end of the one-sided 90% Wilson interval of the accuracy on the examples
    (``accuracy_bound``) reaches it, so a few lucky examples do not set a threshold (20 held-back
    rows must all be right for 0.9; 160 need 149 right, 93%).

    Parameters:
        predictions: per stage, each example's predicted label index (None: the stage failed on it).
        confidences: per stage, each prediction's confidence (None: none).
        gold: each example's true label index.
        target: the accuracy to keep (0..1).

    Returns:
        (thresholds, the cascade's accuracy on the examples, whether it meets ``target``); a stage
        whose threshold is ``inf`` answers no row. Where the target is out of reach, each stage
        takes the rows that give the best accuracy instead, and where rows tie, leaves them to the
        stronger stage.

    Example:
        >>> preds = [[0, 0, 1, 1] * 10, [0, 1, 1, 0] * 10]            # a cheap stage, then an exact one
        >>> confs = [[0.9, 0.6, 0.95, 0.7] * 10, [1] * 40]
        >>> choose_thresholds(preds, confs, [0, 1, 1, 0] * 10, 0.9)   # cheap is right only above 0.8
        ([0.9, 0.0], 1.0, True)
    """
    n, last = len(gold), len(predictions) - 1
    if not n:
        raise PlanError("a cascade needs held-back examples to choose its thresholds")
    right = [[p is not None and p == g for p, g in zip(preds, gold)] for preds in predictions]
    remaining, done, thresholds, reached = list(range(n)), 0, [], True
    for s in range(last):
        conf = confidences[s]
        ranked = sorted((r for r in remaining if predictions[s][r] is not None and conf[r] is not None),
                        key=lambda r: -conf[r])
        by_last = sum(right[last][r] for r in remaining)
        # k: how many of the ranked rows the stage takes; only where the confidence changes is a cut possible.
        best_k, best, fit_k = 0, done + by_last, 0 if accuracy_bound(done + by_last, n) >= target else None
        mine = theirs = 0
        for k in range(1, len(ranked) + 1):
            r = ranked[k - 1]
            mine, theirs = mine + right[s][r], theirs + right[last][r]
            if k < len(ranked) and conf[ranked[k]] == conf[r]:
                continue
            correct = done + mine + by_last - theirs
            if accuracy_bound(correct, n) >= target:
                fit_k = k
            if correct > best:
                best_k, best = k, correct
        k = fit_k if fit_k is not None else best_k
        reached = reached and fit_k is not None
        taken = ranked[:k]
        thresholds.append(conf[taken[-1]] if taken else math.inf)
        done += sum(right[s][r] for r in taken)
        gone = set(taken)
        remaining = [r for r in remaining if r not in gone]
    thresholds.append(0.0)
    correct = done + sum(right[last][r] for r in remaining)
    return thresholds, correct / n, reached and accuracy_bound(correct, n) >= target


def accuracy_bound(correct: int, n: int, z: float = 1.2816) -> float:
    """The lower end of the one-sided Wilson score interval of an accuracy (z=1.2816: 90% confidence).

    Example:
        >>> round(accuracy_bound(20, 20), 3), round(accuracy_bound(150, 160), 3)
        (0.924, 0.908)
    """
    if n <= 0:
        return 0.0
    p = correct / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def split_examples(examples: Any, labels: list[str], examples_per_label: int) -> tuple[list, list]:
    """(teach, held): per label, at most ``examples_per_label`` examples (and at most half) teach, the rest are held back.

    Parameters:
        examples: labelled rows, as ``load_examples`` reads them.
        labels: the labels.
        examples_per_label: the most examples per label that teach.

    Example:
        >>> pairs = [(f"a{i}", "a") for i in range(5)] + [(f"b{i}", "b") for i in range(5)]
        >>> teach, held = split_examples(pairs, ["a", "b"], 20)
        >>> len(teach), len(held), set(teach) & set(held)
        (4, 6, set())
    """
    pairs = load_examples(examples, labels)  # balanced, interleaved, seeded
    per = len(pairs) // len(labels)
    if per < 2:
        raise PlanError("classify_text(cascade=...) needs at least two examples per label: some teach the stages, "
                        "the others choose the thresholds.")
    k = min(examples_per_label, per // 2)
    # Interleaved label by label: the first k rounds teach, the rest are held back.
    return pairs[:k * len(labels)], pairs[k * len(labels):]
