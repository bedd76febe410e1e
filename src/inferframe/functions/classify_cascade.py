"""``classify_text(cascade=[...])``: the cascade's ``AICall``, combined from its stages' calls.

Each stage is a ``classify_text`` method ("embedding", "score", "generate") with its own options;
the operator that runs them, and how the thresholds are chosen, are in ``inferframe.ai.cascade``
and ``inferframe.ai.thresholds``.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions.ai import classify_call
    >>> pairs = [("good", "a"), ("fine", "a"), ("bad", "b"), ("poor", "b")]
    >>> call = cascade_call(ifr.col("t"), ["a", "b"], ["embedding", "score"], examples=pairs, model="gemma-3-270m",
    ...                     build_stage=classify_call)
    >>> call.config.label
    'cascade[head[all-MiniLM-L6-v2] > score[gemma-3-270m]]'
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall, Sizing
from inferframe.ai.cascade import CascadeConfig, CascadeOperator, CascadeStage
from inferframe.ai.options import CASCADE, take_options
from inferframe.ai.thresholds import split_examples
from inferframe.errors import PlanError
from inferframe.functions._vocabulary import take
from inferframe.expressions.expression import Expression
from inferframe.expressions.nodes import Lit


def cascade_call(text: Any, labels: list[str], cascade: Any, *, examples: Any, target_accuracy: float = 0.9,
                     examples_per_label: int | None = None, system_message: str | None = None,
                     calibrate: Any = "auto", label_descriptions: Any = None, confidence_column: bool = True,
                     build_stage: Any, embed_model: str | None = None, **options: Any) -> AICall:
    """The ``AICall`` of a cascade of classification methods (``classify_text(cascade=...)``), built from its stages' calls.

    Parameters:
        text: the text column (one expression).
        labels: the allowed labels.
        cascade: the stages, cheapest first: each a method name ("embedding", "score",
            "generate", "auto") or a dict of ``classify_text`` options with a "method" key, e.g.
            ``["embedding", {"method": "score", "model": "gemma-3-270m"}]``. Only the last stage may
            be "generate" (it gives no confidence to route on).
        examples: labelled rows (as for ``classify_text``); needed: the thresholds are chosen on them.
        target_accuracy: the accuracy the thresholds must keep on the held-back examples (0 < t <= 1).
        examples_per_label: examples per label that teach the stages (demonstrations, the head's
            training set; default 20); at most half of each label's examples, the rest choose the thresholds.
        system_message, calibrate, label_descriptions: as for ``classify_text`` (label_descriptions
            go to "embedding" stages).
        confidence_column: add "<name>_confidence": the answering stage's confidence.
        build_stage: what builds a stage's ``AICall``: ``classify_call`` (which passes itself; this
            module sits below it).
        embed_model: the embedding stages' model (a stage's own ``embed_model`` wins).
        **options: on_error, error_column and usage_column (``CASCADE``) apply to the cascade's column; every
            other option (provider, model, max_concurrency, ...) goes to the language-model
            stages; a stage's own dict overrides them.

    Example:
        >>> from inferframe import col
        >>> pairs = [("good", "a"), ("fine", "a"), ("bad", "b"), ("poor", "b")]
        >>> from inferframe.functions.ai import classify_call
        >>> cascade_call(col("t"), ["a", "b"], ["generate", "score"], examples=pairs, model="gemma-3-270m",
        ...              build_stage=classify_call)
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: classify_text(cascade=...): stage 1 (method 'generate') gives no confidence to route rows on; only the last stage may be 'generate'.
    """
    stages_in = _stage_dicts(cascade)
    _check_arguments(text, target_accuracy, examples)
    own, options = take_options("classify_text", options, CASCADE, pass_through=True)
    on_error = own.get("on_error") or "null"
    examples_per_label = take("classify_text", options, "examples_per_label", examples_per_label)
    if examples_per_label is None:
        examples_per_label = 20  # classify_text's default number of demonstrations
    teach, held = split_examples(examples, labels, examples_per_label)

    stages, calls = [], []
    for i, stage in enumerate(stages_in):
        call = _stage_call(stage, text, labels, teach, examples_per_label, options, build_stage,
                           system_message=system_message, calibrate=calibrate, label_descriptions=label_descriptions,
                           embed_model=embed_model)
        stages.append(_cascade_stage(call, stage.get("method", "auto"), i, len(stages_in), stages))
        calls.append(call)
    config = CascadeConfig(labels=tuple(labels), stages=tuple(stages), held=tuple(held),
                           target=float(target_accuracy), on_error=on_error, confidence=confidence_column)
    # Batches as the language-model stages want them (their prefix window), else as the head's.
    llm = [c.sizing for c in calls if c.is_async]
    return AICall("classify_text[cascade]", CascadeOperator, (config,), (text._node,),
                  pa.dictionary(pa.int32(), pa.string()), llm[0] if llm else Sizing(256, 2),
                  error_column=own.get("error_column", True), usage_column=own.get("usage_column", False),
                  confidence_column=confidence_column, on_error=on_error)


def _check_arguments(text: Any, target_accuracy: Any, examples: Any) -> None:
    if not isinstance(target_accuracy, (int, float)) or isinstance(target_accuracy, bool) \
            or not 0 < target_accuracy <= 1:
        raise PlanError(f"classify_text(cascade=...): target_accuracy={target_accuracy!r} must be a number in (0, 1].")
    if examples is None:
        raise PlanError("classify_text(cascade=...) chooses each stage's confidence threshold on labelled examples: "
                        "pass examples=... (a DataFrame, a list of (text, label) pairs, or a file).")
    if not isinstance(text, Expression):
        raise PlanError("classify_text(cascade=...) takes one text column, e.g. col('review'); "
                        f"got {type(text).__name__}.")


def _stage_call(stage: dict, text: Expression, labels: list[str], teach: Any, examples_per_label: int,
                options: dict, build_stage: Any, *, system_message: Any, calibrate: Any,
                label_descriptions: Any, embed_model: Any) -> AICall:
    """One stage's ``AICall``: the cascade's language-model options go to every stage but an embedding one."""
    method = stage.get("method", "auto")
    own = {k: v for k, v in stage.items() if k != "method"}  # a stage's own options win
    if method == "embedding":
        # The head trains on every teaching example: the split already kept examples_per_label of each.
        opts = {"label_descriptions": label_descriptions, **own}
        if "model" not in own:  # the stage's embedding model by its old name wins over the cascade's
            opts.setdefault("embed_model", embed_model)
    else:
        opts = {**options, "examples_per_label": examples_per_label, "system_message": system_message,
                "calibrate": calibrate, **own}
    # A stage's failed row goes on to the next stage: only the cascade's answer obeys on_error.
    opts.update(on_error="null", confidence_column=True)
    return build_stage(text, labels, method=method, examples=teach, **opts)


def _cascade_stage(call: AICall, method: str, i: int, n: int, earlier: list) -> CascadeStage:
    """Stage ``i`` of ``n`` made from its call, named uniquely among the ``earlier`` stages."""
    kind = "embedding" if not call.is_async else call.config.method
    if kind == "generate" and i < n - 1:
        raise PlanError(f"classify_text(cascade=...): stage {i + 1} (method {method!r}) gives no confidence to "
                        "route rows on; only the last stage may be 'generate'.")
    template = tuple(p.value if isinstance(p, Lit) else None for p in call.parts)
    if sum(p is None for p in template) != 1:
        raise PlanError("classify_text(cascade=...) takes one text column per row.")
    if kind == "embedding":
        name = f"{'head' if dict(call.kwargs)['examples'] else 'zero-shot'}[{call.model.model}]"
    else:
        name = f"{kind}[{call.config.model}]"
    return CascadeStage.of(call, _unique(name, [s.name for s in earlier]), kind, template)


def _stage_dicts(cascade: Any) -> list[dict]:
    if not isinstance(cascade, (list, tuple)) or len(cascade) < 2:
        raise PlanError("classify_text(cascade=...) takes a list of at least two stages, cheapest first, e.g. "
                        "cascade=['embedding', 'score'].")
    out = []
    for i, stage in enumerate(cascade):
        if isinstance(stage, str):
            stage = {"method": stage}
        if not isinstance(stage, dict):
            raise PlanError(f"classify_text(cascade=...): stage {i + 1} is {stage!r}; give a method name or a dict of "
                            "classify_text options such as {'method': 'score', 'model': 'gemma-3-270m'}.")
        bad = sorted(set(stage) & {*CASCADE, "cascade", "examples", "target_accuracy"})
        if bad:
            raise PlanError(f"classify_text(cascade=...): stage {i + 1} sets {bad}, which apply to the whole cascade; "
                            "pass them to classify_text() itself.")
        out.append(dict(stage))
    return out


def _unique(name: str, taken: list[str]) -> str:
    return name if name not in taken else f"{name}#{len(taken) + 1}"
