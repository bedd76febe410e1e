"""The embedding operator: rows packed into few ``/embeddings`` requests, through the same runtime as prompts.

Rows are packed many to a request; the cache stays per text, keyed as if each row were sent alone,
so a rerun grouped differently still hits it; identical texts are sent once. Texts longer than
the model takes are embedded in chunks and combined by token-weighted mean. A packed request the
server refuses as bad is split in halves until the bad input stands alone.

Example:
    >>> as_vector(vector_text(np.array([1.0, 2.0], dtype=np.float32))).tolist()
    [1.0, 2.0]
"""

from __future__ import annotations

import asyncio
import base64
import collections
import dataclasses

import numpy as np
import pyarrow as pa

from inferframe.ai.chunking import Chunker
from inferframe.ai.columns import ERROR_TYPE, USAGE_TYPE
from inferframe.ai.config import EmbedCallConfig
from inferframe.ai.operator import AIOperator
from inferframe.ai.requests import build_body
from inferframe.ai.run import RunServices
from inferframe.errors import ErrorKind, RowFailed
from inferframe.ai.vectors import combine_chunks, to_vectors
from inferframe.providers.interface import Request, Transport
from inferframe.providers.tokens import count_text
from inferframe.runtime import RowError
from inferframe.runtime.cache import cache_key


@dataclasses.dataclass
class _Input:
    """One distinct text (a row or a chunk of one) to embed, and what became of it."""

    text: str
    body: dict  # the request had it been sent alone: its cache key is this body's
    tokens: int  # estimate, for packing and the rate limiter
    vector: np.ndarray | None = None
    error: RowError | None = None
    input_tokens: int = 0  # this run's share of what the server counted
    cost: float = 0.0
    paid: bool = False  # sent by this call (not a cache hit or another call's request)


_RECENT = 2048  # answers kept in memory per call for in-run dedupe across batches
EMPTY_TEXT = "an empty text has no embedding"


def vector_text(vector: np.ndarray) -> str:
    """A vector as base64 of little-endian float32, as /v1/embeddings sends it with encoding_format=base64."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def as_vector(value) -> np.ndarray:
    """A float32 vector from a list of numbers or from ``vector_text``'s base64."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


class EmbeddingOperator(AIOperator):
    """Turns batches of rows into packed embedding requests and one vector per row.

    Parameters:
        config: the call, with its vector size and packing limits.
        services: the run's coordinator and counters (None: local ones).
        provider: a live provider to use instead of building one (tests).
    """

    def __init__(self, config: EmbedCallConfig, services: RunServices | None = None, provider: Transport | None = None) -> None:
        super().__init__(config, services, provider)
        tokenize = self.provider.tokenize if self.provider.capabilities.tokenizer else None
        self.chunker = Chunker(config.model, config.max_input_tokens, tokenize)
        # cache key -> the answer of a request in flight, shared with concurrent calls asking for it
        self._pending: dict[str, asyncio.Future] = {}
        # cache key -> (vector, error) of recent answers: rows repeating a text a batch later are not sent
        # again even with the cache off; bounded (~12 MB of 1,536-d vectors) so a huge run stays flat.
        self._recent: collections.OrderedDict = collections.OrderedDict()
        pack = build_body(config, ["x"])
        pack["encoding_format"] = "base64"  # a quarter of the JSON, and decoded straight to float32
        self._pack_body = pack

    async def __call__(self, *columns) -> pa.Array:
        c = self.config
        cols = [s.to_pylist() for s in columns]
        n = len(cols[0]) if cols else 0
        inputs: dict[str, _Input] = {}
        rows: list[list[tuple[str, int]] | None] = [None] * n
        early: dict[int, RowError] = {}
        texts: dict[int, str] = {}
        for i in range(n):
            values = [col[i] for col in cols]
            if any(v is None for v in values):
                continue
            bad = next((v for v in values if isinstance(v, BaseException)), None)
            if bad is not None:
                early[i] = self._failed(RowError(ErrorKind.INPUT, f"{type(bad).__name__}: {bad}", None, 0))
                continue
            text = "".join(str(v) for v in values)
            if not text or "" in values:  # one rule for every AI function: an empty text is an input error
                # The API refuses the whole request for one empty input; it has no vector anyway.
                early[i] = self._failed(RowError(ErrorKind.INPUT, EMPTY_TEXT, None, 0))
                continue
            texts[i] = text
        # Together: a long text may wait on the server's tokenizer.
        splits = await asyncio.gather(*(self.chunker.split(t) for t in texts.values()))
        for i, chunks in zip(texts, splits):
            row = []
            for chunk, weight in chunks:
                body = build_body(c, [chunk])
                key = cache_key(self.runtime.identity, "embeddings", body, c.runtime.prompt_version)
                if key in inputs:
                    self.stats.deduped += 1
                else:
                    inputs[key] = _Input(chunk, body, count_text(chunk, c.model))
                row.append((key, weight))
            rows[i] = row
        if c.runtime.batch:
            await self._through_batch_api(inputs)
        else:
            await self._packed(inputs)
        return self._assemble(rows, early, inputs)

    # -- sending --------------------------------------------------------------------------------

    async def _packed(self, inputs: dict[str, _Input]) -> None:
        """Answer every input from the cache, another call's request, or packed requests of our own."""
        policy, cache = self.config.runtime.cache_policy, self.runtime.cache
        todo: list[tuple[str, _Input]] = []
        shared: list[tuple[_Input, asyncio.Future]] = []
        loop = asyncio.get_running_loop()
        for key, inp in inputs.items():
            if cache is not None and policy.reads:
                hit = cache.get(key)
                if hit is not None:
                    inp.vector = as_vector(hit[0][0])
                    self.stats.cache_hits += 1
                    continue
            recent = self._recent.get(key)
            if recent is not None:
                self._recent.move_to_end(key)
                inp.vector, inp.error = recent
                self.stats.deduped += 1
                continue
            future = self._pending.get(key)
            if future is not None:
                shared.append((inp, future))
                continue
            self._pending[key] = loop.create_future()
            todo.append((key, inp))
        tasks = [asyncio.ensure_future(self._send_pack(p)) for p in self._packs(todo)]
        try:
            await asyncio.gather(*tasks)
        except BaseException as e:
            for t in tasks:
                t.cancel()
            for key, _ in todo:
                future = self._pending.pop(key, None)
                if future is not None and not future.done():
                    future.set_exception(e)
                    future.exception()  # mark retrieved: sharers get it, nobody else must see a warning
            raise
        for inp, future in shared:
            self.stats.deduped += 1
            inp.vector, inp.error = await asyncio.shield(future)

    def _packs(self, todo: list[tuple[str, _Input]]) -> list[list[tuple[str, _Input]]]:
        """Group inputs in order into requests within the input and token budgets."""
        c = self.config
        budget = c.max_batch_tokens
        tpm = self.runtime.limiter.tokens.rate
        if tpm:  # a request over the per-minute budget is refused outright (OpenAI: "Request too large")
            budget = max(1, min(budget, int(tpm)))
        packs, current, tokens = [], [], 0
        for item in todo:
            if current and (len(current) >= c.max_batch_inputs or tokens + item[1].tokens > budget):
                packs.append(current)
                current, tokens = [], 0
            current.append(item)
            tokens += item[1].tokens
        if current:
            packs.append(current)
        return packs

    async def _send_pack(self, pack: list[tuple[str, _Input]], part_of_refused: bool = False) -> None:
        body = dict(self._pack_body)
        body["input"] = [inp.text for _, inp in pack]
        est = sum(inp.tokens for _, inp in pack)
        result = await self.runtime.send_uncached(Request("embeddings", body, est + 4, part_of_refused=part_of_refused))
        vectors = result.value
        error = result.error
        if error is None and (not isinstance(vectors, list) or len(vectors) != len(pack)):
            got = len(vectors) if isinstance(vectors, list) else 0
            error = RowError(ErrorKind.MALFORMED, f"the server sent {got} embeddings for {len(pack)} inputs", 200,
                             result.attempts)
        if error is not None and error.kind == ErrorKind.BAD_REQUEST and len(pack) > 1:
            # One bad input makes the server refuse the whole request: split it until the bad input
            # stands alone, so every other row still gets its vector (about 2*log2(n) more requests).
            mid = len(pack) // 2
            await asyncio.gather(self._send_pack(pack[:mid], True), self._send_pack(pack[mid:], True))
            return
        shares = _shares(result.usage.input_tokens, [inp.tokens for _, inp in pack])
        store = []
        for j, (key, inp) in enumerate(pack):
            inp.error, inp.paid, inp.input_tokens = error, True, shares[j]
            inp.cost = result.cost * inp.tokens / est if est else 0.0
            if error is None:
                vector = np.asarray(vectors[j], dtype=np.float32)
                inp.error = self._wrong_size(vector, result.attempts)
                if inp.error is None:
                    inp.vector = vector
                    # The layout of a one-input answer, so one-row-per-request runs read it too, with the
                    # vector as base64 float32 (the API's own encoding): a quarter of the bytes of JSON
                    # floats, and the cache write was most of a packed run's time.
                    store.append((key, [vector_text(vector)], shares[j], 0))
        cache = self.runtime.cache
        try:
            if store and cache is not None and self.config.runtime.cache_policy.writes:
                # Off the event loop: a pack's vectors are megabytes of JSON for SQLite to write.
                await asyncio.to_thread(cache.put_many, store)
        finally:
            for key, inp in pack:
                self._pending.pop(key).set_result((inp.vector, inp.error))
                if inp.error is None:  # a failed text may be tried again by a later row
                    self._recent[key] = (inp.vector, None)
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
        # After the pack's answers are shared and its good vectors stored: they are paid for.
        for _, inp in pack:
            if inp.error is not None:
                self._failed(inp.error)

    async def _through_batch_api(self, inputs: dict[str, _Input]) -> None:
        """One line per input through the Batch API (no packing); the runtime caches and dedupes."""
        items = list(inputs.values())
        results = await self.runtime.run_batch_api([Request("embeddings", i.body, i.tokens + 4) for i in items], rows=False)
        for inp, r in zip(items, results):
            inp.error, inp.paid, inp.input_tokens, inp.cost = r.error, r.attempts > 0, r.usage.input_tokens, r.cost
            if r.error is None and r.value:
                vector = as_vector(r.value[0])
                inp.error = self._wrong_size(vector, r.attempts)
                inp.vector = vector if inp.error is None else None
            if inp.error is not None:
                self._failed(inp.error)

    def _wrong_size(self, vector: np.ndarray, attempts: int) -> RowError | None:
        if vector.ndim == 1 and len(vector) == self.config.size:
            return None
        return RowError(ErrorKind.MALFORMED, f"the embedding has {vector.size} dimensions, not {self.config.size}", 200, attempts)

    def _failed(self, err: RowError) -> RowError:
        """A row's error (or, with on_error="raise", the end of the job with it).

        The runtime raises for the answers it judges (HTTP, malformed bodies); these are the
        failures found here: bad inputs before sending, wrong-size or missing vectors after. A
        row not run for the budget is no failure: it runs on the next start.
        """
        if self.config.runtime.on_error == "raise" and err.kind != ErrorKind.BUDGET:
            self.stats.errors += 1
            raise RowFailed.of(err.as_dict())
        return err

    # -- rows -----------------------------------------------------------------------------------

    def _assemble(self, rows: list, early: dict[int, RowError], inputs: dict[str, _Input]) -> pa.Array:
        """One struct{value, error, usage} per row; a row's usage is what this call paid for its inputs."""
        size = self.config.size
        n = len(rows)
        values = np.zeros((n, size), dtype=np.float32)
        valid = np.zeros(n, dtype=bool)
        errors: list[dict | None] = [None] * n
        usage: list[dict | None] = [None] * n
        charged: set[str] = set()
        for i, row in enumerate(rows):
            self.stats.rows_done += 1
            if row is None:
                if i in early:
                    self.stats.errors += 1
                    errors[i] = early[i].as_dict()
                continue
            tokens, cost = 0, 0.0
            for key, _ in row:
                inp = inputs[key]
                if inp.paid and key not in charged:
                    charged.add(key)
                    tokens, cost = tokens + inp.input_tokens, cost + inp.cost
            usage[i] = {"input_tokens": tokens, "output_tokens": 0, "cost": cost, "cached_tokens": 0}  # no prompt cache
            failed = next((inputs[k].error for k, _ in row if inputs[k].error is not None), None)
            if failed is None and any(inputs[k].vector is None for k, _ in row):
                failed = RowError(ErrorKind.MALFORMED, "the server sent no embedding", 200, 0)
            if failed is not None:
                self._failed(failed)  # not raised yet: a text another call sent, or no vector at all
                if failed.kind == ErrorKind.BUDGET:
                    self.stats.not_run += 1
                else:
                    self.stats.errors += 1
                errors[i] = failed.as_dict()
                continue
            if len(row) == 1:
                values[i] = inputs[row[0][0]].vector
            else:
                values[i] = combine_chunks(np.stack([inputs[k].vector for k, _ in row]), [0] * len(row),
                                           [w for _, w in row], 1, True)[0]
            valid[i] = True
        vectors = to_vectors(values, ~valid, size)
        return pa.StructArray.from_arrays(
            [vectors, pa.array(errors, type=ERROR_TYPE), pa.array(usage, type=USAGE_TYPE)],
            fields=[pa.field("value", vectors.type), pa.field("error", ERROR_TYPE), pa.field("usage", USAGE_TYPE)])


def _shares(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` in proportion to ``weights``; the parts add up to ``total``."""
    whole = sum(weights)
    if not whole:
        return [0] * len(weights)
    parts = [total * w // whole for w in weights]
    for j in sorted(range(len(weights)), key=lambda j: -(total * weights[j] % whole))[: total - sum(parts)]:
        parts[j] += 1
    return parts
