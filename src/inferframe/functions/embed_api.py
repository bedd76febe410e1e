"""Embeddings over OpenAI-compatible ``/v1/embeddings`` endpoints, through the same runtime as ``prompt()``.

Rows are packed many to a request, texts longer than the model takes are embedded in chunks and
averaged, and the vector size is known before the run.

Example:
    >>> from inferframe import col
    >>> from inferframe.functions.embed_api import api_embed_text
    >>> expr = api_embed_text(col("doc"), provider="openai", base_url="http://127.0.0.1:8000/v1",
    ...                       model="text-embedding-3-small")
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import dataclasses
from typing import Any, Awaitable, Callable

import numpy as np
import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.models.vectors import combine_chunks, to_vectors
from inferframe.expressions.expression import Expression
from inferframe.functions.ai import (
    _RUNTIME_OPTIONS, ERROR_TYPE, USAGE_TYPE, AICallConfig, AIClient, _ai_expression, _parts, build_body,
    cache_settings,
)
from inferframe.providers import base as providers
from inferframe.runtime import Request, RowError, RuntimeConfig
from inferframe.runtime.cache import cache_key, open_cache
from inferframe.runtime.retry import RetryPolicy
from inferframe.runtime.tokens import _encoder, count_text

# Output sizes of common embedding models, so the column type is exact before anything is sent.
# gemma-3-270m is the embedded local server's model: listed so that planning needs no server start.
EMBEDDING_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "gemma-3-270m": 640,
}

# The most tokens one input may have; longer texts are embedded in chunks.
MAX_INPUT_TOKENS = {
    "text-embedding-3-small": 8191,
    "text-embedding-3-large": 8191,
    "text-embedding-ada-002": 8191,
}
# llama.cpp embeds an input in one physical batch (--ubatch-size, 512 by default), BOS included;
# measured: 537 text tokens give HTTP 500 "input (538 tokens) is too large to process".
LOCAL_MAX_INPUT_TOKENS = 512

# OpenAI's limits on one /v1/embeddings request.
DEFAULT_MAX_BATCH_TOKENS = 300_000
DEFAULT_MAX_BATCH_INPUTS = 2048
# The local server embeds n_parallel inputs at a time on the CPU (measured 5-12 short inputs/s on a busy
# 2-core machine): small requests keep every request well inside the HTTP timeout.
LOCAL_MAX_BATCH_INPUTS = 8

# Exact chunking stays this many tokens under the limit: BOS/EOS the server adds, and a chunk's
# text may tokenize a token or two longer on its own than as a slice of the whole text.
_CHUNK_MARGIN = 8
# Without the model's tokenizer, tokens are estimated at 4 characters each, which runs low for code
# and most non-English text: estimated chunks aim at this share of the limit.
_ESTIMATE_SHARE = 0.75
# Tokenizer requests in flight at once: cheap for the server, but a batch of long texts must not
# open thousands of connections.
_TOKENIZE_CONCURRENCY = 16


@dataclasses.dataclass(frozen=True)
class EmbedCallConfig(AICallConfig):
    """An AI call config plus what embeddings need: the vector size and the packing limits."""

    size: int = 0
    max_input_tokens: int | None = None
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    max_batch_inputs: int = DEFAULT_MAX_BATCH_INPUTS


def api_embed_text(text: Any, *, provider: str | providers.ProviderSpec | None = None, model: str | None = None,
                   dimensions: int | None = None, **options: Any) -> Expression:
    """Embed every row's text through an OpenAI-compatible /v1/embeddings endpoint.

    The column is a fixed-size float32 vector whose size is known before the run: from the model
    table, ``dimensions=``, or else one probe request at plan time (embedding "probe"). It runs
    through the same runtime as ``prompt()``: rate limits, retries, errors as data, the response cache.

    Rows are packed into few requests (``input: [t1, t2, ...]``) up to ``max_batch_inputs`` inputs
    and ``max_batch_tokens`` estimated tokens each; the vectors come back in row order. The cache
    stays per text, keyed as if each row were sent alone, so a rerun grouped differently (or an
    older one-row-per-request run) is answered from it; identical texts are sent once per run. If a
    packed request is refused as bad (400), it is split in halves until the bad input stands alone;
    after other lasting failures every row in the request gets the error.

    A text over ``max_input_tokens`` is split into chunks of at most that many tokens; each chunk
    is embedded (and cached) on its own, and the row's vector is their mean weighted by token
    count, scaled to unit length (the OpenAI cookbook's way). Tokens are counted exactly with
    tiktoken for OpenAI models, with the server's tokenizer for the local model, else estimated.

    ``batch=True`` uses the OpenAI Batch API instead: one row (or chunk) per line, no packing.

    Parameters:
        text: the text column.
        provider: "openai", "local" (the embedded llama.cpp server) or another OpenAI-compatible provider.
        model: the embedding model (default "text-embedding-3-small"; "gemma-3-270m" for "local").
        dimensions: the vector size; asks the server to shorten the vectors.
        **options: max_batch_inputs (default 2048; 8 for "local"), max_batch_tokens (default 300,000),
            max_input_tokens (default: 8191 for OpenAI's models, 512 for "local", else no splitting);
            runtime options as for ``prompt()`` (max_concurrency, rpm, tpm, cache, batch, ...).

    Example:
        >>> from inferframe import col
        >>> expr = api_embed_text(col("doc"), provider="openai", base_url="http://127.0.0.1:8000/v1",
        ...                       model="text-embedding-3-small", max_batch_inputs=512)
    """
    from inferframe.providers.local import DEFAULT_MODEL as LOCAL_MODEL

    parts = _parts(text)
    spec = providers.resolve(provider or "openai", model=model, base_url=options.pop("base_url", None),
                             api_key=options.pop("api_key", None))
    providers.check_ready(spec)
    local = spec.name == "local"
    model = model or (LOCAL_MODEL if local else "text-embedding-3-small")
    limits = {k: _positive_int(k, options.pop(k)) for k in ("max_batch_inputs", "max_batch_tokens", "max_input_tokens")
              if k in options}
    if dimensions is not None:
        dimensions = _positive_int("dimensions", dimensions)
    runtime_opts = {k: options.pop(k) for k in list(options) if k in _RUNTIME_OPTIONS}
    if options:
        raise PlanError(f"embed_text() got unknown options {sorted(options)}.")
    if runtime_opts.get("batch") and not getattr(providers.REGISTRY.get(spec.name).factory, "supports_batch", True):
        raise PlanError(f"Provider {spec.name!r} has no Batch API; use batch=False.")
    if "timeout" in runtime_opts:  # seconds per request: a packed request may need more than one row did
        spec = dataclasses.replace(spec, options=tuple(sorted({**dict(spec.options), "timeout": runtime_opts["timeout"]}.items())))
    info = providers.REGISTRY.get(spec.name)
    runtime = RuntimeConfig(
        max_concurrency=int(runtime_opts.get("max_concurrency") or info.default_concurrency or 64),
        initial_concurrency=runtime_opts.get("initial_concurrency"), adaptive=runtime_opts.get("adaptive", True),
        rpm=runtime_opts.get("rpm"), tpm=runtime_opts.get("tpm"),
        retry=RetryPolicy(max_attempts=int(runtime_opts.get("max_retries", 5)) + 1),
        max_cost=runtime_opts.get("max_cost"), max_tokens_budget=runtime_opts.get("max_tokens_budget"),
        on_error=runtime_opts.get("on_error", "null"),
        **cache_settings(runtime_opts), batch=bool(runtime_opts.get("batch", False)),
        batch_poll_interval=float(runtime_opts.get("batch_poll_interval", 5.0)),
    )
    config = EmbedCallConfig(
        endpoint="embeddings", provider=spec, model=model, system_message=None,
        options=(("dimensions", dimensions),) if dimensions else (), runtime=runtime, n_parts=len(parts),
        label=f"embed[{model}]",
        max_input_tokens=limits.get("max_input_tokens", LOCAL_MAX_INPUT_TOKENS if local else MAX_INPUT_TOKENS.get(model)),
        max_batch_tokens=limits.get("max_batch_tokens", DEFAULT_MAX_BATCH_TOKENS),
        max_batch_inputs=limits.get("max_batch_inputs", LOCAL_MAX_BATCH_INPUTS if local else DEFAULT_MAX_BATCH_INPUTS),
    )
    size = dimensions or EMBEDDING_DIMENSIONS.get(model) or probe_dimensions(config)
    config = dataclasses.replace(config, size=size)
    if runtime.batch:
        rows_per_call = 50_000
    else:
        # Whole requests per call, and several of them, so calls in flight keep requests in flight.
        rows_per_call = config.max_batch_inputs * max(4, -(-128 // config.max_batch_inputs))
    return _ai_expression(config, parts, pa.list_(pa.float32(), size), error_column=runtime_opts.get("error_column", True),
                          usage_column=runtime_opts.get("usage_column", False), owner=EmbeddingClient,
                          name="embed_text", batch=rows_per_call)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"embed_text(): {name} must be a positive integer, got {value!r}.")
    return value


# (provider identity, cache key of the probe request) -> vector size; one probe per process
_PROBED: dict[tuple[str, str], int] = {}


def probe_dimensions(config: AICallConfig) -> int:
    """The vector size of ``config``'s model, from one request embedding "probe" (cached like any row).

    Raises PlanError naming the server and the fix (pass dimensions=N) when the request fails.

    Example:
        >>> # probe_dimensions(config)  -> 640 for the local gemma-3-270m
    """
    body = build_body(config, ["probe"])

    async def probe() -> tuple[Any, str]:
        provider = providers.build(config.provider)
        try:
            identity = getattr(provider, "cache_identity", provider.service)
            key = cache_key(identity, "embeddings", body, config.runtime.prompt_version)
            size = _PROBED.get((identity, key))
            if size is not None:
                return size, provider.service
            policy = config.runtime.cache_policy
            cache = None if policy == "off" else open_cache(config.runtime.cache_dir)
            hit = cache.get(key) if cache is not None and policy in ("read_write", "read_only") else None
            if hit is not None:
                outcome_value = hit[0]
            else:
                outcome = await provider.send(Request("embeddings", body, 0))
                if not outcome.ok:
                    return outcome.message, provider.service
                outcome_value = outcome.value
                if cache is not None and policy in ("read_write", "refresh"):
                    cache.put(key, [list(map(float, outcome_value[0]))], outcome.usage.input_tokens if outcome.usage else 0, 0)
            size = len(outcome_value[0])
            _PROBED[(identity, key)] = size
            return size, provider.service
        finally:
            await provider.aclose()

    what = f"embed_text() needs the vector size of {config.model!r} before the run"
    try:
        # Planning may happen inside a running event loop (notebooks): the probe gets a loop of its own.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer, service = pool.submit(asyncio.run, probe()).result()
    except Exception as e:  # the server could not be started or reached
        raise PlanError(f"{what}, and the probe request failed: {type(e).__name__}: {e}. "
                        "Pass dimensions=N (the model's vector size) to plan without it.") from e
    if isinstance(answer, str) or not answer:
        raise PlanError(f"{what}, and the probe request to {service} failed: {answer or 'an empty vector'}. "
                        "Check the model name, or pass dimensions=N (the model's vector size) to plan without it.")
    return answer


# --- long inputs -------------------------------------------------------------------------------


def split_pieces(pieces: list[bytes], limit: int) -> list[tuple[str, int]]:
    """Cut a text given as its tokens' bytes into (chunk text, token count) of at most ``limit`` tokens.

    A cut never falls inside a UTF-8 character (a token may hold part of one).

    Example:
        >>> split_pieces([b"the", b" cat", b" sat"], 2)
        [('the cat', 2), (' sat', 1)]
    """
    chunks, start = [], 0
    while start < len(pieces):
        end = min(start + max(1, limit), len(pieces))
        while start + 1 < end < len(pieces) and pieces[end][:1] and pieces[end][0] & 0xC0 == 0x80:
            end -= 1
        chunks.append((b"".join(pieces[start:end]).decode("utf-8", errors="replace"), end - start))
        start = end
    return chunks


def split_estimated(text: str, limit: int) -> list[tuple[str, int]]:
    """Cut ``text`` into (chunk text, estimated tokens) of at most ``limit`` tokens by the 4-characters rule.

    Example:
        >>> split_estimated("abcdefghij", 2)
        [('abcd', 2), ('efgh', 2), ('ij', 1)]
    """
    step = max(1, (limit - 1) * 4)  # count_text's rule: len // 4 + 1
    return [(text[i:i + step], count_text(text[i:i + step], None)) for i in range(0, len(text), step)]


class Chunker:
    """Splits texts over a model's input limit into chunks, counting tokens as exactly as it can.

    Parameters:
        model: the model name (picks tiktoken's encoding for OpenAI models).
        limit: the most tokens one input may have (None: never split).
        tokenize: an async function giving a text's tokens as bytes (the local server's tokenizer).

    Example:
        >>> import asyncio
        >>> chunks = asyncio.run(Chunker("my-model", 100).split("word " * 200))
        >>> [n for _, n in chunks]
        [75, 75, 75, 29]
    """

    def __init__(self, model: str | None, limit: int | None,
                 tokenize: Callable[[str], Awaitable[list[bytes]]] | None = None) -> None:
        self.model = model
        self.limit = limit
        self.tokenize = tokenize
        self._tokenizing: asyncio.Semaphore | None = None

    async def split(self, text: str) -> list[tuple[str, int]]:
        """(chunk text, token count) for ``text``: one chunk when it fits (count then 0: it weighs nothing)."""
        limit = self.limit
        if limit is None:
            return [(text, 0)]
        exact = limit - _CHUNK_MARGIN if limit > 2 * _CHUNK_MARGIN else limit
        # Every token holds at least one byte: a text with fewer bytes than the limit fits.
        short = len(text) <= exact and len(text.encode()) <= exact
        enc = _encoder(self.model) if self.model else None
        if enc is not None:
            if short:
                return [(text, 0)]
            ids = enc.encode(text, disallowed_special=())
            return [(text, 0)] if len(ids) <= exact else split_pieces(enc.decode_tokens_bytes(ids), exact)
        if self.tokenize is not None:
            if short:
                return [(text, 0)]
            if self._tokenizing is None:
                self._tokenizing = asyncio.Semaphore(_TOKENIZE_CONCURRENCY)
            try:
                async with self._tokenizing:
                    pieces = await self.tokenize(text)
            except Exception:  # noqa: BLE001 - the estimate below still splits the text
                pieces = None
            if pieces is not None and b"".join(pieces) == text.encode():
                return [(text, 0)] if len(pieces) <= exact else split_pieces(pieces, exact)
        target = max(1, int(limit * _ESTIMATE_SHARE))
        return [(text, 0)] if count_text(text, None) <= target else split_estimated(text, target)


# --- the run -----------------------------------------------------------------------------------


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


def vector_text(vector: np.ndarray) -> str:
    """A vector as base64 of little-endian float32, as /v1/embeddings sends it with encoding_format=base64."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def as_vector(value) -> np.ndarray:
    """A float32 vector from a list of numbers or from ``vector_text``'s base64."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


class EmbeddingClient(AIClient):
    """Turns batches of rows into packed /v1/embeddings requests and one vector per row."""

    def __init__(self, config: EmbedCallConfig) -> None:
        super().__init__(config)
        self.chunker = Chunker(config.model, config.max_input_tokens, getattr(self.provider, "tokenize", None))
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
                early[i] = RowError("input", f"{type(bad).__name__}: {bad}", None, 0)
                continue
            text = "".join(str(v) for v in values)
            if not text:
                # The API refuses the whole request for one empty input; it has no vector anyway.
                early[i] = RowError("input", "an empty text has no embedding", None, 0)
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
            if cache is not None and policy in ("read_write", "read_only"):
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

    async def _send_pack(self, pack: list[tuple[str, _Input]]) -> None:
        body = dict(self._pack_body)
        body["input"] = [inp.text for _, inp in pack]
        est = sum(inp.tokens for _, inp in pack)
        result = await self.runtime.send_uncached(Request("embeddings", body, est + 4))
        # The runtime counted the request as one row; rows are counted when they are assembled.
        self.stats.rows_done -= 1
        if result.error is not None and result.error.kind != "budget":
            self.stats.errors -= 1
        vectors = result.value
        error = result.error
        if error is None and (not isinstance(vectors, list) or len(vectors) != len(pack)):
            got = len(vectors) if isinstance(vectors, list) else 0
            error = RowError("malformed", f"the server sent {got} embeddings for {len(pack)} inputs", 200,
                             result.attempts)
        if error is not None and error.kind == "bad_request" and len(pack) > 1:
            # One bad input makes the server refuse the whole request: split it until the bad input
            # stands alone, so every other row still gets its vector (about 2*log2(n) more requests).
            mid = len(pack) // 2
            await asyncio.gather(self._send_pack(pack[:mid]), self._send_pack(pack[mid:]))
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
            if store and cache is not None and self.config.runtime.cache_policy in ("read_write", "refresh"):
                # Off the event loop: a pack's vectors are megabytes of JSON for SQLite to write.
                await asyncio.to_thread(cache.put_many, store)
        finally:
            for key, inp in pack:
                self._pending.pop(key).set_result((inp.vector, inp.error))
                if inp.error is None:  # a failed text may be tried again by a later row
                    self._recent[key] = (inp.vector, None)
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)

    async def _through_batch_api(self, inputs: dict[str, _Input]) -> None:
        """One line per input through the Batch API (no packing); the runtime caches and dedupes."""
        items = list(inputs.values())
        results = await self.runtime.run_batch_api([Request("embeddings", i.body, i.tokens + 4) for i in items])
        for inp, r in zip(items, results):
            # The runtime counted each input as a row; rows are counted when they are assembled.
            self.stats.rows_done -= 1
            inp.error, inp.paid, inp.input_tokens, inp.cost = r.error, r.attempts > 0, r.usage.input_tokens, r.cost
            if r.error is not None:
                self.stats.errors -= 1
            elif r.value:
                vector = as_vector(r.value[0])
                inp.error = self._wrong_size(vector, r.attempts)
                inp.vector = vector if inp.error is None else None

    def _wrong_size(self, vector: np.ndarray, attempts: int) -> RowError | None:
        if vector.ndim == 1 and len(vector) == self.config.size:
            return None
        return RowError("malformed", f"the embedding has {vector.size} dimensions, not {self.config.size}", 200, attempts)

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
            usage[i] = {"input_tokens": tokens, "output_tokens": 0, "cost": cost}
            failed = next((inputs[k].error for k, _ in row if inputs[k].error is not None), None)
            if failed is None and any(inputs[k].vector is None for k, _ in row):
                failed = RowError("malformed", "the server sent no embedding", 200, 0)
            if failed is not None:
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
