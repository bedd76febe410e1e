"""``DataFrame.sem_dedup()`` and ``sem_cluster_by()``: rows the model finds the same, grouped into clusters.

Both check their arguments and build their AI steps (the embedding and the yes/no pair check), then a
lazy plan node whose planner (``plan.semantic.cluster``: blocking, the pair checks, the evidence merge)
runs when a job reaches it. Calling them reads no data and sends no request.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"name": ["Joe's", "Joes", "Blue"]})
    >>> sem_dedup(df, "{name} are the same business", k=2, model="gemma-3-270m")._plan.describe()
    "SemDedup '{name} are the same business' k=2 merge=evidence -> blocking est_calls=6 (at most)"
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import col
from inferframe.functions._sem_global import sealed, check_columns, criterion, model_name, operator
from inferframe.functions._vocabulary import take
from inferframe.functions.ai import classify_text
from inferframe.functions.embed import embed_text
from inferframe.functions.templates import parse_template
from inferframe.plan.semantic.cluster import MERGES, Cluster

__all__ = ["sem_cluster_by", "sem_dedup"]


def _clusters(df: Any, template: str, k: int, threshold: float | None, embed_model: str | None, on_error: str,
              options: dict, fn: str, merge: str) -> Any:
    """The lazy operator: its arguments checked and its AI steps built now; its planner runs with the job."""
    options = sealed(options)
    embed_model = take(fn, options, "embed_model", embed_model)
    t = parse_template(template, fn)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise PlanError(f"{fn}(): k={k!r} must be a whole number >= 1 (candidates per row), e.g. k=5.")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not -1 <= threshold <= 1):
        raise PlanError(f"{fn}(): threshold={threshold!r} must be a cosine similarity from -1 to 1, e.g. 0.7.")
    if merge not in MERGES:
        raise PlanError(f"{fn}(): merge={merge!r} is not one of {', '.join(map(repr, MERGES))}; e.g. merge='evidence' "
                        "(two clusters join when their checks say yes more often than no).")
    if "cluster_id" in df.column_names:
        raise PlanError(f"{fn}(): the DataFrame has a column 'cluster_id'; rename it first, e.g. "
                        "df.with_column_renamed('cluster_id', 'old_cluster_id').")
    check_columns(df, t, fn)
    # Uncalibrated unless asked: a batch prior would make about half of the candidate pairs matches,
    # where most of them are not. The user's system_message replaces the default instructions.
    asked = {"calibrate": False, **options, "on_error": on_error}
    system = asked.pop("system_message", None) or "Answer yes or no."
    check = classify_text(col("q"), ["yes", "no"], system_message=system, confidence_column=False, **asked)
    op = Cluster(fn, template, tuple(t.columns()), criterion(t), k, threshold, merge, model_name(options),
                 embed_text(col("t"), model=embed_model), check)
    schema = df.schema().to_arrow()
    out = schema.append(pa.field("cluster_id", pa.int64()))
    return operator(df, out, op)


def sem_cluster_by(df: Any, template: str, *, k: int = 5, threshold: float | None = None,
                   embed_model: str | None = None, merge: str = "evidence", on_error: str = "null",
                   **options: Any) -> Any:
    """Every row with a ``cluster_id`` (0, 1, ... in order of first appearance): rows the model finds the same share one.

    Lazy (``explain()`` shows it and the calls expected); its first run collects ``df`` and computes the
    result, once. Its ``sem_stats`` (after the run) is
    {"calls", "jobs", "failed", "pairs", "clusters", "refused_merges", "yes", "quality"} ("yes": the pair checks
    that said yes; "quality": the quality guard's measurements, empty when the answers vary: a
    ``LowInformationWarning`` names them when (nearly) every check said yes).

    Parameters:
        df: the DataFrame.
        template: the statement about two rows, with the columns it reads: ``"{name} and {address} are the same business"``.
        k: candidate pairs per row: its k most similar rows by embedding.
        threshold: also require a cosine similarity of at least this (None: the k nearest whatever their similarity).
        embed_model: the in-process embedding model (default: the packaged all-MiniLM-L6-v2).
        merge: "evidence" (default): a "yes" joins two clusters only when the checks between them say
            "yes" more often than "no"; "any": every "yes" joins (transitive closure).
        on_error: "null" (default): a failed check is neither "yes" nor "no"; "raise": ``RowFailed``.
        **options: what ``classify_text`` takes (provider, model, base_url, method, ...).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"name": ["Joe's Pizza", "Joes Pizza", "Blue Cafe"]})
        >>> df.sem_cluster_by("{name} are the same business", model="gemma-3-270m").to_pydict()  # doctest: +SKIP
        {'name': ["Joe's Pizza", 'Joes Pizza', 'Blue Cafe'], 'cluster_id': [0, 0, 1]}
    """
    return _clusters(df, template, k, threshold, embed_model, on_error, options, "sem_cluster_by", merge)


def sem_dedup(df: Any, template: str, *, k: int = 5, threshold: float | None = None,
              embed_model: str | None = None, merge: str = "evidence", on_error: str = "null", **options: Any) -> Any:
    """One row per cluster of rows the model finds the same (the cluster's first row), with its ``cluster_id``.

    Parameters and result as for ``sem_cluster_by``.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"name": ["Joe's Pizza", "Joes Pizza", "Blue Cafe"]})
        >>> df.sem_dedup("{name} are the same business", model="gemma-3-270m").to_pydict()  # doctest: +SKIP
        {'name': ["Joe's Pizza", 'Blue Cafe'], 'cluster_id': [0, 1]}
    """
    return _clusters(df, template, k, threshold, embed_model, on_error, options, "sem_dedup", merge)
