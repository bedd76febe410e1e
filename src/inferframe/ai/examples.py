"""Labelled examples for classification: loaded, checked against the labels and balanced per label.

``classify_text(..., examples=...)`` uses them as few-shot demonstrations, as training rows for a head
on embeddings, and to choose a cascade's thresholds. Everything here runs at plan time, so a wrong
label fails before any row is sent to a model.

Example:
    >>> load_examples([("great film", "pos"), ("dull", "neg"), ("loved it", "pos")], ["pos", "neg"], seed=None)
    [('great film', 'pos'), ('dull', 'neg')]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from inferframe.errors import PathNotFoundError, PlanError

__all__ = ["load_examples", "nearest"]


def load_examples(examples: Any, labels: Sequence[str], *, examples_per_label: int | None = None,
                  seed: int | None = 0) -> list[tuple[str, str]]:
    """Labelled (text, label) pairs, the same number per label, interleaved label by label.

    Parameters:
        examples: an inferframe DataFrame (columns ``text`` and ``label``, else its first two columns),
            a pyarrow Table or pandas DataFrame of the same shape, a list of (text, label) pairs,
            or a path to a CSV, Parquet or JSON-lines file.
        labels: the allowed labels; every example's label must be one of them, and each needs an example.
        examples_per_label: how many examples to keep per label (default: the smallest label's count).
        seed: which examples a label keeps when it has more than ``examples_per_label``: a seeded random
            choice, so a file sorted by label or by date still gives a varied sample; None keeps
            the first ones in input order.

    Returns:
        ``examples_per_label * len(labels)`` pairs in the order a, b, a, b, ... (labels in the order given),
        so a demonstration prompt never shows one label in a long run and is the same on every run.

    Raises:
        PlanError: a label outside ``labels``, a label without examples, a missing text or label,
            or an ``examples_per_label`` more than some label has.

    Example:
        >>> pairs = [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b")]
        >>> load_examples(pairs, ["a", "b"], seed=None)
        [('a1', 'a'), ('b1', 'b'), ('a2', 'a'), ('b2', 'b')]
        >>> load_examples(pairs, ["a", "b"], examples_per_label=1, seed=None)
        [('a1', 'a'), ('b1', 'b')]
        >>> load_examples(pairs, ["a"])
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: examples: label 'b' (row 3) is not one of the labels ['a']
    """
    labels = [str(label) for label in labels]
    if not labels:
        raise PlanError("examples: no labels to classify into")
    if len(set(labels)) != len(labels):
        raise PlanError(f"examples: the labels repeat: {labels}")
    pairs = _pairs(examples)
    allowed = set(labels)
    by_label: dict[str, list[str]] = {label: [] for label in labels}
    for i, (text, label) in enumerate(pairs):
        if label is None:
            raise PlanError(f"examples: row {i} has no label (text {_short(text)})")
        if text is None:
            raise PlanError(f"examples: row {i} (label {label!r}) has no text")
        label = str(label)
        if label not in allowed:
            raise PlanError(f"examples: label {label!r} (row {i}) is not one of the labels {labels}")
        by_label[label].append(str(text))
    missing = [label for label, texts in by_label.items() if not texts]
    if missing:
        raise PlanError(f"examples: no example for label(s) {missing}; each of {labels} needs at least one")
    smallest = min(len(texts) for texts in by_label.values())
    if examples_per_label is None:
        examples_per_label = smallest
    if not isinstance(examples_per_label, (int, np.integer)) or isinstance(examples_per_label, bool) \
            or examples_per_label < 1:
        raise PlanError(f"examples: examples_per_label must be a positive whole number, got {examples_per_label!r}")
    short = {label: len(texts) for label, texts in by_label.items() if len(texts) < examples_per_label}
    if short:
        raise PlanError(f"examples: examples_per_label={examples_per_label} but only {short} example(s) for those "
                        "labels")
    chosen = {label: _choose(texts, examples_per_label, seed, k) for k, (label, texts) in enumerate(by_label.items())}
    return [(chosen[label][j], label) for j in range(examples_per_label) for label in labels]


def nearest(row_vectors: Any, example_vectors: Any, k: int, *,
            example_labels: Sequence[str] | None = None) -> np.ndarray:
    """Indexes of the ``k`` examples nearest each row by cosine similarity, most similar first.

    Parameters:
        row_vectors: (rows, dim) embeddings of the rows to classify.
        example_vectors: (examples, dim) embeddings of the examples, same model.
        k: how many per row (at most the number of examples); with ``example_labels``, per label.
        example_labels: each example's label: then the ``k`` nearest of every label are taken and
            interleaved label by label (labels in order of first appearance), so the
            demonstrations stay balanced while being the row's closest ones.

    Returns:
        An int64 array (rows, k), or (rows, k * labels) with ``example_labels``. Ties go to the
        lower index, so the choice is the same on every run.

    Example:
        >>> ex = [[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]]
        >>> nearest([[1.0, 0.1], [0.1, 1.0]], ex, 2).tolist()
        [[0, 2], [1, 2]]
        >>> nearest([[1.0, 0.1]], ex, 1, example_labels=["x", "y", "y"]).tolist()
        [[0, 2]]
    """
    rows = _unit(row_vectors)
    examples = _unit(example_vectors)
    if examples.shape[0] == 0:
        raise PlanError("nearest: no example vectors")
    if rows.shape[1] != examples.shape[1]:
        raise PlanError(f"nearest: rows have {rows.shape[1]} dimensions, examples {examples.shape[1]}")
    if k < 1:
        raise PlanError(f"nearest: k must be at least 1, got {k}")
    sims = rows @ examples.T
    if example_labels is None:
        return _top(sims, min(k, examples.shape[0]))
    if len(example_labels) != examples.shape[0]:
        raise PlanError(f"nearest: {len(example_labels)} labels for {examples.shape[0]} examples")
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(example_labels):
        groups.setdefault(str(label), []).append(i)
    per = min(k, min(len(members) for members in groups.values()))
    picks = []
    for members in groups.values():
        index = np.asarray(members, dtype=np.int64)
        picks.append(index[_top(sims[:, index], per)])
    # (labels, rows, per) -> rows x (per * labels), alternating labels: a, b, a, b, ...
    return np.stack(picks, axis=2).reshape(rows.shape[0], per * len(picks))


def _pairs(examples: Any) -> list[tuple[Any, Any]]:
    if isinstance(examples, (str, os.PathLike)):
        return _table_pairs(_read_file(os.fspath(examples)))
    import pyarrow as pa

    # An inferframe DataFrame, known by its method: this layer sits below the DataFrame's.
    if callable(getattr(examples, "to_arrow", None)) and hasattr(examples, "schema"):
        return _table_pairs(examples.to_arrow())

    if isinstance(examples, pa.Table):
        return _table_pairs(examples)
    if type(examples).__module__.startswith("pandas") and hasattr(examples, "columns"):
        return _table_pairs(pa.Table.from_pandas(examples, preserve_index=False))
    if isinstance(examples, dict):
        raise PlanError("examples: a dict is ambiguous; give a list of (text, label) pairs or a DataFrame")
    try:
        items = list(examples)
    except TypeError:
        raise PlanError(f"examples: expected a DataFrame, a list of (text, label) pairs or a file path, "
                        f"got {type(examples).__name__}") from None
    out = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and {"text", "label"} <= item.keys():
            out.append((item["text"], item["label"]))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            out.append((item[0], item[1]))
        else:
            raise PlanError(f"examples: item {i} is not a (text, label) pair: {item!r}")
    return out


def _read_file(path: str):
    # The io layer's one table of file suffixes, as the CLI's INPUT and evaluate(golden=) read files;
    # the io layer directly, since the ai layer sits below the DataFrame API.
    from inferframe.io.formats import file_spec

    try:
        spec = file_spec(path)
    except PathNotFoundError:
        raise
    except PlanError as e:
        raise PlanError(f"examples: {e}") from None
    return spec.table()


def _table_pairs(table) -> list[tuple[Any, Any]]:
    names = table.column_names
    if "text" in names and "label" in names:
        text, label = "text", "label"
    elif len(names) >= 2:
        text, label = names[0], names[1]
    else:
        raise PlanError(f"examples: need columns 'text' and 'label' (or two columns), got {names}")
    return list(zip(table.column(text).to_pylist(), table.column(label).to_pylist()))


def _choose(texts: list[str], n: int, seed: int | None, salt: int) -> list[str]:
    if seed is None or n >= len(texts):
        return texts[:n]
    # A generator per label (seed, label position) so adding examples to one label leaves another's pick alone.
    rng = np.random.default_rng([seed, salt])
    keep = np.sort(rng.choice(len(texts), size=n, replace=False))
    return [texts[i] for i in keep]


def _unit(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise PlanError(f"nearest: expected a 2-d array of vectors, got shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)  # a zero vector is similar to nothing, not NaN


def _top(sims: np.ndarray, k: int) -> np.ndarray:
    # A stable sort on -similarity keeps the lower index first among equals.
    return np.argsort(-sims, axis=1, kind="stable")[:, :k].astype(np.int64)


def _short(text: Any) -> str:
    s = repr(text)
    return s if len(s) <= 40 else s[:37] + "..."


def demonstrations(pairs: list[tuple[str, str]] | None) -> tuple[str, str]:
    """The text before and after each row: the labelled examples, then the row in the same layout.

    Parameters:
        pairs: (text, label) demonstrations, or None.

    Example:
        >>> demonstrations([("Loved it.", "positive"), ("Dull.", "negative")])
        ('Text: Loved it.\\nLabel: positive\\n\\nText: Dull.\\nLabel: negative\\n\\nText: ', '\\nLabel:')
    """
    shown = "".join(f"Text: {t}\nLabel: {lab}\n\n" for t, lab in pairs or ())
    return shown + "Text: ", "\nLabel:"
