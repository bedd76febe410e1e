"""``prompt()``: ask a model about every row, as a column expression.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import prompt
    >>> df = ifr.from_pydict({"q": ["2+2?"]})
    >>> df = df.with_column("a", prompt(ifr.col("q"), model="gemma-3-270m", max_tokens=4))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import weakref
from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, lit, to_node
from inferframe.expressions.nodes import Alias, Call, UDFCall
from inferframe.expressions.udf import ERROR_TYPE, USAGE_TYPE, AISpec, ClassSpec  # noqa: F401 (re-exported)
from inferframe.functions.messages import MediaOptions, column_kind, content_parts, conversation
from inferframe.providers import base as providers
from inferframe.runtime import InferenceRuntime, Request, Result, RowError, RuntimeConfig
from inferframe.runtime.retry import RetryPolicy
from inferframe.runtime.stats import RunStats
from inferframe.runtime.tokens import estimate_request


# Options that shape the runtime or the message parts, not the request body.
_RUNTIME_OPTIONS = {"max_concurrency", "rpm", "tpm", "max_retries", "max_cost", "max_tokens_budget", "on_error",
                    "timeout", "adaptive", "initial_concurrency", "usage_column", "error_column", "repair",
                    "cache", "cache_dir", "prompt_version", "batch", "batch_poll_interval"}
_MEDIA_OPTIONS = {f.name for f in dataclasses.fields(MediaOptions)}


@dataclasses.dataclass(frozen=True)
class AICallConfig:
    """Everything one AI call needs at run time; pickles without secrets."""

    endpoint: str
    provider: providers.ProviderSpec
    model: str | None
    system_message: str | None
    options: tuple
    runtime: RuntimeConfig
    n_parts: int
    label: str
    media: MediaOptions = MediaOptions()
    return_format: Any = None  # a Pydantic model, JSON schema, Literal/Enum or choices; validated per row
    format_request: tuple = ()  # request fields that ask the server to enforce the schema
    repair: bool = False


def build_body(c: AICallConfig, values: list, kinds: list[str] | None = None, names: list | None = None) -> dict | None:
    """The JSON request body for one row (None when an input is null)."""
    if any(v is None for v in values):
        return None
    kinds = kinds or ["text"] * len(values)
    opts = dict(c.options)
    extra = opts.pop("extra_body", None) or {}
    if c.endpoint == "embeddings":
        body = {"model": c.model, "input": "".join(str(v) for v in values), "encoding_format": "float", **opts}
        _merge(body, extra)
        return body
    if kinds == ["messages"]:
        messages = conversation(values[0], c.endpoint)
    else:
        content = content_parts(values, kinds, names or [None] * len(values), c.endpoint, c.media)
        messages = [{"role": "user", "content": content}]
    if c.endpoint == "chat":
        if "max_output_tokens" in opts:
            opts["max_tokens"] = opts.pop("max_output_tokens")
        system = [{"role": "system", "content": c.system_message}] if c.system_message else []
        body = {"model": c.model, "messages": system + messages, **opts}
    else:
        if "max_tokens" in opts:
            opts["max_output_tokens"] = opts.pop("max_tokens")
        simple = len(messages) == 1 and isinstance(messages[0]["content"], str)
        body = {"model": c.model, "input": messages[0]["content"] if simple else messages, **opts}
        if c.system_message:
            body["instructions"] = c.system_message
    if c.model is None:
        body.pop("model")
    _merge(body, dict(c.format_request))
    _merge(body, extra)
    return body


def _merge(body: dict, extra: dict) -> None:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(body.get(k), dict):
            _merge(body[k], v)
        else:
            body[k] = v


# event loop (one per run) -> (endpoint identity, model) -> the limits every call there shares
_SHARED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class AIClient:
    """Built once per run on the shared event loop; turns batches of rows into requests and results."""

    def __init__(self, config: AICallConfig) -> None:
        from inferframe.runtime.stats import CURRENT_RUN

        self.config = config
        self.provider = providers.build(config.provider)
        self.stats = RunStats(label=config.label)
        CURRENT_RUN.add(self.stats)
        self.runtime = InferenceRuntime(self.provider, config.runtime, model=config.model, stats=self.stats)
        self._share_limits()
        self.validator = None
        if config.return_format is not None:
            from inferframe.structured import Validator

            self.validator = Validator(config.return_format)

    def _share_limits(self) -> None:
        """Calls to the same endpoint and model in one job share one rate limit, concurrency bound and breaker.

        The server's limits are per key and model, not per column; the first call's settings win.
        """
        loop = asyncio.get_running_loop()
        per_loop = _SHARED.setdefault(loop, {})
        key = (getattr(self.provider, "cache_identity", self.provider.service), self.config.model)
        shared = per_loop.get(key)
        if shared is None:
            per_loop[key] = (self.runtime.limiter, self.runtime.slots, self.runtime.breaker)
        else:
            self.runtime.limiter, self.runtime.slots, self.runtime.breaker = shared

    async def _read_files(self, cols: list[list], kinds: list[str]) -> None:
        from inferframe.media import fetch_many

        for j, kind in enumerate(kinds):
            if kind == "file":
                cols[j] = await fetch_many(cols[j], max_concurrency=32)

    async def __call__(self, *columns) -> list[dict]:
        kinds = [column_kind(s.to_arrow().type) for s in columns]
        cols = [s.to_pylist() for s in columns]
        names = [list(c) if k == "file" else None for c, k in zip(cols, kinds)]
        await self._read_files(cols, kinds)
        # Encoding images is CPU work that releases the GIL: keep it off the event loop.
        needs_thread = any(k != "text" for k in kinds)
        build = functools.partial(self._requests, cols, kinds, names, len(columns[0]) if columns else 0)
        requests, early = await asyncio.to_thread(build) if needs_thread else build()
        if self.config.runtime.batch:
            results = await self.runtime.run_batch_api(requests)
        else:
            results = await self.runtime.run_many(requests)
        if self.validator is not None:
            results = [await self._validated(req, r) if r is not None else None for req, r in zip(requests, results)]
        out = []
        for i, r in enumerate(results):
            if r is None:
                err = early.get(i)
                if err is not None:
                    self.stats.errors += 1
                self.stats.rows_done += 1
                out.append({"value": None, "error": err.as_dict() if err else None, "usage": None})
                continue
            out.append({
                "value": r.value,
                "error": r.error.as_dict() if r.error else None,
                "usage": {"input_tokens": r.usage.input_tokens, "output_tokens": r.usage.output_tokens, "cost": r.cost},
            })
        return out

    def _requests(self, cols: list[list], kinds: list[str], names: list, n: int):
        """One request per row (None for null inputs), and the rows that failed before sending."""
        requests: list[Request | None] = []
        early: dict[int, RowError] = {}
        for i in range(n):
            values = [c[i] for c in cols]
            bad = next((v for v in values if isinstance(v, BaseException)), None)
            if bad is not None:
                early[i] = RowError("input", f"{type(bad).__name__}: {bad}", None, 0)
                requests.append(None)
                continue
            try:
                body = build_body(self.config, values, kinds, [n_[i] if n_ else None for n_ in names])
            except (ValueError, TypeError) as e:  # MediaError is a ValueError: a bad image or file in this row
                early[i] = RowError("input", f"{type(e).__name__}: {e}", None, 0)
                requests.append(None)
                continue
            if body is None:
                requests.append(None)
                continue
            inp, out = estimate_request(body, self.config.model)
            requests.append(Request(self.config.endpoint, body, inp + out))
        return requests, early

    async def _validated(self, request: Request, result: Result) -> Result:
        """Check a structured answer; optionally ask once more with the validation error."""
        if result.error is not None and result.error.kind == "length" and self.config.repair:
            # A structured answer cut off mid-way is repaired like an invalid one.
            raw, problem = result.error.raw or "", "the answer was cut off before the JSON was complete"
        elif result.error is not None or result.value is None:
            return result
        else:
            value, problem = self.validator.validate(result.value)
            if problem is None:
                return dataclasses.replace(result, value=value)
            raw = result.value
        if self.config.repair:
            retry = await self.runtime.run_one(self._repair_request(request, raw, problem))
            if retry.error is None and retry.value is not None:
                value2, problem2 = self.validator.validate(retry.value)
                merged = dataclasses.replace(result, attempts=result.attempts + retry.attempts)
                merged.usage.input_tokens += retry.usage.input_tokens
                merged.usage.output_tokens += retry.usage.output_tokens
                merged.cost += retry.cost
                if problem2 is None:
                    return dataclasses.replace(merged, value=value2)
                raw, problem, result = retry.value, problem2, merged
        self.stats.errors += 1
        err = RowError("schema", f"The answer does not match the return format: {problem}", None, result.attempts, raw)
        return dataclasses.replace(result, value=None, error=err)

    def _repair_request(self, request: Request, raw: str, problem: str) -> Request:
        from inferframe.structured import repair_message

        body = dict(request.body)
        fix = repair_message(raw, problem)
        if request.endpoint == "chat":
            body["messages"] = [*body["messages"], {"role": "assistant", "content": raw}, {"role": "user", "content": fix}]
        else:
            first = body["input"]
            history = [{"role": "user", "content": first}] if isinstance(first, str) else list(first)
            body["input"] = [*history, {"role": "assistant", "content": raw}, {"role": "user", "content": fix}]
        return Request(request.endpoint, body, request.est_tokens * 2)

    async def aclose(self) -> None:
        await self.runtime.aclose()


def _parts(messages: Any) -> list:
    if isinstance(messages, (list, tuple)):
        if not messages:
            raise PlanError("prompt() got an empty list of messages.")
        return [to_node(m if isinstance(m, Expression) else lit(m)) for m in messages]
    if isinstance(messages, Expression):
        return [messages._node]
    if isinstance(messages, str):
        raise PlanError(f"prompt() takes a column, e.g. prompt(col({messages!r})) or prompt(lit('...')); got the string {messages!r}.")
    raise PlanError(f"prompt() takes a column or a list of expressions, got {type(messages).__name__}.")


def prompt(messages: Any, return_format: Any = None, *, system_message: str | None = None,
           provider: str | providers.ProviderSpec | None = None, model: str | None = None,
           use_chat_completions: bool | None = None, **options: Any) -> Expression:
    """Ask a model about every row; the column holds its answer (null when the row failed).

    Parameters:
        messages: a text column; or a list of expressions (text, image, binary and file columns)
            sent as one user message; or a column of [{role, content}] conversations.
        return_format: a Pydantic model, a JSON schema dict, a ``Literal[...]``/Enum, or a list of
            choices: the column becomes typed (a struct, or a dictionary-encoded string) and every
            answer is validated; answers that break it are errors of kind "schema".
        system_message: instructions sent with every row.
        provider: "local" (default with no key), "openai", "lm_studio", "vllm", or a plugin's name.
        model: the model name; the local provider serves "gemma-3-270m".
        use_chat_completions: use /chat/completions instead of /responses (local default: True).
        **options: request options passed through (temperature, max_tokens / max_output_tokens, seed,
            stop, reasoning, tools, extra_body, ...); runtime options: max_concurrency, rpm, tpm,
            max_retries, max_cost, max_tokens_budget, timeout, on_error ("null" or "raise"),
            cache ("read_write" default, "read_only", "refresh", "off"), cache_dir, prompt_version,
            error_column (add "<name>_error", default True), usage_column (add "<name>_usage"),
            repair (ask once more when an answer breaks return_format); batch=True (run through the
            OpenAI Batch API: half price, answers within 24 h; batch_poll_interval seconds); media options:
            max_image_size, image_format, image_detail, pdf_mode ("file" or "text").

    With ``df.with_column("label", prompt(...))`` a failed row gets a null label and its
    error in ``label_error``: struct{kind, message, status, attempts, raw}.

    Example:
        >>> from inferframe import col
        >>> expr = prompt(col("review"), system_message="Classify the sentiment.", model="gemma-3-270m")
    """
    parts = _parts(messages)
    spec = providers.resolve(provider, model=model, base_url=options.pop("base_url", None),
                             api_key=options.pop("api_key", None))
    providers.check_ready(spec)
    info = providers.REGISTRY.get(spec.name)
    model = model or info.default_model
    if model is None:
        raise PlanError(f"prompt() needs model=... for provider {spec.name!r}, e.g. model='gpt-5-mini'.")
    on_error = options.get("on_error", "null")
    if on_error not in ("null", "raise"):
        raise PlanError(f"on_error must be 'null' or 'raise', got {on_error!r}.")
    choices = options.pop("choices", None)
    if choices is not None:
        if return_format is not None:
            raise PlanError("Pass either return_format=... or choices=[...], not both.")
        return_format = list(choices)
    runtime_opts = {k: options.pop(k) for k in list(options) if k in _RUNTIME_OPTIONS}
    media = MediaOptions(**{k: options.pop(k) for k in list(options) if k in _MEDIA_OPTIONS})
    if "timeout" in runtime_opts:
        spec = dataclasses.replace(spec, options=tuple(sorted({**dict(spec.options), "timeout": runtime_opts["timeout"]}.items())))
    max_conc = int(runtime_opts.get("max_concurrency") or (getattr(info, "default_concurrency", None) or 64))
    if max_conc < 1:
        raise PlanError(f"max_concurrency must be at least 1, got {max_conc}.")
    runtime = RuntimeConfig(
        max_concurrency=max_conc,
        initial_concurrency=runtime_opts.get("initial_concurrency"),
        adaptive=runtime_opts.get("adaptive", True),
        rpm=runtime_opts.get("rpm"), tpm=runtime_opts.get("tpm"),
        retry=RetryPolicy(max_attempts=int(runtime_opts.get("max_retries", 5)) + 1),
        max_cost=runtime_opts.get("max_cost"), max_tokens_budget=runtime_opts.get("max_tokens_budget"),
        on_error=on_error, **cache_settings(runtime_opts),
        batch=bool(runtime_opts.get("batch", False)),
        batch_poll_interval=float(runtime_opts.get("batch_poll_interval", 5.0)),
    )
    if runtime.batch and not getattr(providers.REGISTRY.get(spec.name).factory, "supports_batch", True):
        raise PlanError(f"Provider {spec.name!r} has no Batch API; use batch=False.")
    if use_chat_completions is None:
        use_chat_completions = spec.name != "openai"
    endpoint = "chat" if use_chat_completions else "responses"
    value_type, format_request = pa.string(), ()
    if return_format is not None:
        from inferframe.structured import arrow_type_for, json_schema_for, response_format_for

        value_type = arrow_type_for(return_format)
        name, schema = json_schema_for(return_format)
        choices = _choices_of(schema)
        if spec.name == "local" and choices is not None:
            # llama.cpp's JSON grammar lets a base model pad with whitespace until max_tokens; a grammar
            # of the bare labels makes the first token start a label.
            format_request = (("grammar", "root ::= " + " | ".join(_gbnf_literal(c) for c in choices)),)
        else:
            server = "vllm" if spec.name == "vllm" or spec.option("server") == "vllm" else endpoint
            format_request = tuple(response_format_for(name, schema, server).items())
    config = AICallConfig(
        endpoint=endpoint, provider=spec, model=model, system_message=system_message,
        options=tuple(sorted(options.items())), runtime=runtime, n_parts=len(parts),
        label=f"prompt[{model}]", media=media, return_format=return_format, format_request=format_request,
        repair=bool(runtime_opts.get("repair", False)),
    )
    return _ai_expression(config, parts, value_type, error_column=runtime_opts.get("error_column", True),
                          usage_column=runtime_opts.get("usage_column", False),
                          batch=50_000 if runtime.batch else 128)


def cache_settings(opts: dict) -> dict:
    """Cache policy, directory and prompt version for one call: its options, else set_cache(), else the env."""
    from inferframe.runtime.cache import POLICIES, default_settings

    policy, directory = default_settings()
    policy = opts.get("cache", policy)
    if policy is True:
        policy = "read_write"
    if policy in (False, None):
        policy = "off"
    if policy not in POLICIES:
        raise PlanError(f"cache must be one of {', '.join(POLICIES)}, got {policy!r}.")
    directory = opts.get("cache_dir", directory)
    return {"cache_policy": policy, "cache_dir": str(directory) if directory is not None else None,
            "prompt_version": opts.get("prompt_version")}


def _choices_of(schema: dict) -> list[str] | None:
    """The labels of a choices format ({"label": enum}), else None."""
    props = schema.get("properties") or {}
    if list(props) == ["label"] and all(isinstance(c, str) for c in props["label"].get("enum") or [None]):
        return list(props["label"]["enum"])
    return None


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ai_expression(config: AICallConfig, parts: list, value_type: pa.DataType, *, error_column: bool,
                   usage_column: bool, owner: type = AIClient, name: str = "prompt", batch: int = 128) -> Expression:
    out_type = pa.struct([("value", value_type), ("error", ERROR_TYPE), ("usage", USAGE_TYPE)])
    window = max(2, -(-2 * config.runtime.max_concurrency // batch) + 1)
    spec = AISpec(
        name=name, fn=owner.__call__, return_dtype=out_type, is_batch=True, is_async=True,
        max_concurrency=window, batch_size=batch, owner=ClassSpec(owner, (config,), {}),
        layout=tuple(("expr", i) for i in range(len(parts))), error_column=error_column, usage_column=usage_column,
    )
    call = UDFCall(spec, tuple(parts))
    return Expression(Alias(Call("struct.get", (call,), (("field", "value"),)), parts[0].name()))


def ai_call_of(node) -> UDFCall | None:
    """If ``node`` reads the value of an AI call, return that call (used to add error/usage columns)."""
    while isinstance(node, Alias):
        node = node.child
    if isinstance(node, Call) and node.function == "struct.get" and dict(node.params).get("field") == "value":
        inner = node.args[0]
        if isinstance(inner, UDFCall) and isinstance(inner.udf, AISpec):
            return inner
    return None


def estimate_call(config: AICallConfig, rows: list[tuple]) -> dict:
    """Rows, input tokens, maximum output tokens and dollars for one AI call, before sending anything."""
    from inferframe.runtime.pricing import cost_of, price_of

    n = inp = out = 0
    for parts in rows:
        try:
            body = build_body(config, list(parts))
        except (ValueError, TypeError):
            continue
        if body is None:
            continue
        i, o = estimate_request(body, config.model)
        n, inp, out = n + 1, inp + i, out + o
    local = config.provider.name == "local"
    known = local or price_of(config.model) is not None
    return {
        "call": config.label, "provider": config.provider.name, "model": config.model, "rows": n,
        "input_tokens": inp, "max_output_tokens": out if out else None,
        "cost_usd": cost_of(config.model, inp, out, local=local) if known else None,
    }


def classify_text(text: Any, labels: list[str], *, system_message: str | None = None, **options: Any) -> Expression:
    """Put every row into exactly one of ``labels``; the column is a dictionary-encoded string.

    The labels are enforced by the server where it can (JSON schema / grammar) and checked on
    every answer; anything else is an error of kind "schema" for that row.

    Parameters:
        text: the text column to classify.
        labels: the allowed labels (at least two, distinct).
        system_message: instructions; by default a short instruction naming the labels.
        **options: everything ``prompt()`` takes (provider, model, temperature, max_concurrency, ...).

    Example:
        >>> from inferframe import col
        >>> expr = classify_text(col("review"), ["positive", "negative"], model="gemma-3-270m")
    """
    labels = list(labels)
    if len(labels) < 2 or len(set(labels)) != len(labels) or not all(isinstance(x, str) and x for x in labels):
        raise PlanError(f"classify_text() needs at least two distinct, non-empty string labels, got {labels!r}.")
    if system_message is None:
        system_message = ("Classify the text into exactly one of these labels: " + ", ".join(labels)
                          + ". Answer with the label only.")
    return prompt(text, return_format=labels, system_message=system_message, **options)
