"""Score a prediction column against a truth column, as Arrow arrays: the figures ``evaluate()`` reports.

``score`` returns plain figures (a dict) by the prediction's kind: labels (accuracy, per-class precision/recall/F1,
confusion matrix, macro-F1), structs (exact match, per-field agreement), numbers (accuracy, MAE, RMSE).
``inferframe.evaluate`` reads the DataFrame and golden file, and wraps these figures in an ``Evaluation``.

Example:
    >>> import pyarrow as pa
    >>> figures = score(pa.chunked_array([["pos", "neg", None]]), pa.chunked_array([["pos", "pos", "neg"]]), None,
    ...                 "label", "gold", rows=3, missing=0, matched=3)
    >>> figures["accuracy"], figures["labels"], figures["matrix"], figures["null_rate"]
    (0.3333333333333333, ['neg', 'pos'], [[0, 0], [1, 1]], 0.3333333333333333)
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from inferframe.errors import PlanError

__all__ = ["align", "check_types", "score"]


def _decoded(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def check_types(p: pa.DataType, t: pa.DataType, pred_name: str, truth_name: str) -> None:
    p, t = _decoded(p), _decoded(t)
    if pa.types.is_null(p) or pa.types.is_null(t):
        return
    if pa.types.is_struct(p) != pa.types.is_struct(t):
        raise PlanError(f"evaluate(): prediction {pred_name!r} is {p} but truth {truth_name!r} is {t}; "
                        "a struct can only be compared with a struct. Point prediction= and truth= at matching columns "
                        "(or a field of the struct, e.g. col('x')['field']).")
    if pa.types.is_struct(t):
        pred_fields = [p.field(i).name for i in range(p.num_fields)]
        absent = [t.field(i).name for i in range(t.num_fields) if t.field(i).name not in pred_fields]
        if absent:
            raise PlanError(f"evaluate(): truth {truth_name!r} has field(s) {', '.join(map(repr, absent))} that prediction "
                            f"{pred_name!r} lacks (its fields: {', '.join(pred_fields)}). "
                            "Compare matching structs, or select the shared fields.")


def align(pred: pa.ChunkedArray, truth: pa.ChunkedArray, pred_name: str, truth_name: str):
    """Cast prediction and truth to one type where they differ (e.g. an int64 CSV column vs string labels)."""
    if pa.types.is_dictionary(pred.type):
        pred = pc.cast(pred, pred.type.value_type)
    if pa.types.is_dictionary(truth.type):
        truth = pc.cast(truth, truth.type.value_type)
    p, t = pred.type, truth.type
    if p == t or (pa.types.is_struct(p) and pa.types.is_struct(t)):
        return pred, truth
    if pa.types.is_null(p):
        return pred.cast(t), truth
    if pa.types.is_null(t):
        return pred, truth.cast(p)
    numeric = (pa.types.is_integer, pa.types.is_floating)
    if any(f(p) for f in numeric) and any(f(t) for f in numeric):
        common = pa.float64() if pa.types.is_floating(p) or pa.types.is_floating(t) else pa.int64()
        return pc.cast(pred, common), pc.cast(truth, common)
    for a, b, swap in ((truth, p, False), (pred, t, True)):
        try:
            cast = pc.cast(a, b)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            continue
        return (cast, truth) if swap else (pred, cast)
    raise PlanError(f"evaluate(): prediction {pred_name!r} is {p} and truth {truth_name!r} is {t}; neither casts to the "
                    "other. Cast one of them, e.g. prediction=col('label').cast(...).")


def _kind(t: pa.DataType) -> str:
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_floating(t):
        return "number"
    if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_map(t):
        return "value"
    return "label"


def score(pred: pa.ChunkedArray, truth: pa.ChunkedArray, err: pa.ChunkedArray | None, pred_name: str,
           truth_name: str, rows: int, missing: int, matched: int) -> dict[str, Any]:
    pred, truth = align(pred, truth, pred_name, truth_name)
    kind = _kind(truth.type if pa.types.is_null(pred.type) else pred.type)
    p_all, t_all = pred.to_pylist(), truth.to_pylist()
    # null_rate: among rows that have a prediction row; missing golden rows are reported as `missing`.
    pred_nulls = pred.null_count - missing
    figures: dict[str, Any] = dict(
        prediction=pred_name, truth=truth_name, kind=kind, rows=rows, missing=missing,
        null_rate=pred_nulls / matched if matched else None,
        # Missing golden rows took a null error from the join, so the non-null count is that of real rows.
        error_rate=(len(err) - err.null_count) / matched if err is not None and matched else None,
    )
    pairs = [(p, t) for p, t in zip(p_all, t_all) if t is not None]
    figures["unlabelled"] = len(t_all) - len(pairs)
    n = len(pairs)
    if kind == "struct":
        fields = [truth.type.field(i).name for i in range(truth.type.num_fields)] if pa.types.is_struct(truth.type) else []
        agree = {f: 0 for f in fields}
        exact = 0
        for p, t in pairs:
            same = [p is not None and p.get(f) == t.get(f) for f in fields]
            exact += all(same) and p is not None
            for f, s in zip(fields, same):
                agree[f] += s
        figures["exact_match"] = figures["accuracy"] = exact / n if n else None
        figures["field_agreement"] = {f: agree[f] / n for f in fields} if n else {f: None for f in fields}
        return figures
    figures["accuracy"] = sum(p is not None and p == t for p, t in pairs) / n if n else None
    if kind == "number":
        diffs = [p - t for p, t in pairs if p is not None and not math.isnan(p) and not math.isnan(t)]
        figures["mae"] = sum(abs(d) for d in diffs) / len(diffs) if diffs else None
        figures["rmse"] = math.sqrt(sum(d * d for d in diffs) / len(diffs)) if diffs else None
    if kind == "label":
        figures.update(_label_figures(pairs))
    return figures


def _label_figures(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    counts = Counter(pairs)
    seen = {t for _, t in pairs} | {p for p, _ in pairs if p is not None}
    try:
        labels = sorted(seen)
    except TypeError:
        labels = sorted(seen, key=repr)
    matrix = [[counts[(p, t)] for p in labels] for t in labels]
    null_counts = [counts[(None, t)] for t in labels]
    per_class = {}
    for i, label in enumerate(labels):
        tp = matrix[i][i]
        support = sum(matrix[i]) + null_counts[i]
        predicted = sum(row[i] for row in matrix)
        precision = tp / predicted if predicted else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[label] = {"precision": precision, "recall": recall, "f1": f1, "support": support}
    macro = sum(c["f1"] for c in per_class.values()) / len(per_class) if per_class else None
    return {"labels": labels, "matrix": matrix, "null_counts": null_counts, "per_class": per_class, "macro_f1": macro}
