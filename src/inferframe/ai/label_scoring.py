"""Label scoring: label probabilities from log-probabilities, and contextual calibration.

Contextual calibration ("Calibrate Before Use", Zhao et al. 2021): a model's prompt biases it
towards some labels whatever the input (the labels' order, the examples shown, a label's
prior). The bias is measured once per call as the label probabilities for content-free inputs
("N/A", "", "[MASK]", averaged); each row's probabilities are divided by them and renormalised.

Example:
    >>> import math
    >>> p = label_probabilities([math.log(0.6), math.log(0.2)])
    >>> [round(x, 2) for x in p]
    [0.75, 0.25]
    >>> [round(x, 2) for x in calibrate(p, [0.9, 0.1])]
    [0.25, 0.75]
"""

from __future__ import annotations

import math
from typing import Sequence

CONTENT_FREE = ("N/A", "", "[MASK]")


def label_probabilities(logprobs: Sequence[float]) -> list[float]:
    """The labels' probabilities given that the answer is one of them: their log-probabilities, normalised.

    Parameters:
        logprobs: each label's log-probability as a continuation of the prompt (all tokens summed).

    Example:
        >>> label_probabilities([0.0, 0.0])
        [0.5, 0.5]
    """
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]  # shifted: tiny log-probabilities do not underflow
    total = sum(weights)
    return [w / total for w in weights]


def content_free_prior(probabilities: Sequence[Sequence[float]]) -> list[float]:
    """The mean label probabilities over the content-free inputs: the prompt's own bias.

    Parameters:
        probabilities: one list of label probabilities per content-free input.

    Example:
        >>> content_free_prior([[0.8, 0.2], [0.6, 0.4]])
        [0.7, 0.3]
    """
    n = len(probabilities)
    return [round(sum(p[j] for p in probabilities) / n, 15) for j in range(len(probabilities[0]))]


def calibrate(probabilities: Sequence[float], prior: Sequence[float] | None) -> list[float]:
    """Each label's probability divided by its content-free probability, renormalised to sum to one.

    Parameters:
        probabilities: one row's label probabilities.
        prior: the content-free probabilities (None: no calibration, the probabilities as they are).

    Example:
        >>> calibrate([0.5, 0.5], [0.8, 0.2])
        [0.2, 0.8]
    """
    if prior is None:
        return list(probabilities)
    # A label the prompt never gives (probability 0) must not divide by zero.
    scaled = [p / max(q, 1e-12) for p, q in zip(probabilities, prior)]
    total = sum(scaled)
    return [s / total for s in scaled]


def decide(labels: Sequence[str], probabilities: Sequence[float]) -> tuple[str, float]:
    """The most probable label and its probability (the first label wins a tie).

    Example:
        >>> decide(["a", "b"], [0.3, 0.7])
        ('b', 0.7)
    """
    best = max(range(len(labels)), key=probabilities.__getitem__)
    return labels[best], probabilities[best]
