"""The classify operator: a label per row by constrained generation or by label scoring, with a confidence.

Example:
    >>> import asyncio, pyarrow as pa
    >>> from inferframe.providers.interface import MockProvider, Outcome
    >>> from inferframe.providers.spec import ProviderSpec
    >>> from inferframe.runtime.config import RuntimeConfig
    >>> from inferframe.series import Series
    >>> config = ClassifyConfig("chat", ProviderSpec("lm_studio"), "m", None, (), RuntimeConfig(cache_policy="off"), 1,
    ...                         "classify_text[m]", return_format=["yes", "no"], labels=("yes", "no"))
    >>> async def run():
    ...     op = ClassifyOperator(config, provider=MockProvider(lambda r: Outcome(value="yes")))
    ...     return await op(Series(pa.array(["q1", None])))
    >>> out = asyncio.run(run())
    >>> out.field("value").to_pylist(), out.field("confidence").to_pylist()
    (['yes', None], [None, None])
"""

from __future__ import annotations

import asyncio
import dataclasses

import pyarrow as pa

from inferframe.ai.columns import result_type
from inferframe.ai.config import AICallConfig
from inferframe.ai.label_scoring import calibrate, content_free_prior, decide, label_probabilities
from inferframe.ai.prompt import PromptOperator
from inferframe.ai.requests import column_kind
from inferframe.errors import ErrorKind
from inferframe.providers.interface import Usage
from inferframe.runtime import Result, RowError


@dataclasses.dataclass(frozen=True)
class ClassifyConfig(AICallConfig):
    """An AI call config plus what classification needs.

    Parameters:
        labels: the labels, in the user's order.
        method: "generate" (constrained generation) or "score" (every label scored by log-probability).
        prefix / suffix: the constant text around each row in the user message (demonstrations first).
        content_free: inputs whose label probabilities calibrate the scores (empty: no calibration).
        content_free_prefix: the text before a content-free input, where it differs from ``prefix``
            (per-row demonstrations: the calibration uses a fixed balanced set instead).
        confidence: return a "confidence" field.
        batch_prior: calibrate on the rows themselves instead ("Batch Calibration", Zhou et al. 2024): the
            prior is the mean label probabilities of the rows scored so far in this run, this batch
            included, once at least ``BATCH_PRIOR_MIN`` rows are scored (before that: the content-free
            prior, if any).
    """

    labels: tuple = ()
    method: str = "generate"
    prefix: str = ""
    suffix: str = ""
    content_free: tuple = ("N/A", "", "[MASK]")
    content_free_prefix: str | None = None
    confidence: bool = True
    batch_prior: bool = False


# Rows a batch prior needs: fewer say more about the rows than about the model's leaning.
BATCH_PRIOR_MIN = 16


class ClassifyOperator(PromptOperator):
    """A label per row, and with ``config.confidence`` the label's calibrated probability.

    Generation gives no probability: its confidence is null. Label scoring sends, per row, the
    requests of the provider's scorer (``Provider.label_scorer``) through the runtime (cache,
    retries, limits, prefix order: a row's label requests share its whole prompt), and once per
    call the same for the content-free inputs that calibrate it.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._scorer = None
        self._prior: list[float] | None = None
        self._lock = asyncio.Lock()
        self._batch_sum: list[float] | None = None  # batch_prior: summed label probabilities of the rows so far
        self._batch_rows = 0

    async def __call__(self, *columns) -> pa.StructArray:
        if self.config.method == "score":
            return await self._scored(columns)
        out = await super().__call__(*columns)
        count_answers(self.stats.answers, out.field("value").to_pylist())
        if not self.config.confidence:
            return out
        return with_confidence(out, [None] * len(out))

    def _prompt(self, text: str) -> str:
        return self.config.prefix + text + self.config.suffix

    async def _score(self, prompts: list[str]) -> list[tuple[Result, list[float] | None]]:
        """Each prompt's label probabilities (uncalibrated; None where it failed) and its Result for the columns."""
        c = self.config
        per = [self._scorer.requests(c.model, c.system_message, p) for p in prompts]
        flat = [r for reqs in per for r in reqs]
        results = await self.runtime.run_many(flat)
        out, at = [], 0
        for reqs in per:
            mine, at = results[at:at + len(reqs)], at + len(reqs)
            usage = Usage(sum(r.usage.input_tokens for r in mine), sum(r.usage.output_tokens for r in mine),
                          sum(r.usage.cached_tokens for r in mine))
            cost, attempts = sum(r.cost for r in mine), max(r.attempts for r in mine)
            failed = next((r.error for r in mine if r.error is not None), None)
            probs = None
            if failed is None:
                try:
                    probs = label_probabilities(self._scorer.label_logprobs([r.value for r in mine]))
                except (ValueError, TypeError, IndexError, KeyError) as e:
                    failed = RowError(ErrorKind.MALFORMED, f"The label scores cannot be read: {e}", 200, attempts,
                                      str([r.value for r in mine])[:2000])
            out.append((Result(error=failed, usage=usage, cost=cost, attempts=attempts), probs))
        # The runtime counted every label's request as a row: count rows instead.
        self.stats.rows_done -= len(flat) - len(per)
        self.stats.errors -= sum(r.error is not None for r in results) - sum(res.error is not None for res, _ in out)
        return out

    async def _calibration(self) -> tuple[list[float] | None, RowError | None]:
        """The content-free label probabilities, scored once per call (a rerun reads them from the cache)."""
        async with self._lock:
            if self._scorer is None:
                self._scorer = await self.provider.label_scorer(self.config.labels)
            if self._prior is not None or not self.config.content_free:
                return self._prior, None
            c = self.config
            before = c.prefix if c.content_free_prefix is None else c.content_free_prefix
            scored = await self._score([before + t + c.suffix for t in c.content_free])
            self.stats.rows_done -= len(scored)  # not rows of the user's data
            failed = next((res.error for res, _ in scored if res.error is not None), None)
            if failed is not None:
                self.stats.errors -= sum(res.error is not None for res, _ in scored)
                return None, RowError(failed.kind, "Calibrating on content-free inputs failed: " + failed.message,
                                      failed.status, failed.attempts, failed.raw)
            self._prior = content_free_prior([p for _, p in scored])
            return self._prior, None

    def _batch(self, prior: list[float] | None, probs: list[list[float]]) -> list[float] | None:
        """The batch prior: the mean label probabilities of every row scored so far (``prior`` until there are enough)."""
        for p in probs:
            self._batch_sum = list(p) if self._batch_sum is None else [a + b for a, b in zip(self._batch_sum, p)]
        self._batch_rows += len(probs)
        if self._batch_rows < BATCH_PRIOR_MIN:
            return prior
        return [x / self._batch_rows for x in self._batch_sum]

    async def _scored(self, columns) -> pa.StructArray:
        cols = [s.to_pylist() for s in columns]
        n = len(cols[0]) if cols else 0
        empty = self._empty_inputs(cols, [column_kind(s.to_arrow().type) for s in columns])
        self.stats.errors += len(empty)
        texts = [None if any(v is None for v in vals) else "".join(map(str, vals)) for vals in zip(*cols)]
        rows = [i for i, t in enumerate(texts) if t is not None]
        prior, failed = await self._calibration()
        results: list[Result | None] = [None] * n
        confidence: list[float | None] = [None] * n
        if failed is not None:
            for i in rows:
                results[i] = Result(error=failed)
            self.stats.errors += len(rows)
        else:
            labels = self.config.labels
            scored = await self._score([self._prompt(texts[i]) for i in rows])
            if self.config.batch_prior:
                prior = self._batch(prior, [p for _, p in scored if p is not None])
            for i, (res, probs) in zip(rows, scored):
                if probs is not None:
                    res.value, confidence[i] = decide(labels, calibrate(probs, prior))
                    if prior is not None:  # what the model said before calibration: the guard shows both
                        raw = decide(labels, probs)[0]
                        self.stats.answers_raw[raw] = self.stats.answers_raw.get(raw, 0) + 1
                results[i] = res
            count_answers(self.stats.answers, [None if r is None else r.value for r in results])
        self.stats.rows_done += n - len(rows) + (len(rows) if failed is not None else 0)
        out = self._columns(results, empty)
        return with_confidence(out, confidence) if self.config.confidence else out


def count_answers(counts: dict, values: list) -> None:
    """Add each non-null answer to ``counts`` (label -> rows): what the quality guard reads at the end of the job.

    Example:
        >>> c = {}; count_answers(c, ["yes", None, "yes", "no"]); c
        {'yes': 2, 'no': 1}
    """
    for v in values:
        if v is not None:
            counts[str(v)] = counts.get(str(v), 0) + 1


def with_confidence(out: pa.StructArray, confidence: list) -> pa.StructArray:
    """``out`` (struct{value, error, usage}) with a "confidence" field added.

    Parameters:
        out: an operator's result.
        confidence: one float or None per row.

    Example:
        >>> s = pa.array([{"value": "a", "error": None, "usage": None}], result_type(pa.string()))
        >>> with_confidence(s, [0.75]).field("confidence").to_pylist()
        [0.75]
    """
    fields = [out.field(i) for i in range(out.type.num_fields)] + [pa.array(confidence, pa.float64())]
    value_type = out.type.field("value").type
    return pa.StructArray.from_arrays(fields, fields=list(result_type(value_type, confidence=True)),
                                      mask=None if out.null_count == 0 else out.is_null())
