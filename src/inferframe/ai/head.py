"""The operator of ``classify_text(method="embedding")``: a label per row from an in-process embedding model.

With labelled examples, a logistic regression is trained on the examples' embeddings (once per job,
kept on the job's services for its other instances) and predicts every row; without them, each row is
compared with a description of every label (zero-shot). Both run offline on the packaged
all-MiniLM-L6-v2 by default, at embedding speed: no language model is asked anything.

Example:
    >>> import numpy as np
    >>> x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype=np.float32)
    >>> fit_head(x, np.array([0, 0, 1, 1]), 2, C=1.0).predict([[0.2, 0.8]]).tolist()
    [1]
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from inferframe.ai.columns import USAGE_TYPE, result_type
from inferframe.ai.run import services_or_default
from inferframe.errors import PlanError
from inferframe.observe.stats import RunCounters, RunStats
from inferframe.series import Series

__all__ = ["EmbeddingHead", "TextEmbedder", "ZERO_SHOT_TEMPERATURE", "fit_head"]

# all-MiniLM-L6-v2 (like most sentence-transformers models) was trained with a softmax over cosine
# similarities scaled by 20 (MultipleNegativesRankingLoss's default scale): 1/20 is the temperature
# at which its similarities were taught to mean "which of these candidates matches". No labelled
# rows exist in zero-shot to fit one on, so the model's own training temperature is the honest default.
ZERO_SHOT_TEMPERATURE = 0.05

_C_GRID = tuple(float(c) for c in np.logspace(-2, 3, 11))  # 0.01 .. 1000: the cross-validated choices

class TextEmbedder(Protocol):
    """What an in-process text embedding model offers its operators here (``ModelRef.runner`` is such a class).

    Built as ``cls(path, device=..., normalize=..., encode_batch_size=..., long_inputs=..., label=...,
    counters=..., on_error=...)``; the class is resolved when the plan is built (``resolve_model``),
    so this layer never imports the models and the plan pickles it by reference.
    """

    stats: RunStats

    def embed(self, texts: Series) -> pa.StructArray: ...

    def vectors(self, texts: list[str]) -> np.ndarray: ...


class EmbeddingHead:
    """Labels rows from their embeddings: a logistic regression on examples, or softmax similarity to descriptions.

    Built once per worker instance for a run; the fitted head is shared by every instance of the same job
    with the same model, labels and examples (the job's ``RunServices.memo``); the next job fits its own.

    Parameters:
        path: the embedding model's directory.
        embedder: the class that runs the embedding model (``TextEmbedder``; the call's ``ModelRef.runner``).
        labels: the labels, in the user's order (the order of the probability columns).
        examples: (text, label) training pairs; empty for zero-shot.
        descriptions: (label, texts) for the labels given a description: prototypes to compare rows
            with (a label without one is compared with its own name); with examples, combined with the head.
        temperature: the zero-shot softmax temperature.
        C: the logistic regression's inverse regularisation; None chooses it by cross-validation.
        device, encode_batch_size, long_inputs, on_error, label, counters: as for the in-process embedders.
        confidence: return a "confidence" field.
        services: the job's ``RunServices``, whose memo holds the fitted head (None: fitted for this instance alone).

    Example:
        >>> from inferframe.models.registry import resolve_model
        >>> ref = resolve_model("classify_text", "sentence_transformers", None, kind="text", options={})
        >>> head = EmbeddingHead(ref.path, embedder=ref.runner, labels=("sport", "food"),
        ...                      examples=(("a football match", "sport"), ("a bowl of pasta", "food")))
        >>> p = head.predict_proba(["the tennis final", "fresh bread and cheese"])
        >>> p.argmax(axis=1).tolist(), bool(np.allclose(p.sum(axis=1), 1.0))
        ([0, 1], True)
    """

    def __init__(self, path: str, *, embedder: type, labels: tuple, examples: tuple = (), descriptions: tuple = (),
                 temperature: float = ZERO_SHOT_TEMPERATURE,
                 C: float | None = None, device: str | None = None, encode_batch_size: int = 32,
                 long_inputs: str = "chunk", on_error: str = "null", label: str = "classify[embedding]",
                 counters: RunCounters | None = None, confidence: bool = True, services: Any = None) -> None:
        self.embedder: TextEmbedder = embedder(path, device=device, normalize=True, encode_batch_size=encode_batch_size,
                                     long_inputs=long_inputs, label=label, counters=counters, on_error=on_error)
        self.labels = tuple(labels)
        self.confidence = confidence
        self.temperature = temperature
        key = ("embedding head", embedder, path, device, self.labels, tuple(examples), tuple(descriptions), C,
               temperature)
        # Instances are built on several threads: the job's memo fits once while the others wait.
        memo = services_or_default(services).memo
        self.head, self.prototypes = memo.once(key, lambda: self._fit(examples, dict(descriptions), C))
        self._dictionary = pa.array(self.labels, pa.string())

    @classmethod
    def for_run(cls, services: Any, *args: Any, **kwargs: Any) -> "EmbeddingHead":
        """Build for one run: the rows are counted in the run's counters, the head fitted once per job."""
        return cls(*args, counters=services.counters if services is not None else None, services=services, **kwargs)

    @property
    def stats(self):
        """The counters of the rows this head labelled (its embedder's)."""
        return self.embedder.stats

    def _fit(self, examples: tuple, descriptions: dict, C: float | None):
        protos = None
        if descriptions or not examples:
            protos = np.stack([self.embedder.vectors(list(descriptions.get(label, (label,)))).mean(axis=0)
                               for label in self.labels])
            # The mean of unit vectors is shorter than one: back to unit length so cosines stay cosines.
            protos /= np.linalg.norm(protos, axis=1, keepdims=True)
        if not examples:
            return None, protos
        y = np.asarray([self.labels.index(label) for _, label in examples])
        return fit_head(self.embedder.vectors([t for t, _ in examples]), y, len(self.labels), C), protos

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        """(rows, labels) probabilities, rows summing to one, columns in the order of ``labels``."""
        return self._proba(self.embedder.vectors(list(texts)))

    def _proba(self, vectors: np.ndarray) -> np.ndarray:
        logits = np.zeros((len(vectors), len(self.labels)), dtype=np.float64)
        if self.prototypes is not None:
            logits += vectors @ self.prototypes.T / self.temperature
        if self.head is not None:
            # With descriptions too, the head's evidence is added to theirs (a product of the two
            # distributions): on the examples pool of the film-review set, 20 examples per label
            # alone missed cases the descriptions caught, and the other way round.
            logits += np.log(np.clip(self.head.predict_proba(vectors), 1e-12, None))
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=1, keepdims=True)

    def classify(self, texts: Series) -> pa.StructArray:
        """struct{value, error, usage[, confidence]} per row: the most probable label and its probability."""
        out = self.embedder.embed(texts)  # the embedder counts rows, reports empty texts, honours on_error
        vectors = out.field("value")
        n = len(vectors)
        present = np.asarray(vectors.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        index = np.zeros(n, dtype=np.int32)
        best = np.zeros(n, dtype=np.float64)
        if present.any():
            flat = vectors.filter(pa.array(present)).flatten().to_numpy(zero_copy_only=False)
            proba = self._proba(np.asarray(flat, dtype=np.float32).reshape(int(present.sum()), -1))
            index[present] = proba.argmax(axis=1)
            best[present] = proba.max(axis=1)
        value = pa.DictionaryArray.from_arrays(pa.array(index, pa.int32(), mask=~present), self._dictionary)
        fields = [value, out.field("error"), pa.nulls(n, USAGE_TYPE)]
        if self.confidence:
            fields.append(pa.array(best, pa.float64(), mask=~present))
        return pa.StructArray.from_arrays(fields, fields=list(result_type(value.type, confidence=self.confidence)))


def fit_head(x: np.ndarray, y: np.ndarray, n_labels: int, C: float | None = None):
    """A logistic regression on ``x`` (rows of embeddings) for labels ``y`` (0..n_labels-1).

    Parameters:
        x: (examples, dim) embeddings.
        y: each example's label index.
        n_labels: how many labels there are (each must occur in ``y``).
        C: inverse regularisation; None: chosen among 0.01..1000 by stratified k-fold
            cross-validation on log loss (k = the smallest label's count, at most 5), which is what
            makes the probabilities trustworthy for confidence thresholds; with fewer than two
            examples of some label, C=1.

    Example:
        >>> x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype=np.float32)
        >>> fit_head(x, np.array([0, 0, 1, 1]), 2).predict([[0.8, 0.2]]).tolist()
        [0]
    """
    from sklearn.linear_model import LogisticRegression

    counts = np.bincount(y, minlength=n_labels)
    if (counts == 0).any():
        raise PlanError(f"examples: no example for label index {int(np.argmin(counts))}")
    folds = int(min(5, counts.min()))
    if C is None and folds >= 2:
        C = _cross_validated_c(x, y, folds)
    model = LogisticRegression(C=1.0 if C is None else C, max_iter=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # sklearn's notes on tiny sets are not the user's concern
        model.fit(x, y)
    return model


def _cross_validated_c(x: np.ndarray, y: np.ndarray, folds: int) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    # Pooled out-of-fold log loss per C; ties go to the smaller C (the simpler model).
    splits = list(StratifiedKFold(n_splits=folds).split(x, y))
    best, best_loss = 1.0, np.inf
    for c in _C_GRID:
        loss = 0.0
        for train, test in splits:
            m = LogisticRegression(C=c, max_iter=5000).fit(x[train], y[train])
            p = m.predict_proba(x[test])
            loss -= float(np.log(np.clip(p[np.arange(len(test)), y[test]], 1e-12, None)).sum())
        if loss < best_loss - 1e-9:
            best, best_loss = c, loss
    return best
