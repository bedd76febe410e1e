"""The prompt operator: Arrow columns in, one request per row through the runtime, struct{value, error, usage} out.

Example:
    >>> import asyncio, pyarrow as pa
    >>> from inferframe.providers.interface import MockProvider, Outcome
    >>> from inferframe.providers.spec import ProviderSpec
    >>> from inferframe.runtime.config import RuntimeConfig
    >>> from inferframe.series import Series
    >>> config = AICallConfig("chat", ProviderSpec("lm_studio"), "m", None, (), RuntimeConfig(cache_policy="off"), 1, "prompt[m]")
    >>> async def run():
    ...     op = PromptOperator(config, provider=MockProvider(lambda r: Outcome(value="yes")))
    ...     return await op(Series(pa.array(["q1", None])))
    >>> asyncio.run(run()).field("value").to_pylist()
    ['yes', None]
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from typing import Callable

import pyarrow as pa

from inferframe.ai.columns import ERROR_TYPE, USAGE_TYPE, result_type
from inferframe.ai.config import AICallConfig
from inferframe.ai.requests import TextRequests, build_body, build_request, column_kind
from inferframe.ai.operator import AIOperator
from inferframe.ai.run import RunServices
from inferframe.errors import ErrorKind, RowFailed
from inferframe.providers.interface import Request, Transport
from inferframe.runtime import Result, RowError
from inferframe.runtime.cache import KeyTemplate, cache_key


# The one message for an empty text input, whichever AI function got it.
EMPTY_INPUT = "the input is an empty text (''): there is nothing to send; give None for no answer"


class PromptOperator(AIOperator):
    """Turns batches of rows into one request each and the answers into struct{value, error, usage}."""

    def __init__(self, config: AICallConfig, services: RunServices | None = None, provider: Transport | None = None) -> None:
        super().__init__(config, services, provider)
        self.wire = config.provider.wire_format()  # builds every row's body: looked up once
        self.validator = None
        self._template: KeyTemplate | bool | None = None  # text rows' cache keys (False: not usable)
        self._bodies: TextRequests | bool | None = None  # text rows' bodies and prompts (False: not usable)
        self.value_type = pa.string()
        self._fields = None
        if config.return_format is not None:
            from inferframe.structured import Validator, arrow_type_for

            from inferframe.ai.quality import FieldGuard

            self.validator = Validator(config.return_format)
            self.value_type = arrow_type_for(config.return_format)
            # The quality guard's per-field counts (a field constant over the rows, numbers out of range).
            self._fields = FieldGuard.of(self.validator.spec, config.system_message)

    async def _read_files(self, cols: list[list], kinds: list[str]) -> None:
        from inferframe.media import fetch_many

        for j, kind in enumerate(kinds):
            if kind == "file":
                cols[j] = await fetch_many(cols[j], max_concurrency=32)

    async def __call__(self, *columns) -> pa.StructArray:
        await self.runtime.batch_turn()  # the earlier batch's rows go first: its requests leave sooner
        kinds = [column_kind(s.to_arrow().type) for s in columns]
        cols = [s.to_pylist() for s in columns]
        n = len(cols[0]) if cols else 0
        empty = self._empty_inputs(cols, kinds)
        if cols and not self.config.runtime.batch and all(k == "text" for k in kinds):
            keys = self._text_keys(cols)
            if keys is not None:
                return await self._text_rows(cols, kinds, keys, empty)
        names = [list(c) if k == "file" else None for c, k in zip(cols, kinds)]
        if "file" in kinds:
            await self._read_files(cols, kinds)
        # Encoding images is CPU work that releases the GIL: keep it off the event loop.
        needs_thread = any(k != "text" for k in kinds)
        build_all = functools.partial(self._requests, cols, kinds, names, n)
        requests, early = await asyncio.to_thread(build_all) if needs_thread else build_all()
        early.update(empty)
        if self.config.runtime.batch:
            results = await self.runtime.run_batch_api(requests)
        else:
            results = await self.runtime.run_many(requests)
        return await self._finish(results, early, requests.__getitem__)

    async def _text_rows(self, cols: list[list], kinds: list[str], keys: list,
                         empty: dict[int, RowError]) -> pa.StructArray:
        """Text rows: the cache answers by key (no body built); only the rows it misses become requests."""
        hits = self.runtime.cached_answers(keys)
        todo = [i for i, (k, h) in enumerate(zip(keys, hits)) if h is None and k is not None]
        if not todo and self.validator is None and not empty:
            return self._cached_columns(hits)
        results: list[Result | None] = [h and Result.cached(h) for h in hits]
        requests: dict[int, Request | None] = {}
        early: dict[int, RowError] = dict(empty)
        if todo:
            sub = [[c[i] for i in todo] for c in cols]
            built, failed = self._text_requests(sub), {}
            if built is None:
                built, failed = self._requests(sub, kinds, [None] * len(cols), len(todo))
            requests = dict(zip(todo, built))
            early.update({todo[j]: err for j, err in failed.items()})
            send = [i for i in todo if requests[i] is not None]
            for i, r in zip(send, await self.runtime.send_many([requests[i] for i in send], [keys[i] for i in send])):
                results[i] = r

        def request(i: int) -> Request | None:  # a cached row's request, built only if a repair needs it
            if i not in requests:
                requests[i] = build_request(self.config, [c[i] for c in cols], kinds, None, self.wire)
            return requests[i]

        return await self._finish(results, early, request)

    def _text_requests(self, cols: list[list]) -> list[Request] | None:
        """Requests of text rows (no null among them) from a template of the body; None where it does not apply.

        Checked against the body built the usual way for the first row of every batch, as the keys are.
        """
        if self._bodies is False or any(type(v) is not str for c in cols for v in c):
            return None
        if self._bodies is None:
            try:
                self._bodies = TextRequests(self.config, self.wire, KeyTemplate.SLOT)
            except (ValueError, TypeError):
                self._bodies = False
                return None
        texts = cols[0] if len(cols) == 1 else ["".join(vals) for vals in zip(*cols)]
        probe = build_request(self.config, [c[0] for c in cols], ["text"] * len(cols), None, self.wire)
        first = self._bodies.request(texts[0]) if probe is not None else None
        if first is None or first.body != probe.body or first.prompt != probe.prompt:
            self._bodies = False
            return None
        return [first] + [self._bodies.request(t) for t in texts[1:]]

    def _text_keys(self, cols: list[list]) -> list | None:
        """The cache keys of text rows from a template of the body, or None where it does not apply.

        The body of text rows holds their joined text once, verbatim; that is checked against
        the body built the usual way for one row of every batch, so a provider that shapes text
        otherwise keeps the usual path.
        """
        if len(cols) == 1:
            texts = [v if v is None or type(v) is str else str(v) for v in cols[0]]
        else:
            texts = [None if None in vals else "".join(map(str, vals)) for vals in zip(*cols)]
        if self._template is None:
            try:
                self._template = KeyTemplate(self.runtime.identity, self.config.endpoint,
                                             build_body(self.config, [KeyTemplate.SLOT], ["text"], None, self.wire),
                                             self.config.runtime.prompt_version)
            except (ValueError, TypeError):
                self._template = False
        if self._template is False:
            return None
        keys = self._template.keys(texts)
        first = next((i for i, k in enumerate(keys) if k is not None), None)
        if first is not None:
            probe = build_request(self.config, [c[first] for c in cols], ["text"] * len(cols), None, self.wire)
            if cache_key(self.runtime.identity, probe.endpoint, probe.body, self.config.runtime.prompt_version) != keys[first]:
                self._template = False
                return None
        return keys

    async def _finish(self, results: list[Result | None], early: dict[int, RowError],
                      request: Callable[[int], Request | None]) -> pa.StructArray:
        """Validate structured answers, count the rows that ended here, and build the columns."""
        if self.validator is not None:
            results = [await self._validated(functools.partial(request, i), r) if r is not None else None
                       for i, r in enumerate(results)]
            if self._fields is not None:
                self._fields.count(self.stats.fields, results)
        for i, r in enumerate(results):
            if r is None:
                if i in early:
                    self.stats.errors += 1
                self.stats.rows_done += 1
            elif r.error is None:
                self.stats.returned += 1
                if r.finish_reason == "length":
                    self.stats.truncated += 1  # a kept answer cut at max_tokens (structured ones became errors)
        return self._columns(results, early)

    def _cached_columns(self, hits: list[tuple | None]) -> pa.StructArray:
        """Every row answered by the cache (or null): no Result per row.

        The usage counts what this run paid (nothing); ``finish_reason`` is each answer's own, so a
        cut answer is counted and shown as cut again.
        """
        n = len(hits)
        nulls = hits.count(None)
        self.stats.rows_done += nulls  # null inputs end here; the runtime counted the hits
        reasons = [h[3] if h is not None else None for h in hits]
        self.stats.returned += n - nulls
        self.stats.truncated += reasons.count("length")
        zeros = pa.repeat(0, n).cast(pa.int64()) if n else pa.array([], pa.int64())
        usage = pa.StructArray.from_arrays(
            [zeros, zeros, pa.repeat(0.0, n).cast(pa.float64()) if n else pa.array([], pa.float64()),
             pa.array(reasons, pa.string()), zeros],
            fields=list(USAGE_TYPE), mask=pa.array([h is None for h in hits]) if nulls else None)
        value = pa.array([h[0] if h is not None else None for h in hits], self.value_type)
        return pa.StructArray.from_arrays([value, pa.nulls(n, ERROR_TYPE), usage],
                                          fields=list(result_type(self.value_type)))

    def _columns(self, results: list[Result | None], early: dict[int, RowError]) -> pa.StructArray:
        """struct{value, error, usage} built column by column (a cached rerun is all this per row)."""
        n = len(results)
        values, errors, absent = [None] * n, [None] * n, False
        ins, outs, costs, reasons, cached = [0] * n, [0] * n, [0.0] * n, [None] * n, [0] * n
        # One pass over the rows (a list per field made five: issue 36).
        for i, r in enumerate(results):
            if r is None:
                absent = True
                continue
            values[i] = r.value
            if r.error is not None:
                errors[i] = r.error.as_dict()
            u = r.usage
            ins[i], outs[i], costs[i], reasons[i], cached[i] = (u.input_tokens, u.output_tokens, r.cost,
                                                                 r.finish_reason, u.cached_tokens)
        for i, err in early.items():
            errors[i] = err.as_dict()
        mask = pa.array([r is None for r in results]) if absent else None
        usage = pa.StructArray.from_arrays(
            [pa.array(ins, pa.int64()), pa.array(outs, pa.int64()), pa.array(costs, pa.float64()),
             pa.array(reasons, pa.string()), pa.array(cached, pa.int64())], fields=list(USAGE_TYPE), mask=mask)
        error = pa.array(errors, ERROR_TYPE) if errors.count(None) != n else pa.nulls(n, ERROR_TYPE)
        value = pa.array(values, self.value_type)
        return pa.StructArray.from_arrays([value, error, usage], fields=list(result_type(self.value_type)))

    def _requests(self, cols: list[list], kinds: list[str], names: list, n: int):
        """One request per row (None for null inputs), and the rows that failed before sending."""
        requests: list[Request | None] = []
        early: dict[int, RowError] = {}
        for i in range(n):
            values = [c[i] for c in cols]
            bad = next((v for v in values if isinstance(v, BaseException)), None)
            if bad is not None:
                early[i] = self._input_error(bad)
                requests.append(None)
                continue
            try:
                requests.append(build_request(self.config, values, kinds, [n_[i] if n_ else None for n_ in names],
                                              self.wire))
            except (ValueError, TypeError) as e:  # MediaError is a ValueError: a bad image or file in this row
                early[i] = self._input_error(e)
                requests.append(None)
        return requests, early

    def _empty_inputs(self, cols: list[list], kinds: list[str]) -> dict[int, RowError]:
        """Rows with an empty text ('') among their inputs: an error of kind "input" each, never sent.

        The rule of every AI function: None in gives null out with no error and no request; ''
        gives this error (a model asked about nothing answers anything). Those rows become null
        inputs in ``cols``, so nothing is built, looked up or sent for them.
        """
        found: dict[int, RowError] = {}
        for col, kind in zip(cols, kinds):
            if kind == "text" and "" in col:
                for i, v in enumerate(col):
                    if v == "" and i not in found:
                        found[i] = self._input_error(EMPTY_INPUT)
        for i in found:
            for col in cols:
                col[i] = None
        return found

    def _input_error(self, e: BaseException | str) -> RowError:
        """A row whose input cannot be sent: its error (or, with on_error="raise", the end of the job)."""
        err = RowError(ErrorKind.INPUT, e if isinstance(e, str) else f"{type(e).__name__}: {e}", None, 0)
        if self.config.runtime.on_error == "raise":
            # Raised while the batch's requests are built: no row of it has been sent yet.
            self.stats.errors += 1
            self.stats.rows_done += 1
            raise RowFailed.of(err.as_dict())
        return err

    async def _validated(self, request: Callable[[], Request], result: Result) -> Result:
        """Check a structured answer; optionally ask once more with the validation error (``request()``: its request).

        A valid answer whose string ends in a loop (a phrase repeated to the length bound) fails too.
        """
        from inferframe.structured.repetition import looping_field, repetition_message

        cut = result.error is None and result.value is not None and result.finish_reason == "length"
        if self.config.repair and (cut or (result.error is not None and result.error.kind == ErrorKind.LENGTH)):
            # A structured answer cut off mid-way is repaired like an invalid one.
            raw = result.value if cut else result.error.raw or ""
            problem = "the answer was cut off before the JSON was complete"
        elif cut:
            return self._failed(result, RowError(ErrorKind.LENGTH, self._cut_message(result.value), None,
                                                 result.attempts, result.value))
        elif result.error is not None or result.value is None:
            return result
        else:
            value, problem = self.validator.validate(result.value)
            loop = looping_field(value) if problem is None else None
            if problem is None and loop is None:
                return dataclasses.replace(result, value=value)
            if loop is not None and not self.config.repair:
                return self._failed(result, RowError(ErrorKind.LENGTH, repetition_message(
                    loop[1], loop[0], llama_cpp=self._llama_cpp), None, result.attempts, result.value))
            if loop is not None:
                problem = f"field {loop[0]!r} repeats {loop[1]!r} over and over; write it once"
            raw = result.value
        if self.config.repair:
            retry = await self.runtime.run_one(self._repair_request(request(), raw, problem))
            if retry.error is None and retry.value is not None:
                value2, problem2 = self.validator.validate(retry.value)
                merged = dataclasses.replace(result, attempts=result.attempts + retry.attempts)
                merged.usage.input_tokens += retry.usage.input_tokens
                merged.usage.output_tokens += retry.usage.output_tokens
                merged.usage.cached_tokens += retry.usage.cached_tokens
                merged.cost += retry.cost
                if problem2 is None:
                    return dataclasses.replace(merged, value=value2)
                raw, problem, result = retry.value, problem2, merged
        return self._failed(result, RowError(ErrorKind.SCHEMA, f"The answer does not match the return format: {problem}",
                                             None, result.attempts, raw))

    @property
    def _llama_cpp(self) -> bool:
        """The answers come from a llama.cpp server (a grammar enforces the format; DRY sampling is there)."""
        return getattr(getattr(self.wire, "capabilities", None), "structured_outputs", None) == "grammar"

    def _cut_message(self, raw: str) -> str:
        """Why a structured answer was cut at max_tokens: a loop (more tokens will not help), else too few tokens."""
        from inferframe.structured.repetition import repeated_phrase, repetition_message, runaway_number

        # Digits that never repeat exactly ("1000000020000030...") are a loop too, inside a JSON number.
        phrase = repeated_phrase(raw or "", min_distinct=0) or runaway_number(raw or "")
        if phrase is not None:
            return repetition_message(phrase, llama_cpp=self._llama_cpp)
        return "The answer was cut off at max_tokens before the JSON was complete; raise max_tokens."

    def _failed(self, result: Result, err: RowError) -> Result:
        """A row whose answer cannot be used: an error (or, with on_error="raise", the end of the job)."""
        # An answer came from at least one request, even where this row did not pay for it (a cached
        # answer, or an identical row's): its result counts 0 attempts, its error must not.
        err.attempts = max(err.attempts, 1)
        self.stats.errors += 1
        if self.config.runtime.on_error == "raise":
            raise RowFailed.of(err.as_dict())
        return dataclasses.replace(result, value=None, error=err)

    def _repair_request(self, request: Request, raw: str, problem: str) -> Request:
        from inferframe.structured import repair_message

        body = self.wire.follow_up_body(request.endpoint, request.body, raw,
                                                                   repair_message(raw, problem))
        return Request(request.endpoint, body, request.est_tokens * 2, request.prompt, request.max_output_tokens)
