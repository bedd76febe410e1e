"""The cascade operator: a cheap method answers the rows it is sure of, and only the rest go on.

Each stage is a classify call ("embedding", "score", "generate") built from its ``AICall``. A row
goes to the next stage when the stage's confidence is below that stage's threshold, or when the
stage failed on it; the last stage answers every row that reaches it. The thresholds are chosen
once per job on labelled examples the stages never saw (``inferframe.ai.thresholds``) and kept on the
job's services (``RunServices.memo``): the next job chooses them again, its language-model stages
answered by the response cache. The run
reports how many rows each stage answered and the dollars saved against the last stage answering
every row (``last_run()``'s ``stage_rows`` and ``cascade_saved``, and the progress line).

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
import dataclasses
import logging
from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall, build_operator
from inferframe.ai.classify import count_answers
from inferframe.ai.columns import ERROR_TYPE, USAGE_TYPE, result_type
from inferframe.ai.run import services_or_default
from inferframe.ai.thresholds import accuracy_bound, choose_thresholds
from inferframe.errors import RowFailed, warn_user
from inferframe.observe.stats import RunStats
from inferframe.series import Series

__all__ = ["CascadeConfig", "CascadeOperator", "CascadeStage"]

log = logging.getLogger(__name__)

@dataclasses.dataclass(frozen=True)
class CascadeStage:
    """One stage of a cascade, taken from its ``AICall``: what to build per run and how to call it.

    Parameters:
        name: how the progress line and ``last_run()`` name the stage ("score[gemma-3-270m]").
        kind: "embedding", "score" or "generate".
        operator / args / kwargs / method / is_async: as the stage's ``AICall`` has them.
        template: per input part, its constant text, or None for the row's text.
        identity: the stage's part of the run history's fingerprint.
        summary: the stage as the run history lists it.
    """

    name: str
    kind: str
    operator: type
    args: tuple
    kwargs: tuple
    method: str
    is_async: bool
    template: tuple
    identity: tuple
    summary: tuple

    @classmethod
    def of(cls, call: AICall, name: str, kind: str, template: tuple) -> "CascadeStage":
        """The stage that runs ``call`` with its parts as ``template``."""
        return cls(name, kind, call.operator, call.args, call.kwargs, call.method, call.is_async, template,
                   tuple(map(repr, call.fingerprint)), tuple(call.summary.items()))


class CascadeConfig:
    """What a cascade runs: its stages, the held-back examples and the target accuracy.

    Plain data, pickled to every worker that runs the cascade.
    """

    def __init__(self, *, labels: tuple, stages: tuple, held: tuple, target: float, on_error: str,
                 confidence: bool) -> None:
        self.labels, self.stages, self.held = labels, stages, held
        self.target, self.on_error, self.confidence = target, on_error, confidence
        self.names = tuple(s.name for s in stages)
        self.label = "cascade[" + " > ".join(self.names) + "]"
        self.index = {label: i for i, label in enumerate(labels)}

    def key(self) -> str:
        """What the thresholds depend on: the stages as configured, the held-back examples and the target."""
        stages = [(s.operator.__name__, s.args, sorted(s.kwargs), s.template) for s in self.stages]
        return repr((stages, self.labels, self.held, self.target))

    def identity(self) -> list:
        """What the run history's fingerprint covers: every stage's identity, the labels, examples and target."""
        return ["cascade", list(self.labels), [list(s.identity) for s in self.stages], repr(self.held), self.target]

    def priced(self) -> list:
        """The language-model stages' configs and part templates (``AICall.priced``)."""
        return [(s.args[0], s.template) for s in self.stages if s.is_async]

    def summary(self) -> dict:
        """The cascade as the run history lists it: its stages' providers and models, joined."""
        stages = [dict(s.summary) for s in self.stages]
        return {"label": self.label, "provider": " > ".join(str(s["provider"]) for s in stages),
                "base_url": None, "model": " > ".join(str(s["model"]) for s in stages), "endpoint": None,
                "prompt_version": next((s["prompt_version"] for s in stages if s["prompt_version"]), None)}


class CascadeOperator:
    """Runs a cascade per batch: every row through the first stage, the unsure ones through the next, and so on.

    Built once per run (``for_run``) on the run's event loop; its stages are built on first use, and
    their thresholds chosen once per job on the held-back examples and kept in the job's memo (another
    instance of the same job reads them; a new job chooses again, reading the language-model stages'
    answers from the response cache).

    Parameters:
        config: the cascade (``CascadeConfig``).
        services: the job's ``RunServices`` (None: local ones of its own, with an empty memo).
    """

    def __init__(self, config: CascadeConfig, services: Any = None) -> None:
        self.config = config
        self._services = services
        self.stats = RunStats(label=config.label)
        run = services_or_default(services)
        run.counters.add(self.stats)
        self._memo = run.memo
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
            for s in self.config.stages:
                args = (s.operator, self._services, s.args, dict(s.kwargs))
                # An in-process model loads its weights: off the event loop.
                stages.append(build_operator(*args) if s.is_async else await asyncio.to_thread(build_operator, *args))
            self._stages = stages
            await self._choose()

    async def _answer(self, i: int, texts: list[str]) -> pa.StructArray:
        """Stage ``i``'s struct{value, error, usage, confidence} for ``texts``."""
        spec = self.config.stages[i]
        n = len(texts)
        cols = [Series(pa.array(texts, pa.string())) if part is None else Series(pa.array([part] * n, pa.string()))
                for part in spec.template]
        answer = getattr(self._stages[i], spec.method)
        if not spec.is_async:  # an in-process model: a blocking call, off the event loop
            return await asyncio.to_thread(answer, *cols)
        return await answer(*cols)

    async def _choose(self) -> None:
        """Each stage's threshold, from every stage's answers on the held-back examples (once per job)."""
        c = self.config
        key = ("cascade thresholds", c.key())
        chosen = self._memo.get(key)
        if chosen is not None:
            self.thresholds, self.estimate, self._last_cost, self._last_rows = chosen
            self.stats.stage_thresholds.update(dict(zip(c.names, self.thresholds)))
            return
        texts = [t for t, _ in c.held]
        gold = [c.index[label] for _, label in c.held]
        predictions, confidences = [], []
        for i in range(len(self._stages)):
            out = await self._answer(i, texts)
            # Not rows of the user's data (their requests still count).
            self._stages[i].stats.rows_done -= len(texts)
            predictions.append([None if v is None else c.index[str(v)] for v in out.field("value").to_pylist()])
            confidences.append(out.field("confidence").to_pylist())
        self._spent_last(out.field("usage").to_pylist())
        self.thresholds, self.estimate, reached = choose_thresholds(predictions, confidences, gold, c.target)
        # Not memo.once: this runs on the job's event loop, which must not block on a thread's lock.
        self._memo.put(key, (self.thresholds, self.estimate, self._last_cost, self._last_rows))
        self.stats.stage_thresholds.update(dict(zip(c.names, self.thresholds)))
        shown = ", ".join(f"{name} >= {t:.3f}" for name, t in zip(c.names, self.thresholds))
        log.info("%s: thresholds %s; accuracy on %d held-back examples %.3f (target %.3f)", c.label, shown,
                 len(texts), self.estimate, c.target)
        if not reached:
            low = accuracy_bound(round(self.estimate * len(texts)), len(texts))
            warn_user(f"{c.label}: target_accuracy={c.target} is out of reach on the {len(texts)} held-back "
                      f"examples: the best cascade is right on {self.estimate:.1%} of them, which shows at least "
                      f"{low:.1%} with 90% confidence ({shown}). Add more examples (the held-back part grows "
                      "with them), a stronger last stage, or lower the target.")

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
        # The quality guard judges the cascade's answers, not each stage's share of the rows (a stage that
        # only sees the hard rows may give them all one label).
        count_answers(self.stats.answers, value)
        for stage in self._stages:
            if isinstance(getattr(stage, "stats", None), RunStats):
                stage.stats.answers.clear()
                stage.stats.answers_raw.clear()
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
