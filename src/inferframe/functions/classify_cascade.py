"""``classify_text(cascade=[...])``: a cheap method answers the rows it is sure of, and only the rest go on.

Each stage is a ``classify_text`` method ("embedding", "score", "generate") with its own options.
A row goes to the next stage when the stage's confidence is below that stage's threshold, or when
the stage failed on it; the last stage answers every row that reaches it. The thresholds are chosen
once per process on labelled examples the stages never saw (the examples are split per label: a
part teaches the stages, the rest chooses the thresholds), as the lowest confidence at which the
cascade's accuracy on those rows still meets ``target_accuracy`` with 90% confidence (a lower
confidence bound, so a handful of lucky examples cannot set a threshold). The run reports how many rows each
stage answered and the dollars saved against the last stage answering every row
(``last_run()``'s ``stage_rows`` and ``cascade_saved``, and the progress line).

Example:
    >>> import inferframe as ifr
    >>> pairs = [("I loved it", "positive"), ("Wonderful film", "positive"), ("Great fun", "positive"),
    ...          ("I hated it", "negative"), ("Dull and awful", "negative"), ("A waste of time", "negative")]
    >>> from inferframe.functions import classify_text
    >>> expr = classify_text(ifr.col("t"), ["positive", "negative"], cascade=["embedding", "score"], examples=pairs,
    ...                      model="gemma-3-270m")
    >>> ifr.from_pydict({"t": ["Great!"]}).with_column("s", expr).schema()["s_confidence"]
    DataType(double)
"""

from __future__ import annotations

import asyncio
import logging
import math
import warnings
from typing import Any

import pyarrow as pa

from inferframe.ai.classify import ClassifyOperator
from inferframe.ai.columns import ERROR_TYPE, USAGE_TYPE, result_type
from inferframe.ai.examples import load_examples
from inferframe.ai.run import services_or_default
from inferframe.errors import PlanError, RowFailed
from inferframe.expressions.expression import Expression
from inferframe.expressions.nodes import Lit
from inferframe.functions._calls import ai_expression
from inferframe.observe.stats import RunStats
from inferframe.series import Series

__all__ = ["CascadeOperator", "accuracy_bound", "cascade_classify", "choose_thresholds", "split_examples"]

log = logging.getLogger(__name__)

# Thresholds chosen in this process, by CascadeConfig.key(): a later run of the same cascade (a
# rerun, show() then collect()) reuses them instead of asking every stage about the examples again.
_CHOSEN: dict = {}

# Run-level options: they apply to the cascade's column, not to a stage.
_CASCADE_OPTIONS = ("on_error", "error_column", "usage_column")


def cascade_classify(text: Any, labels: list[str], cascade: Any, *, examples: Any, target_accuracy: float = 0.9,
                     examples_per_label: int = 20, system_message: str | None = None, calibrate: Any = "auto",
                     label_descriptions: Any = None, confidence_column: bool = True, build_stage: Any,
                     **options: Any) -> Expression:
    """The column expression of a cascade of classification methods (``classify_text(cascade=...)``).

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
            training set); at most half of each label's examples, the rest choose the thresholds.
        system_message, calibrate, label_descriptions: as for ``classify_text`` (label_descriptions
            go to "embedding" stages).
        confidence_column: add "<name>_confidence": the answering stage's confidence.
        build_stage: what builds a stage's expression: ``classify_text`` (which passes itself; this
            module sits below it).
        **options: on_error, error_column and usage_column apply to the cascade's column; every
            other option (provider, model, max_concurrency, ...) goes to the language-model
            stages; a stage's own dict overrides them.

    Example:
        >>> from inferframe import col
        >>> pairs = [("good", "a"), ("fine", "a"), ("bad", "b"), ("poor", "b")]
        >>> from inferframe.functions import classify_text
        >>> cascade_classify(col("t"), ["a", "b"], ["generate", "score"], examples=pairs, model="gemma-3-270m",
        ...                  build_stage=classify_text)
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: classify_text(cascade=...): stage 1 (method 'generate') gives no confidence to route rows on; only the last stage may be 'generate'.
    """
    stages_in = _stage_dicts(cascade)
    if not isinstance(target_accuracy, (int, float)) or isinstance(target_accuracy, bool) \
            or not 0 < target_accuracy <= 1:
        raise PlanError(f"classify_text(cascade=...): target_accuracy={target_accuracy!r} must be a number in (0, 1].")
    if examples is None:
        raise PlanError("classify_text(cascade=...) chooses each stage's confidence threshold on labelled examples: "
                        "pass examples=... (a DataFrame, a list of (text, label) pairs, or a file).")
    if not isinstance(text, Expression):
        raise PlanError("classify_text(cascade=...) takes one text column, e.g. col('review'); "
                        f"got {type(text).__name__}.")
    own = {k: options.pop(k) for k in _CASCADE_OPTIONS if k in options}
    on_error = own.get("on_error", "null")
    if on_error not in ("null", "raise"):
        raise PlanError(f"classify_text(): on_error={on_error!r} is not 'null' or 'raise'.")
    teach, held = split_examples(examples, labels, examples_per_label)

    stages, names, specs = [], [], []
    for i, stage in enumerate(stages_in):
        method = stage.get("method", "auto")
        if method == "embedding":
            opts = {k: v for k, v in stage.items() if k != "method"}
            extra = {} if "label_descriptions" in opts else {"label_descriptions": label_descriptions}
        else:
            opts = {**options, **{k: v for k, v in stage.items() if k != "method"}}
            extra = {"system_message": system_message, "calibrate": calibrate}
        # A stage's failed row goes on to the next stage: only the cascade's answer obeys on_error.
        opts.update(on_error="null", confidence_column=True)
        expr = build_stage(text, labels, method=method, examples=teach, examples_per_label=examples_per_label,
                             **extra, **opts)
        owner, template, kind, name, spec = _stage_of(expr)
        if kind == "generate" and i < len(stages_in) - 1:
            raise PlanError(f"classify_text(cascade=...): stage {i + 1} (method {method!r}) gives no confidence to "
                            "route rows on; only the last stage may be 'generate'.")
        stages.append((owner, template))
        names.append(_unique(name, names))
        specs.append((kind, spec))
    config = CascadeConfig(labels=tuple(labels), stages=tuple(stages), names=tuple(names), held=tuple(held),
                           target=float(target_accuracy), on_error=on_error, confidence=confidence_column)
    # Batches as the language-model stages want them (their prefix window), else as the head's.
    llm = [spec for kind, spec in specs if kind != "embedding"]
    batch, window = (llm[0].batch_size, llm[0].max_concurrency) if llm else (256, 2)
    return ai_expression(CascadeOperator, config, [text._node], pa.dictionary(pa.int32(), pa.string()),
                         error_column=own.get("error_column", True), usage_column=own.get("usage_column", False),
                         confidence_column=confidence_column, name="classify_text[cascade]", batch=batch,
                         window=window)


class CascadeConfig:
    """What a cascade runs: its stages (owner class, args, kwargs, part template), held-back examples, target.

    Plain data, pickled to every worker that runs the cascade.
    """

    def __init__(self, *, labels: tuple, stages: tuple, names: tuple, held: tuple, target: float, on_error: str,
                 confidence: bool) -> None:
        self.labels, self.stages, self.names, self.held = labels, stages, names, held
        self.target, self.on_error, self.confidence = target, on_error, confidence
        self.label = "cascade[" + " > ".join(names) + "]"
        self.index = {label: i for i, label in enumerate(labels)}

    def key(self) -> str:
        """What the thresholds depend on: the stages as configured, the held-back examples and the target."""
        stages = [(o.cls.__name__, o.args, sorted(o.kwargs.items()), t) for o, t in self.stages]
        return repr((stages, self.labels, self.held, self.target))


class CascadeOperator:
    """Runs a cascade per batch: every row through the first stage, the unsure ones through the next, and so on.

    Built once per run (``for_run``) on the run's event loop; its stages are built on first use, and
    their thresholds chosen once per run on the held-back examples (a rerun reads the language-model
    stages' answers from the response cache).
    """

    def __init__(self, config: CascadeConfig, services: Any = None) -> None:
        self.config = config
        self._services = services
        self.stats = RunStats(label=config.label)
        services_or_default(services).counters.add(self.stats)
        self._stages: list | None = None
        self._last_cost = self._last_rows = 0.0  # what the last stage spent, on how many rows: its mean cost per row
        self.thresholds: list[float] | None = None
        self.estimate: float | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def for_run(cls, services: Any, config: CascadeConfig) -> "CascadeOperator":
        return cls(config, services)

    async def aclose(self) -> None:
        for stage in self._stages or ():
            if hasattr(stage, "aclose"):
                await stage.aclose()

    async def _prepare(self) -> None:
        async with self._lock:
            if self._stages is not None:
                return
            stages = []
            for owner, _ in self.config.stages:
                if owner.cls is _head_class():  # loads a model: off the event loop
                    stages.append(await asyncio.to_thread(owner.cls.for_run, self._services, *owner.args,
                                                          **owner.kwargs))
                else:
                    stages.append(owner.cls.for_run(self._services, *owner.args, **owner.kwargs))
            self._stages = stages
            await self._choose()

    async def _answer(self, i: int, texts: list[str]) -> pa.StructArray:
        """Stage ``i``'s struct{value, error, usage, confidence} for ``texts``."""
        stage, template = self._stages[i], self.config.stages[i][1]
        n = len(texts)
        if isinstance(stage, _head_class()):  # a blocking model call: off the event loop
            return await asyncio.to_thread(stage.classify, Series(pa.array(texts, pa.string())))
        cols = [Series(pa.array(texts, pa.string())) if part is None else Series(pa.array([part] * n, pa.string()))
                for part in template]
        return await stage(*cols)

    async def _choose(self) -> None:
        """Each stage's threshold, from every stage's answers on the held-back examples (once per process)."""
        c = self.config
        key = c.key()
        if key in _CHOSEN:
            self.thresholds, self.estimate, self._last_cost, self._last_rows = _CHOSEN[key]
            self.stats.stage_thresholds.update(dict(zip(c.names, self.thresholds)))
            return
        texts = [t for t, _ in c.held]
        gold = [c.index[label] for _, label in c.held]
        predictions, confidences = [], []
        for i in range(len(self._stages)):
            out = await self._answer(i, texts)
            _uncount(self._stages[i], len(texts))  # not rows of the user's data (their requests still count)
            predictions.append([None if v is None else c.index[str(v)] for v in out.field("value").to_pylist()])
            confidences.append(out.field("confidence").to_pylist())
        self._spent_last(out.field("usage").to_pylist())
        self.thresholds, self.estimate, reached = choose_thresholds(predictions, confidences, gold, c.target)
        _CHOSEN[key] = (self.thresholds, self.estimate, self._last_cost, self._last_rows)
        self.stats.stage_thresholds.update(dict(zip(c.names, self.thresholds)))
        shown = ", ".join(f"{name} >= {t:.3f}" for name, t in zip(c.names, self.thresholds))
        log.info("%s: thresholds %s; accuracy on %d held-back examples %.3f (target %.3f)", c.label, shown,
                 len(texts), self.estimate, c.target)
        if not reached:
            low = accuracy_bound(round(self.estimate * len(texts)), len(texts))
            warnings.warn(f"{c.label}: target_accuracy={c.target} is out of reach on the {len(texts)} held-back "
                          f"examples: the best cascade is right on {self.estimate:.1%} of them, which shows at least "
                          f"{low:.1%} with 90% confidence ({shown}). Add more examples (the held-back part grows "
                          "with them), a stronger last stage, or lower the target.", stacklevel=2)

    def _spent_last(self, usages: list) -> None:
        self._last_cost += sum((u or {}).get("cost") or 0.0 for u in usages)
        self._last_rows += len(usages)

    async def __call__(self, texts_col: Series) -> pa.StructArray:
        await self._prepare()
        c = self.config
        texts = texts_col.to_pylist()
        n = len(texts)
        value: list = [None] * n
        confidence: list = [None] * n
        error: list = [None] * n
        usage: list = [None] * n
        pending = [r for r, t in enumerate(texts) if t is not None]
        last = len(self._stages) - 1
        spent = 0.0
        for i in range(len(self._stages)):
            if not pending:
                break
            out = await self._answer(i, [texts[r] for r in pending])
            values, confs = out.field("value").to_pylist(), out.field("confidence").to_pylist()
            errors, usages = out.field("error").to_pylist(), out.field("usage").to_pylist()
            deferred, answered = [], 0
            if i == last:
                self._spent_last(usages)
            for j, r in enumerate(pending):
                usage[r] = _add_usage(usage[r], usages[j])
                spent += (usages[j] or {}).get("cost") or 0.0
                sure = values[j] is not None and confs[j] is not None and confs[j] >= self.thresholds[i] \
                    if i < last else True
                if sure:
                    value[r], confidence[r], error[r] = values[j], confs[j], errors[j]
                    answered += 1
                else:
                    deferred.append(r)
            self.stats.stage_rows[c.names[i]] = self.stats.stage_rows.get(c.names[i], 0) + answered
            pending = deferred
        self.stats.rows_done += n
        if self._last_rows:
            # Saved: what the last stage would have cost on every row, at its mean so far, less what was spent.
            rows = n - texts.count(None)
            self.stats.cascade_saved += max(0.0, self._last_cost / self._last_rows * rows - spent)
        failed = next((e for e in error if e is not None), None)
        self.stats.errors += sum(e is not None for e in error)
        if failed is not None and c.on_error == "raise":
            raise RowFailed.of(failed)
        index = [None if v is None else c.index[str(v)] for v in value]
        fields = [pa.DictionaryArray.from_arrays(pa.array(index, pa.int32()), pa.array(c.labels, pa.string())),
                  pa.array(error, ERROR_TYPE), pa.array(usage, USAGE_TYPE)]
        if c.confidence:
            fields.append(pa.array(confidence, pa.float64()))
        return pa.StructArray.from_arrays(fields, fields=list(result_type(fields[0].type, confidence=c.confidence)))


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


def split_examples(examples: Any, labels: list[str], per_label: int) -> tuple[list, list]:
    """(teach, held): per label, at most ``per_label`` examples (and at most half) teach, the rest are held back.

    Parameters:
        examples: labelled rows, as ``load_examples`` reads them.
        labels: the labels.
        per_label: the most examples per label that teach.

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
    k = min(per_label, per // 2)
    # Interleaved label by label: the first k rounds teach, the rest are held back.
    return pairs[:k * len(labels)], pairs[k * len(labels):]


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
        bad = sorted(set(stage) & {*_CASCADE_OPTIONS, "cascade", "examples", "target_accuracy"})
        if bad:
            raise PlanError(f"classify_text(cascade=...): stage {i + 1} sets {bad}, which apply to the whole cascade; "
                            "pass them to classify_text() itself.")
        out.append(dict(stage))
    return out


def _stage_of(expr: Expression):
    """(owner, part template, kind, short name, spec) of a classify_text expression."""
    call = expr._node.child.args[0]
    spec, owner = call.udf, call.udf.owner
    template = tuple(p.value if isinstance(p, Lit) else None for p in call.args)
    if owner.cls is _head_class():
        kind = "embedding"
        name = "head" if owner.kwargs["examples"] else "zero-shot"
        return owner, template, kind, f"{name}[{owner.kwargs['label'].rsplit(', ', 1)[-1].rstrip(']')}]", spec
    if sum(p is None for p in template) != 1:
        raise PlanError("classify_text(cascade=...) takes one text column per row.")
    cfg = owner.args[0]
    return owner, template, cfg.method, f"{cfg.method}[{cfg.model}]", spec


def _head_class():
    from inferframe.functions.classify_embedding import EmbeddingHead

    return EmbeddingHead


def _unique(name: str, taken: list[str]) -> str:
    return name if name not in taken else f"{name}#{len(taken) + 1}"


def _uncount(stage: Any, rows: int) -> None:
    stats = stage.stats if isinstance(stage, ClassifyOperator) else stage.embedder.stats
    stats.rows_done -= rows


def _add_usage(total: dict | None, usage: dict | None) -> dict | None:
    if usage is None:
        return total
    if total is None:
        return dict(usage)
    out = dict(total)
    for k in ("input_tokens", "output_tokens", "cost", "cached_tokens"):
        out[k] = (out.get(k) or 0) + (usage.get(k) or 0)
    out["finish_reason"] = usage.get("finish_reason") or out.get("finish_reason")
    return out
