"""``classify_text(method="embedding")``: a label per row from an in-process embedding model, with its probability.

With labelled examples, a logistic regression is trained on the examples' embeddings (once per run,
and kept for later runs in the same process) and predicts every row; without them, each row is
compared with a description of every label (zero-shot). Both run offline on the packaged
all-MiniLM-L6-v2 by default, at embedding speed: no language model is asked anything.

Example:
    >>> import inferframe as ifr
    >>> expr = embedding_classify(ifr.col("review"), ["positive", "negative"],
    ...                           examples=[("Loved it.", "positive"), ("Dull.", "negative")])
    >>> df = ifr.from_pydict({"review": ["What a wonderful film!"]}).with_column("label", expr)
    >>> df.schema()["label"], df.schema()["label_confidence"]
    (DataType(category<string>), DataType(double))
"""

from __future__ import annotations

import importlib.util
import threading
import warnings
from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.ai.columns import USAGE_TYPE, result_type
from inferframe.ai.examples import load_examples
from inferframe.ai.options import check, in_range, whole_number
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, to_node
from inferframe.expressions.nodes import Alias, Call, UDFCall
from inferframe.expressions.udf import ClassSpec
from inferframe.functions._embed_models import ModelUDFSpec, _text_run_options
from inferframe.models.loading import model_files, require
from inferframe.models.text import SentenceTransformerEmbedder, TransformersEmbedder
from inferframe.observe.stats import RunCounters
from inferframe.series import Series

__all__ = ["EmbeddingHead", "ZERO_SHOT_TEMPERATURE", "embedding_classify", "embedding_matrix"]

# all-MiniLM-L6-v2 (like most sentence-transformers models) was trained with a softmax over cosine
# similarities scaled by 20 (MultipleNegativesRankingLoss's default scale): 1/20 is the temperature
# at which its similarities were taught to mean "which of these candidates matches". No labelled
# rows exist in zero-shot to fit one on, so the model's own training temperature is the honest default.
ZERO_SHOT_TEMPERATURE = 0.05

_OPTIONS = {"provider", "batch_size", "device", "max_concurrency", "use_process", "gpus", "encode_batch_size",
            "long_inputs", "on_error", "error_column", "confidence_column", "per_label", "seed", "temperature", "C"}
_IN_PROCESS = ("sentence_transformers", "transformers")
_C_GRID = tuple(float(c) for c in np.logspace(-2, 3, 11))  # 0.01 .. 1000: the cross-validated choices

_HEADS: dict = {}  # fitted heads by (model, labels, examples, ...): trained once per process, not per batch
_HEADS_LOCK = threading.Lock()


def embedding_classify(text: Any, labels: list[str], *, examples: Any = None, label_descriptions: Any = None,
                       model: str | None = None, **options: Any) -> Expression:
    """Classify every row by its embedding: a head trained on ``examples``, or similarity to label descriptions.

    Parameters:
        text: the text column.
        labels: the allowed labels (at least two, distinct).
        examples: labelled rows (an inferframe DataFrame, a list of (text, label) pairs, or a CSV,
            Parquet or JSON-lines file; see ``load_examples``). With them, a logistic regression on
            their embeddings picks the label; its regularisation C is chosen by stratified
            cross-validation on the examples (log loss), so the confidences are calibrated on them.
        label_descriptions: dict label -> text (or list of texts) to compare rows with (cosine
            similarity, softmax at ``temperature``); without examples a label lacking one is
            compared with its own name; with examples, the head's probabilities are multiplied by
            the descriptions' and renormalised.
        model: an in-process embedding model directory or name (default: the packaged all-MiniLM-L6-v2).
        **options: provider ("sentence_transformers", default, or "transformers"); per_label and
            seed (which examples, see ``load_examples``); C (fixed regularisation instead of
            cross-validation); temperature (zero-shot softmax temperature, default
            ``ZERO_SHOT_TEMPERATURE``); confidence_column (default True); batch_size, device,
            encode_batch_size, long_inputs, max_concurrency, use_process, gpus, on_error, error_column
            as for ``embed_text``.

    The column is a dictionary-encoded string, as with the other methods; "<name>_confidence" is
    the chosen label's probability (the probabilities of all labels sum to one). An empty text
    gets a null label and an error of kind "input". Examples and labels are checked here, before
    any work: a label outside ``labels`` is a PlanError.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"t": ["I adore this, wonderful!", "Awful, I hate it."]})
        >>> expr = embedding_classify(ifr.col("t"), ["positive", "negative"],
        ...                           label_descriptions={"positive": "I love it, wonderful",
        ...                                               "negative": "I hate it, awful"})
        >>> df.with_column("s", expr).to_pydict()["s"]
        ['positive', 'negative']
    """
    if not isinstance(text, Expression):
        raise PlanError("classify_text(method='embedding') takes one text column, e.g. col('review'); "
                        f"got {type(text).__name__}.")
    labels = [str(label) for label in labels]
    if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
        raise PlanError(f"classify_text() needs at least two distinct, non-empty string labels, got {labels!r}.")
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise PlanError(f"classify_text(method='embedding') got unknown options {unknown}; "
                        f"it takes {', '.join(sorted(_OPTIONS))}.")
    provider = options.get("provider") or "sentence_transformers"
    if provider not in _IN_PROCESS:
        raise PlanError(f"classify_text(method='embedding') runs an embedding model in this process: provider must be "
                        f"one of {list(_IN_PROCESS)}, not {provider!r}. Use method='score' or 'generate' for {provider!r}.")
    fn = "classify_text(method='embedding')"
    for key, rule in (("temperature", in_range(0, None, low_open=True)), ("C", in_range(0, None, low_open=True)),
                      ("per_label", whole_number(1)), ("seed", in_range(None, None, whole=True))):
        check(fn, key, options.get(key), rule)
    descriptions = _descriptions(label_descriptions, labels)
    pairs: tuple = ()
    if examples is not None:
        pairs = tuple(load_examples(examples, labels, per_label=options.get("per_label"), seed=options.get("seed", 0)))
        empty = [label for t, label in pairs if not t.strip()]
        if empty:
            raise PlanError(f"examples: an empty text (label {empty[0]!r}) has no embedding to learn from.")
    elif options.get("per_label") is not None or options.get("seed") is not None:
        raise PlanError("classify_text(method='embedding'): per_label= and seed= choose examples; pass examples=... too.")
    temperature = float(options.get("temperature") or ZERO_SHOT_TEMPERATURE)
    c = options.get("C")
    require(provider)
    if pairs and importlib.util.find_spec("sklearn") is None:
        raise PlanError('classify_text(method="embedding", examples=...) trains a scikit-learn logistic regression, '
                        'and scikit-learn is not installed. Install it with: pip install "inferframe[embed]"')
    path = model_files(model)
    on_error, error_column, long_inputs, batch = _text_run_options("classify_text", options)
    confidence = bool(options.get("confidence_column", True))
    name = model or "all-MiniLM-L6-v2"
    owner = ClassSpec(EmbeddingHead, (str(path),), {
        "labels": tuple(labels), "examples": pairs, "descriptions": descriptions, "provider": provider,
        "temperature": temperature, "C": None if c is None else float(c), "device": options.get("device"),
        "encode_batch_size": int(options.get("encode_batch_size") or 32), "long_inputs": long_inputs,
        "on_error": on_error, "confidence": confidence,
        "label": f"classify[{'head' if pairs else 'zero-shot'}, {name}]",
    }, max_concurrency=options.get("max_concurrency"), use_process=bool(options.get("use_process", False)),
        gpus=float(options.get("gpus") or 0))
    node = to_node(text)
    value_type = pa.dictionary(pa.int32(), pa.string())
    spec = ModelUDFSpec(
        name="classify_text[embedding]", fn=EmbeddingHead.classify,
        return_dtype=result_type(value_type, confidence=confidence), is_batch=True, batch_size=batch,
        max_concurrency=options.get("max_concurrency") or 1, use_process=owner.use_process, gpus=owner.gpus,
        owner=owner, layout=(("expr", 0),), error_column=error_column, on_error=on_error, confidence_column=confidence,
    )
    return Expression(Alias(Call("struct.get", (UDFCall(spec, (node,)),), (("field", "value"),)), node.name()))


class EmbeddingHead:
    """Labels rows from their embeddings: a logistic regression on examples, or softmax similarity to descriptions.

    Built once per worker instance for a run; the fitted head is shared by every instance and later
    run in the process that has the same model, labels and examples.

    Parameters:
        path: the embedding model's directory.
        labels: the labels, in the user's order (the order of the probability columns).
        examples: (text, label) training pairs; empty for zero-shot.
        descriptions: (label, texts) for the labels given a description: prototypes to compare rows
            with (a label without one is compared with its own name); with examples, combined with the head.
        provider: "sentence_transformers" or "transformers".
        temperature: the zero-shot softmax temperature.
        C: the logistic regression's inverse regularisation; None chooses it by cross-validation.
        device, encode_batch_size, long_inputs, on_error, label, counters: as for the in-process embedders.
        confidence: return a "confidence" field.

    Example:
        >>> from inferframe.models.loading import model_files
        >>> head = EmbeddingHead(str(model_files(None)), labels=("sport", "food"),
        ...                      examples=(("a football match", "sport"), ("a bowl of pasta", "food")))
        >>> p = head.predict_proba(["the tennis final", "fresh bread and cheese"])
        >>> p.argmax(axis=1).tolist(), bool(np.allclose(p.sum(axis=1), 1.0))
        ([0, 1], True)
    """

    def __init__(self, path: str, *, labels: tuple, examples: tuple = (), descriptions: tuple = (),
                 provider: str = "sentence_transformers", temperature: float = ZERO_SHOT_TEMPERATURE,
                 C: float | None = None, device: str | None = None, encode_batch_size: int = 32,
                 long_inputs: str = "chunk", on_error: str = "null", label: str = "classify[embedding]",
                 counters: RunCounters | None = None, confidence: bool = True) -> None:
        embedder_cls = SentenceTransformerEmbedder if provider == "sentence_transformers" else TransformersEmbedder
        self.embedder = embedder_cls(path, device=device, normalize=True, encode_batch_size=encode_batch_size,
                                     long_inputs=long_inputs, label=label, counters=counters, on_error=on_error)
        self.labels = tuple(labels)
        self.confidence = confidence
        self.temperature = temperature
        key = (provider, path, device, self.labels, tuple(examples), tuple(descriptions), C, temperature)
        with _HEADS_LOCK:
            if key not in _HEADS:
                _HEADS[key] = self._fit(examples, dict(descriptions), C)
            self.head, self.prototypes = _HEADS[key]
        self._dictionary = pa.array(self.labels, pa.string())

    @classmethod
    def for_run(cls, services: Any, *args: Any, **kwargs: Any) -> "EmbeddingHead":
        """Build for one run: the rows are counted in the run's counters."""
        return cls(*args, counters=services.counters if services is not None else None, **kwargs)

    def _vectors(self, texts: list[str]) -> np.ndarray:
        return embedding_matrix(self.embedder, texts)

    def _fit(self, examples: tuple, descriptions: dict, C: float | None):
        protos = None
        if descriptions or not examples:
            protos = np.stack([self._vectors(list(descriptions.get(label, (label,)))).mean(axis=0)
                               for label in self.labels])
            # The mean of unit vectors is shorter than one: back to unit length so cosines stay cosines.
            protos /= np.linalg.norm(protos, axis=1, keepdims=True)
        if not examples:
            return None, protos
        y = np.asarray([self.labels.index(label) for _, label in examples])
        return fit_head(self._vectors([t for t, _ in examples]), y, len(self.labels), C), protos

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        """(rows, labels) probabilities, rows summing to one, columns in the order of ``labels``."""
        return self._proba(self._vectors(list(texts)))

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


def embedding_matrix(embedder: Any, texts: list[str]) -> np.ndarray:
    """(texts, dim) float32 unit vectors from an in-process embedder (long texts chunked and pooled as embed_text does)."""
    arr = embedder._embed(list(texts))
    return np.asarray(arr.values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(len(texts), -1)


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


def _descriptions(label_descriptions: Any, labels: list[str]) -> tuple:
    if label_descriptions is None:
        return ()
    if not isinstance(label_descriptions, dict):
        raise PlanError("label_descriptions must be a dict: label -> description text (or a list of texts).")
    extra = sorted(set(map(str, label_descriptions)) - set(labels))
    if extra:
        raise PlanError(f"label_descriptions names {extra}, which are not among the labels {labels}.")
    out = []
    for label in labels:
        if label not in label_descriptions:
            continue  # compared with its own name instead
        d = label_descriptions[label]
        texts = (d,) if isinstance(d, str) else tuple(d)
        if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
            raise PlanError(f"label_descriptions[{label!r}] must be a non-empty text or list of texts, got {d!r}.")
        out.append((label, texts))
    return tuple(out)
