"""``prompt()``: ask a model about every row, as a column expression.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import prompt
    >>> df = ifr.from_pydict({"q": ["2+2?"]})
    >>> df = df.with_column("a", prompt(ifr.col("q"), model="gemma-3-270m", max_tokens=4))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, lit, to_node
from inferframe.expressions.nodes import Alias, Call, UDFCall
from inferframe.expressions.udf import ClassSpec, UDFSpec
from inferframe.providers import base as providers
from inferframe.runtime import InferenceRuntime, Request, RuntimeConfig
from inferframe.runtime.retry import RetryPolicy
from inferframe.runtime.stats import RunStats
from inferframe.runtime.tokens import estimate_request

ERROR_TYPE = pa.struct([("kind", pa.string()), ("message", pa.string()), ("status", pa.int64()), ("attempts", pa.int64())])
USAGE_TYPE = pa.struct([("input_tokens", pa.int64()), ("output_tokens", pa.int64()), ("cost", pa.float64())])

# Request options that belong to the runtime, not the request body.
_RUNTIME_OPTIONS = {"max_concurrency", "rpm", "tpm", "max_retries", "max_cost", "max_tokens_budget", "on_error",
                    "timeout", "adaptive", "initial_concurrency", "usage_column", "error_column"}


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


def build_body(c: AICallConfig, parts: list) -> dict | None:
    """The JSON request body for one row (None when an input is null)."""
    if any(p is None for p in parts):
        return None
    text = "".join(str(p) for p in parts)
    opts = dict(c.options)
    extra = opts.pop("extra_body", None) or {}
    if c.endpoint == "chat":
        if "max_output_tokens" in opts:
            opts["max_tokens"] = opts.pop("max_output_tokens")
        messages = ([{"role": "system", "content": c.system_message}] if c.system_message else [])
        messages.append({"role": "user", "content": text})
        body = {"model": c.model, "messages": messages, **opts}
    else:
        if "max_tokens" in opts:
            opts["max_output_tokens"] = opts.pop("max_tokens")
        body = {"model": c.model, "input": text, **opts}
        if c.system_message:
            body["instructions"] = c.system_message
    if c.model is None:
        body.pop("model")
    body.update(extra)
    return body


class AIClient:
    """Built once per run on the shared event loop; turns batches of rows into requests and results."""

    def __init__(self, config: AICallConfig) -> None:
        from inferframe.runtime.stats import CURRENT_RUN

        self.config = config
        self.provider = providers.build(config.provider)
        self.stats = RunStats(label=config.label)
        CURRENT_RUN.add(self.stats)
        self.runtime = InferenceRuntime(self.provider, config.runtime, model=config.model, stats=self.stats)

    async def __call__(self, *columns) -> list[dict]:
        rows = list(zip(*[s.to_pylist() for s in columns]))
        requests = []
        for parts in rows:
            body = build_body(self.config, list(parts))
            if body is None:
                requests.append(None)
                continue
            inp, out = estimate_request(body, self.config.model)
            requests.append(Request(self.config.endpoint, body, inp + out))
        results = await self.runtime.run_many(requests)
        out = []
        for r in results:
            if r is None:
                self.stats.rows_done += 1
                out.append({"value": None, "error": None, "usage": None})
                continue
            out.append({
                "value": r.value,
                "error": r.error.as_dict() if r.error else None,
                "usage": {"input_tokens": r.usage.input_tokens, "output_tokens": r.usage.output_tokens, "cost": r.cost},
            })
        return out

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
        messages: a text column, or a list of expressions whose texts are joined into one user message.
        return_format: reserved for structured outputs (a Pydantic model); not supported yet.
        system_message: instructions sent with every row.
        provider: "local" (default with no key), "openai", "lm_studio", or a plugin's name.
        model: the model name; the local provider serves "gemma-3-270m".
        use_chat_completions: use /chat/completions instead of /responses (local default: True).
        **options: request options passed through (temperature, max_tokens / max_output_tokens, seed,
            stop, reasoning, tools, extra_body, ...) and runtime options: max_concurrency, rpm, tpm,
            max_retries, max_cost, max_tokens_budget, timeout, on_error ("null" or "raise"),
            error_column (add "<name>_error", default True), usage_column (add "<name>_usage").

    With ``df.with_column("label", prompt(...))`` a failed row gets a null label and its
    error in ``label_error``: struct{kind, message, status, attempts}.

    Example:
        >>> from inferframe import col
        >>> expr = prompt(col("review"), system_message="Classify the sentiment.", model="gemma-3-270m")
    """
    if return_format is not None:
        raise PlanError("prompt(return_format=...) is not supported yet; parse the text answer, or use "
                        "extra_body={'response_format': {...}} to constrain the server's output.")
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
    runtime_opts = {k: options.pop(k) for k in list(options) if k in _RUNTIME_OPTIONS}
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
        on_error=on_error,
    )
    if use_chat_completions is None:
        use_chat_completions = spec.name != "openai"
    config = AICallConfig(
        endpoint="chat" if use_chat_completions else "responses", provider=spec, model=model,
        system_message=system_message, options=tuple(sorted(options.items())), runtime=runtime,
        n_parts=len(parts), label=f"prompt[{model}]",
    )
    return _ai_expression(config, parts, pa.string(), error_column=runtime_opts.get("error_column", True),
                          usage_column=runtime_opts.get("usage_column", False))


def _ai_expression(config: AICallConfig, parts: list, value_type: pa.DataType, *, error_column: bool,
                   usage_column: bool) -> Expression:
    out_type = pa.struct([("value", value_type), ("error", ERROR_TYPE), ("usage", USAGE_TYPE)])
    batch = 128
    window = max(2, -(-2 * config.runtime.max_concurrency // batch) + 1)
    spec = AISpec(
        name="prompt", fn=AIClient.__call__, return_dtype=out_type, is_batch=True, is_async=True,
        max_concurrency=window, batch_size=batch, owner=ClassSpec(AIClient, (config,), {}),
        layout=tuple(("expr", i) for i in range(len(parts))), error_column=error_column, usage_column=usage_column,
    )
    call = UDFCall(spec, tuple(parts))
    return Expression(Alias(Call("struct.get", (call,), (("field", "value"),)), parts[0].name()))


@dataclasses.dataclass(frozen=True, eq=False)
class AISpec(UDFSpec):
    """A UDF spec for AI functions: also says which side columns (error, usage) to add."""

    error_column: bool = True
    usage_column: bool = False


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
        body = build_body(config, list(parts))
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
