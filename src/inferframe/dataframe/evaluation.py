"""``evaluate()``: score a prediction column against a truth column, or against a golden file kept in git.

The figures depend on the prediction's type:

* labels (strings, bools, integers): accuracy, per-class precision/recall/F1 and support, a confusion
  table and macro-F1;
* structs (e.g. a pydantic-derived struct column): exact-match rate (every field of the truth equal) and
  the agreement rate of each field; ``accuracy`` is the exact-match rate;
* floats: accuracy (exact equality), MAE and RMSE;
* always: rows, missing predictions (golden rows with no row in ``df``), null rate of the predictions and,
  when a ``<prediction>_error`` column exists, the error rate.

How rows count: rows whose truth is null are unlabelled and left out of the scores (``unlabelled`` says
how many); a null or missing prediction counts as wrong. ``null_rate`` and ``error_rate`` are shares of the
rows that have a prediction row (``rows - missing``).

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"label": ["pos", "neg", "pos", "neg"], "gold": ["pos", "neg", "neg", "neg"]})
    >>> ev = evaluate(df, "label", "gold")
    >>> ev.accuracy, ev.per_class["neg"]["recall"], round(ev.macro_f1, 3)
    (0.75, 0.6666666666666666, 0.733)
    >>> ev.assert_at_least(accuracy=0.7)
"""

from __future__ import annotations

import html
import math
import os
from types import MappingProxyType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from inferframe.dataframe.constructors import from_arrow, from_pandas
from inferframe.dataframe.dataframe import DataFrame
from inferframe.errors import ArgumentTypeError, ColumnNotFoundError, PathNotFoundError, PlanError
from inferframe.expressions.expression import Expression, col
from inferframe.io.formats import file_spec
from inferframe.observe.evaluation import check_types, score

_PRED, _TRUTH, _ERR, _ROW = "__eval_prediction", "__eval_truth", "__eval_error", "__eval_row"
_NULL_COLUMN = "(null)"
# Metrics assert_at_least / assert_at_most accept; the dict-valued ones take {field or label: threshold}.
_AT_LEAST = ("accuracy", "macro_f1", "exact_match")
_AT_LEAST_DICT = ("field_agreement", "precision", "recall", "f1")
_AT_MOST = ("error_rate", "null_rate", "mae", "rmse", "missing")


class Evaluation:
    """The figures of one ``evaluate()`` call; attributes are ``None`` where they do not apply to the type.

    Attributes:
        prediction, truth: the names of the columns compared.
        kind: ``"label"``, ``"struct"``, ``"number"`` or ``"value"`` (lists and other types: accuracy only).
        rows: rows evaluated (with ``golden``: the golden file's rows).
        missing: golden rows with no row in ``df`` (0 without ``golden``); they count as wrong.
        unlabelled: rows whose truth is null, left out of the scores.
        accuracy: share of labelled rows whose prediction equals the truth (structs: the exact-match rate).
        per_class: ``{label: {"precision", "recall", "f1", "support"}}`` for labels.
        macro_f1: the unweighted mean F1 over the labels seen in truth or prediction.
        confusion: an inferframe DataFrame, one row per true label (column ``truth``) and one count column per
            predicted label (``str(label)``), plus ``"(null)"`` for null or missing predictions.
        exact_match / field_agreement: structs only; ``field_agreement`` is ``{field: rate}``.
        mae / rmse: floats only, over rows where both values are present.
        error_rate: share of prediction rows whose ``<prediction>_error`` is not null (None without that column).
        null_rate: share of prediction rows whose prediction is null.
    """

    def __init__(self, **figures: Any) -> None:
        self.prediction: str = figures["prediction"]
        self.truth: str = figures["truth"]
        self.kind: str = figures["kind"]
        self.rows: int = figures["rows"]
        self.missing: int = figures.get("missing", 0)
        self.unlabelled: int = figures.get("unlabelled", 0)
        self.accuracy: float | None = figures.get("accuracy")
        self.per_class: dict[Any, dict[str, float]] | None = figures.get("per_class")
        self.macro_f1: float | None = figures.get("macro_f1")
        self.labels: list | None = figures.get("labels")
        self._matrix: list[list[int]] | None = figures.get("matrix")
        self._null_counts: list[int] | None = figures.get("null_counts")
        self.exact_match: float | None = figures.get("exact_match")
        self.field_agreement: dict[str, float] | None = figures.get("field_agreement")
        self.mae: float | None = figures.get("mae")
        self.rmse: float | None = figures.get("rmse")
        self.error_rate: float | None = figures.get("error_rate")
        self.null_rate: float | None = figures.get("null_rate")
        self.run_id: str | None = None  # the run it was stored with (the newest this process recorded)

    # --- the confusion table ------------------------------------------
    @property
    def confusion(self) -> DataFrame | None:
        """Truth x prediction counts as a DataFrame (labels only)."""
        if self.labels is None or self._matrix is None:
            return None
        names = [str(label) for label in self.labels]
        first = "truth" if "truth" not in names else "truth_"
        data: dict[str, Any] = {first: pa.array(self.labels)}
        for j, name in enumerate(names):
            data[name] = pa.array([row[j] for row in self._matrix], pa.int64())
        if self._null_counts is not None and any(self._null_counts):
            data[_NULL_COLUMN] = pa.array(self._null_counts, pa.int64())
        return from_arrow(pa.table(data))

    def mistakes(self, n: int = 3) -> list[tuple[Any, Any, int]]:
        """The ``n`` most frequent ``(truth, prediction, count)`` confusions (prediction None: null or missing)."""
        if self.labels is None or self._matrix is None:
            return []
        out = [(t, p, self._matrix[i][j]) for i, t in enumerate(self.labels) for j, p in enumerate(self.labels)
               if i != j and self._matrix[i][j]]
        out += [(t, None, c) for t, c in zip(self.labels, self._null_counts or []) if c]
        return sorted(out, key=lambda m: -m[2])[:n]

    # --- export -------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able figures (labels become strings where they are keys), e.g. to store with a run's history.

        Example:
            >>> import inferframe as ifr, json
            >>> ev = evaluate(ifr.from_pydict({"p": [True, False], "t": [True, True]}), "p", "t")
            >>> d = ev.as_dict(); d["accuracy"], d["per_class"]["True"]["recall"], d["confusion"]["counts"]
            (0.5, 0.5, [[0, 0], [1, 1]])
            >>> _ = json.dumps(d)
        """
        out: dict[str, Any] = {
            "prediction": self.prediction, "truth": self.truth, "kind": self.kind, "rows": self.rows,
            "missing": self.missing, "unlabelled": self.unlabelled, "accuracy": self.accuracy,
            "error_rate": self.error_rate, "null_rate": self.null_rate,
        }
        if self.kind == "label":
            out["macro_f1"] = self.macro_f1
            out["per_class"] = {str(k): dict(v) for k, v in (self.per_class or {}).items()}
            out["confusion"] = {"labels": [_jsonable(v) for v in self.labels or []],
                                "counts": [list(r) for r in self._matrix or []],
                                "null": list(self._null_counts or [])}
        if self.kind == "struct":
            out["exact_match"] = self.exact_match
            out["field_agreement"] = dict(self.field_agreement or {})
        if self.kind == "number":
            out["mae"], out["rmse"] = self.mae, self.rmse
        return out

    # --- assertions ---------------------------------------------------
    def assert_at_least(self, **thresholds: Any) -> None:
        """Raise AssertionError naming the metric, its value and the threshold when a figure is below it.

        Parameters:
            **thresholds: ``accuracy``, ``macro_f1``, ``exact_match`` as numbers; ``field_agreement``,
                ``precision``, ``recall``, ``f1`` as ``{field or label: threshold}``.

        Example:
            >>> import inferframe as ifr
            >>> ev = evaluate(ifr.from_pydict({"p": ["a", "b"], "t": ["a", "a"]}), "p", "t")
            >>> ev.assert_at_least(accuracy=0.9)
            Traceback (most recent call last):
            AssertionError: accuracy 0.500 is below the threshold 0.900 (prediction 'p' vs truth 't', 2 labelled rows; most frequent mistakes: 'a' predicted as 'b' x1)
        """
        self._check(thresholds, _AT_LEAST + _AT_LEAST_DICT, "assert_at_least", lambda v, t: v >= t, "below")

    def assert_at_most(self, **thresholds: Any) -> None:
        """Raise AssertionError when a figure is above its threshold: ``error_rate``, ``null_rate``, ``mae``, ``rmse``, ``missing``.

        Example:
            >>> import inferframe as ifr
            >>> evaluate(ifr.from_pydict({"p": [1.0, 2.0], "t": [1.0, 3.0]}), "p", "t").assert_at_most(mae=0.25)
            Traceback (most recent call last):
            AssertionError: mae 0.500 is above the threshold 0.250 (prediction 'p' vs truth 't', 2 labelled rows)
        """
        self._check(thresholds, _AT_MOST, "assert_at_most", lambda v, t: v <= t, "above")

    def _check(self, thresholds: dict[str, Any], known: tuple[str, ...], method: str, ok, word: str) -> None:
        if not thresholds:
            raise ArgumentTypeError(f"{method}() needs at least one threshold, e.g. {method}({known[0]}=0.9).")
        failures = []
        for metric, threshold in thresholds.items():
            if metric not in known:
                raise ArgumentTypeError(f"{method}() got an unknown metric {metric!r}; it takes: {', '.join(known)}.")
            if isinstance(threshold, dict):
                if metric not in _AT_LEAST_DICT:
                    raise ArgumentTypeError(f"{method}({metric}=...) takes a number, not a dict.")
                for key, t in threshold.items():
                    value, label = self._lookup(metric, key), f"{metric}[{key!r}]"
                    failures += self._compare(label, value, t, ok, word)
            else:
                if metric in _AT_LEAST_DICT:
                    raise ArgumentTypeError(f"{method}({metric}=...) takes a dict of thresholds, e.g. {metric}={{'name': 0.9}}.")
                failures += self._compare(metric, getattr(self, metric), threshold, ok, word)
        if failures:
            context = f"prediction {self.prediction!r} vs truth {self.truth!r}, {self.rows - self.unlabelled} labelled rows"
            if self.missing:
                context += f", {self.missing} missing predictions"
            mistakes = self.mistakes()
            if mistakes and any(m in thresholds for m in ("accuracy", "macro_f1", "precision", "recall", "f1")):
                context += "; most frequent mistakes: " + ", ".join(
                    f"{t!r} predicted as {'null' if p is None else repr(p)} x{c}" for t, p, c in mistakes)
            raise AssertionError("; ".join(failures) + f" ({context})")

    def _lookup(self, metric: str, key: Any) -> float | None:
        if metric == "field_agreement":
            table = self.field_agreement or {}
            if key not in table:
                raise KeyError(f"field_agreement has no field {key!r}; fields: {', '.join(map(repr, table)) or '(none)'}.")
            return table[key]
        classes = self.per_class or {}
        if key not in classes:
            raise KeyError(f"{metric}: no class {key!r}; classes: {', '.join(map(repr, classes)) or '(none)'}.")
        return classes[key][metric]

    @staticmethod
    def _compare(label: str, value: float | None, threshold: float, ok, word: str) -> list[str]:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return [f"{label} is undefined for this evaluation (threshold {threshold:.3f})"]
        return [] if ok(value, threshold) else [f"{label} {_fmt(value)} is {word} the threshold {_fmt(threshold)}"]

    # --- display ------------------------------------------------------
    def _summary(self) -> list[tuple[str, str]]:
        items = [("rows", str(self.rows))]
        if self.missing:
            items.append(("missing", str(self.missing)))
        if self.unlabelled:
            items.append(("unlabelled", str(self.unlabelled)))
        for name in ("accuracy", "macro_f1", "exact_match", "mae", "rmse", "null_rate", "error_rate"):
            value = getattr(self, name)
            if value is not None:
                items.append((name, _fmt(value)))
        return items

    def __repr__(self) -> str:
        head = f"Evaluation({self.prediction!r} vs {self.truth!r}, {self.kind}): "
        lines = [head + ", ".join(f"{k} {v}" for k, v in self._summary())]
        if self.per_class:
            width = max([len("class")] + [len(str(k)) for k in self.per_class])
            lines.append(f"  {'class':<{width}}  precision  recall  f1     support")
            for k, v in self.per_class.items():
                lines.append(f"  {str(k):<{width}}  {v['precision']:<9.3f}  {v['recall']:<6.3f}  {v['f1']:<5.3f}  {v['support']}")
        if self.field_agreement:
            lines.append("  field agreement: " + ", ".join(f"{k} {v:.3f}" for k, v in self.field_agreement.items()))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        e = html.escape
        rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in self._summary())
        out = f"<p><b>Evaluation</b> of {e(repr(self.prediction))} against {e(repr(self.truth))} ({e(self.kind)})</p>"
        out += f"<table>{rows}</table>"
        if self.per_class:
            body = "".join(f"<tr><td>{e(str(k))}</td><td>{v['precision']:.3f}</td><td>{v['recall']:.3f}</td>"
                           f"<td>{v['f1']:.3f}</td><td>{v['support']}</td></tr>" for k, v in self.per_class.items())
            out += ("<table><tr><th>class</th><th>precision</th><th>recall</th><th>f1</th><th>support</th></tr>"
                    f"{body}</table>")
        if self.field_agreement:
            body = "".join(f"<tr><td>{e(k)}</td><td>{v:.3f}</td></tr>" for k, v in self.field_agreement.items())
            out += f"<table><tr><th>field</th><th>agreement</th></tr>{body}</table>"
        return out


def evaluate(df: Any, prediction: Any = "label", truth: Any = "gold", *, golden: Any = None,
             on: Any = None) -> Evaluation:
    """Score ``df[prediction]`` against a truth column (in ``df``, or in a golden file joined on ``on``).

    Parameters:
        df: an inferframe DataFrame (or a pyarrow Table, a pandas DataFrame, anything with ``.to_arrow()``).
        prediction: the column (name or ``col(...)`` expression) holding the predictions.
        truth: the column holding the correct answers: in ``df``, or in ``golden`` when that is given.
        golden: optional golden set: a CSV or Parquet path (e.g. a file kept in git), or a DataFrame/Table.
            Its rows are the rows evaluated; those without a matching row in ``df`` count as missing (wrong).
        on: the key column name(s) joining ``df`` to ``golden``; required with ``golden``. Golden keys are cast
            to ``df``'s key types (an int64 CSV column matches string ids); ``df`` may hold one row per key at most.

    Returns:
        an :class:`Evaluation`: ``accuracy``, ``per_class``, ``confusion``, ``macro_f1``, ``exact_match``,
        ``field_agreement``, ``mae``, ``rmse``, ``error_rate``, ``null_rate``, ``rows``, ``missing``;
        ``as_dict()``; ``assert_at_least(accuracy=0.9)``.

    Raises:
        PlanError: before anything runs, for a missing column (the message lists the available ones),
            an unreadable golden file, ``golden`` without ``on`` (or ``on`` without ``golden``), or types
            that cannot be compared.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"id": [1, 2, 3], "text": ["great", "awful", "fine"]})
        >>> df = df.with_column("label", ifr.col("text").str.contains("great").if_else("pos", "neg"))
        >>> golden = ifr.from_pydict({"id": [1, 2, 3, 4], "gold": ["pos", "neg", "pos", "neg"]})
        >>> ev = evaluate(df, "label", "gold", golden=golden, on="id")
        >>> ev.rows, ev.missing, ev.accuracy
        (4, 1, 0.5)
        >>> ev.confusion.to_pydict()
        {'truth': ['neg', 'pos'], 'neg': [1, 1], 'pos': [0, 1], '(null)': [1, 0]}
    """
    frame = _as_frame(df)
    pred_expr, pred_name = _resolve(prediction, "prediction")
    truth_expr, truth_name = _resolve(truth, "truth")
    keys = [k.name() if isinstance(k, Expression) else k for k in ([on] if isinstance(on, (str, Expression)) else on or [])]
    if golden is None and keys:
        raise PlanError(f"evaluate(on={on!r}) joins df to a golden file, but no golden= was given. "
                        "Pass golden='path/to/golden.csv', or drop on= to compare two columns of df.")
    if golden is not None and not keys:
        raise PlanError("evaluate(golden=...) needs on=: the key column(s) that match a golden row to a row of df, "
                        "e.g. evaluate(df, 'label', 'gold', golden='evals/golden.csv', on='id').")

    names = frame.schema().column_names()
    error_name = f"{pred_name}_error"
    has_error = error_name in names
    pred_cols = [pred_expr.alias(_PRED)] + ([col(error_name).alias(_ERR)] if has_error else [])
    pred_frame = _select(frame, pred_cols + [col(k) for k in keys], "df", prediction=pred_expr, on=keys)

    if golden is None:
        both = _select(frame, pred_cols + [truth_expr.alias(_TRUTH)], "df", truth=truth_expr)
        schema = both.schema().to_arrow()
        check_types(schema.field(_PRED).type, schema.field(_TRUTH).type, pred_name, truth_name)
        table = both.to_arrow()
        pred, truth_arr = table[_PRED], table[_TRUTH]
        err = table[_ERR] if has_error else None
        matched, rows, missing = table.num_rows, table.num_rows, 0
    else:
        gold, where = _read_golden(golden)
        truth_table = _select(from_arrow(gold), [truth_expr.alias(_TRUTH)] + [col(k) for k in keys], where,
                              truth=truth_expr, on=keys).to_arrow()
        check_types(pred_frame.schema().to_arrow().field(_PRED).type, truth_table.schema.field(_TRUTH).type,
                     pred_name, truth_name)
        table = pred_frame.to_arrow()
        index = _join_index(truth_table, table, keys, where)
        pred = table[_PRED].take(index)
        err = table[_ERR].take(index) if has_error else None
        truth_arr = truth_table[_TRUTH]
        rows = truth_table.num_rows
        missing = index.null_count
        matched = rows - missing
    result = Evaluation(**score(pred, truth_arr, err, pred_name, truth_name, rows, missing, matched))
    from inferframe.observe.recorder import attach_evaluation
    from inferframe.session import current

    result.run_id = attach_evaluation(result.as_dict(), current().last_recorded)  # the newest run of this process
    return result


# --- inputs ---------------------------------------------------------------
def _as_frame(df: Any) -> DataFrame:
    if isinstance(df, DataFrame):
        return df
    if isinstance(df, (pa.Table, pa.RecordBatch)):
        return from_arrow(df)
    if type(df).__module__.split(".")[0] == "pandas":
        return from_pandas(df)
    if hasattr(df, "to_arrow"):
        return from_arrow(df.to_arrow())
    raise ArgumentTypeError(f"evaluate() takes an inferframe DataFrame (or anything with .to_arrow()), got {type(df).__name__}.")


def _resolve(spec: Any, role: str) -> tuple[Expression, str]:
    if isinstance(spec, str):
        return col(spec), spec
    if isinstance(spec, Expression):
        return spec, spec.name()
    raise ArgumentTypeError(f"evaluate({role}=...) takes a column name or an inferframe.col(...) expression, "
                    f"got {type(spec).__name__}: {spec!r}")


def _select(frame: DataFrame, exprs: list[Expression], where: str, **roles: Any) -> DataFrame:
    """``frame.select(exprs)``; a missing column raises naming the parameter that asked for it and listing the rest."""
    for role, spec in roles.items():
        for e in (spec if isinstance(spec, list) else [spec]):
            e = col(e) if isinstance(e, str) else e
            try:
                frame.select(e.alias("__check"))
            except ColumnNotFoundError as err:
                raise ColumnNotFoundError(
                    f"evaluate(): {role}={_show(e)} needs a column that is not in {where}. {err} "
                    f"Pass {role}= the column that holds the {_ROLE_HINT[role]}.") from None
    return frame.select(*exprs)


def _show(e: Expression) -> str:
    from inferframe.expressions.nodes import Col

    return repr(e._node.column) if isinstance(e._node, Col) else str(e)


_ROLE_HINT = MappingProxyType({"prediction": "model's output", "truth": "correct answers", "on": "key shared by df and the golden file"})


def _read_golden(golden: Any) -> tuple[pa.Table, str]:
    if isinstance(golden, DataFrame):
        return golden.to_arrow(), "the golden DataFrame"
    if isinstance(golden, pa.Table):
        return golden, "the golden table"
    try:
        path = os.fspath(golden)
    except TypeError:
        raise PlanError(f"evaluate(golden=...) takes a path to a CSV or Parquet file (or a DataFrame), "
                        f"got {type(golden).__name__}.") from None
    # The one table of file suffixes, as the CLI's INPUT and classify_text(examples=) read files.
    spec = None
    try:
        spec = file_spec(path)
        return spec.table(), f"the golden file {path!r}"
    except PlanError as e:
        if spec is None and not isinstance(e, PathNotFoundError):  # the name tells no format
            raise PlanError(f"evaluate(golden={path!r}): {e} Or pass a DataFrame.") from None
        error = e
    except Exception as e:  # noqa: BLE001 - any failure to read is reported as one plan error
        error = e
    kind = spec.reader if spec is not None else "data"
    raise PlanError(f"evaluate(golden={path!r}): the golden file could not be read ({type(error).__name__}: "
                    f"{str(error).rstrip('.')}). Check that the path exists (a relative path starts from "
                    f"{os.getcwd()!r}) and holds a valid {kind} file with a header row.") from None


def _join_index(truth_table: pa.Table, table: pa.Table, keys: list[str], where: str) -> pa.Array:
    """For each golden row, the index of its row in ``table`` (null where df has none)."""
    left = truth_table.select(keys)
    right = table.select(keys)
    casts = []
    for k in keys:
        lt, rt = left.schema.field(k).type, right.schema.field(k).type
        if lt != rt:
            try:
                left = left.set_column(left.schema.get_field_index(k), k, pc.cast(left[k], rt))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise PlanError(f"evaluate(on={k!r}): the key is {rt} in df but {lt} in {where} and cannot be cast "
                                f"({e}). Make the key columns the same type.") from None
            casts.append(k)
    left = left.append_column("__g", pa.array(range(left.num_rows), pa.int64()))
    right = right.append_column(_ROW, pa.array(range(right.num_rows), pa.int64()))
    joined = left.join(right, keys, join_type="left outer", use_threads=False)
    if joined.num_rows > left.num_rows:
        counts = pc.value_counts(joined["__g"]).to_pylist()
        dup = next(c["values"] for c in counts if c["counts"] > 1)
        key = {k: truth_table[k][dup].as_py() for k in keys}
        raise PlanError(f"evaluate(on={keys!r}): df has more than one row for the key {key}; each golden row needs at "
                        "most one prediction. Deduplicate df (e.g. df.distinct(...)) or add key columns to on=.")
    joined = joined.sort_by("__g")
    return joined[_ROW].combine_chunks()


def _jsonable(v: Any) -> Any:
    return v if v is None or isinstance(v, (str, bool, int, float)) else str(v)


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)
