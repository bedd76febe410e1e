"""One parser for the options every AI function takes: each is checked once, before any request,
with a message that names the option, the bad value and what is accepted.

Example:
    >>> from inferframe.providers.interface import OPENAI_BODY_OPTIONS, Capabilities, MediaOptions
    >>> from inferframe.session import Session
    >>> parsed = parse_options("prompt", {"max_concurrency": 8, "temperature": 0}, Capabilities(), Session(), model="m")
    >>> parsed.runtime.max_concurrency, parsed.request
    (8, {'temperature': 0})
    >>> parse_options("prompt", {"on_error": "bogus"}, Capabilities(), Session(), model="m")
    Traceback (most recent call last):
    ...
    inferframe.errors.PlanError: prompt(): on_error='bogus' is not accepted; on_error must be one of 'null', 'raise'.

A model run in this process (``caps.in_process``) takes ``IN_PROCESS`` and its own table instead of
the runtime's options, with the same messages:

    >>> from inferframe.ai.options import EMBED_MODEL, TEXT_MODEL
    >>> local = Capabilities(in_process=True, local=True)
    >>> parse_options("embed_text", {"temprature": 0.1}, local, Session(), model=None, own={**EMBED_MODEL, **TEXT_MODEL})
    Traceback (most recent call last):
    ...
    inferframe.errors.PlanError: embed_text() got unknown options ['temprature']; it takes batch_size, device, encode_batch_size, error_column, gpus, long_inputs, max_concurrency, normalize, on_error, use_process.
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
import os
from types import MappingProxyType
from typing import Any, Callable

from inferframe.ai.call import Instances, Sizing, sizing

from inferframe.errors import PlanError
from inferframe.providers.interface import OPENAI_BODY_OPTIONS, Capabilities, MediaOptions, OutputCap
from inferframe.runtime.cache import CachePolicy, json_numbers
from inferframe.runtime.config import DEFAULT_MAX_CONCURRENCY, RuntimeConfig
from inferframe.runtime.retry import RetryPolicy
from inferframe.session import Session


def whole_number(minimum: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= minimum,
            f"a whole number >= {minimum}")


def _number(positive: bool) -> tuple[Callable[[Any], bool], str]:
    def ok(v: Any) -> bool:
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and (v > 0 if positive else v >= 0)

    return ok, "a number > 0" if positive else "a number >= 0"


def in_range(low: float | None, high: float | None, *, low_open: bool = False,
             whole: bool = False) -> tuple[Callable[[Any], bool], str]:
    """A rule for a number from ``low`` to ``high`` (None: no bound; ``low_open``: ``low`` itself is refused).

    Example:
        >>> ok, accepted = in_range(0, 2)
        >>> ok(0.7), ok(-3), ok(True), accepted
        (True, False, False, 'a number from 0 to 2')
    """
    kind = numbers.Integral if whole else numbers.Real

    def ok(v: Any) -> bool:
        if not isinstance(v, kind) or isinstance(v, bool) or v != v:  # v != v: NaN
            return False
        return ((low is None or (v > low if low_open else v >= low)) and (high is None or v <= high))

    noun = "a whole number" if whole else "a number"
    if low is not None and high is not None and not low_open:
        return ok, f"{noun} from {low:g} to {high:g}"
    said = [f"{'>' if low_open else '>='} {low:g}" if low is not None else "", f"<= {high:g}" if high is not None else ""]
    return ok, f"{noun} " + " and ".join(x for x in said if x) if any(said) else noun


def _choice(*values: Any) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in values), "one of " + ", ".join(repr(v) for v in values)


_BOOL = (lambda v: isinstance(v, bool)), "True or False"
_TEXT = (lambda v: isinstance(v, str) and v != ""), "a non-empty string"
_PATH = (lambda v: isinstance(v, (str, os.PathLike))), "a directory path"
_ANY = (lambda v: True), "any value"  # read as before the one parser (a truth value, a device name)
_CACHE = (lambda v: isinstance(v, bool) or v in [p.value for p in CachePolicy] or isinstance(v, CachePolicy),
          "one of " + ", ".join(repr(p.value) for p in CachePolicy) + ", True or False")

# Options that shape the runtime, the result columns or the message parts, not the request body.
RUNTIME = MappingProxyType({
    "max_concurrency": whole_number(1), "initial_concurrency": whole_number(1), "adaptive": _BOOL,
    "rpm": _number(True), "tpm": _number(True), "max_retries": whole_number(0), "max_cost": _number(False),
    "max_tokens_budget": whole_number(0), "timeout": _number(True), "on_error": _choice("null", "raise"),
    "cache": _CACHE, "cache_dir": _PATH, "cache_url": _ANY, "prompt_version": _TEXT, "batch": _BOOL,
    "batch_poll_interval": _number(True), "error_column": _BOOL, "usage_column": _BOOL,
})
PROMPT_ONLY = MappingProxyType({"repair": _BOOL, "prefix_order": _BOOL, "prefix_window": whole_number(1)})
MEDIA = MappingProxyType({
    "max_image_size": whole_number(1), "image_format": _choice(None, "png", "jpeg", "webp"),
    "image_detail": _choice("auto", "low", "high"), "pdf_mode": _choice("file", "text"),
})
# Sampling options passed into the request body, checked here: a server would refuse a bad one on
# every row (HTTP 400) or, worse, accept it (max_tokens=0 asks llama.cpp for no limit at all).
REQUEST = MappingProxyType({
    "max_tokens": whole_number(1), "max_output_tokens": whole_number(1), "max_completion_tokens": whole_number(1),
    "temperature": in_range(0, 2), "top_p": in_range(0, 1, low_open=True), "top_k": whole_number(0),
    "min_p": in_range(0, 1), "presence_penalty": in_range(-2, 2), "frequency_penalty": in_range(-2, 2),
    "repeat_penalty": in_range(0, None), "seed": in_range(None, None, whole=True),
    "n": ((lambda v: v == 1 and not isinstance(v, bool)), "1 (one answer per row is kept)"),
    "top_logprobs": in_range(0, 20, whole=True), "logprobs": _BOOL,
})
EMBEDDING = MappingProxyType({"max_batch_inputs": whole_number(1), "max_batch_tokens": whole_number(1),
                              "max_input_tokens": whole_number(1)})
# A model run in this process takes these instead of RUNTIME: where its instances run, its batches, its errors.
IN_PROCESS = MappingProxyType({
    "batch_size": whole_number(1), "device": _ANY, "max_concurrency": whole_number(1), "use_process": _ANY,
    "gpus": in_range(0, None), "on_error": RUNTIME["on_error"], "error_column": _BOOL,
})
EMBED_MODEL = MappingProxyType({"normalize": _ANY})  # embed_text, embed_image
TEXT_MODEL = MappingProxyType({"encode_batch_size": whole_number(1), "long_inputs": _choice("chunk", "truncate")})
# classify_text(method="embedding"): the head's own options (with IN_PROCESS and TEXT_MODEL).
EMBEDDING_HEAD = MappingProxyType({
    "provider": _ANY, "confidence_column": _ANY, "seed": in_range(None, None, whole=True),
    "temperature": in_range(0, None, low_open=True), "C": in_range(0, None, low_open=True),
})
# classify_text(cascade=...): the options of the cascade's own column; the rest go to its stages.
CASCADE = MappingProxyType({k: RUNTIME[k] for k in ("on_error", "error_column", "usage_column")})


@dataclasses.dataclass(frozen=True)
class ParsedOptions:
    """What one AI call's options mean: the runtime config, the result columns, and the rest.

    ``request`` holds the options passed through into the request body (prompt only), less the
    answer's token cap: ``output_cap`` holds it, under whichever name the user gave it; ``extra``
    the function's own options (repair, media, embedding limits; in process: every option given)
    after checking. A model run in this process has no ``runtime``: ``sizing`` and ``instances``
    say how it is fed and where it runs.
    """

    runtime: RuntimeConfig | None
    timeout: float | None
    error_column: bool
    usage_column: bool
    request: dict
    extra: dict
    on_error: str = "null"
    sizing: Sizing | None = None
    instances: Instances = Instances()
    output_cap: OutputCap | None = None

    def media(self) -> MediaOptions:
        return MediaOptions(**{k: v for k, v in self.extra.items() if k in MEDIA})


def concurrency_bounds(given: int | None, caps: Capabilities) -> tuple[int, int]:
    """(hard ceiling, bound while no rate limit is known) of requests in flight.

    The user's ``max_concurrency`` is both: a ceiling the bound sized from the limits never passes,
    and what a server that tells no limits gets. Otherwise a local server gets its slots, and a
    remote one starts at the provider's default and may be sized up to ``DEFAULT_MAX_CONCURRENCY``
    from its limits and latency.

    Example:
        >>> concurrency_bounds(None, Capabilities()), concurrency_bounds(512, Capabilities())
        ((1024, 64), (512, 512))
        >>> concurrency_bounds(None, Capabilities(local=True, default_concurrency=8))
        (8, 8)
    """
    if given is not None:
        return int(given), int(given)
    if caps.local:
        return caps.default_concurrency, caps.default_concurrency
    return max(DEFAULT_MAX_CONCURRENCY, caps.default_concurrency), caps.default_concurrency


def _named(fn: str) -> str:
    """How a message names the function: ``prompt()``, or ``classify_text(method='embedding')`` as given."""
    return fn if fn.endswith(")") else f"{fn}()"


def check(fn: str, name: str, value: Any, rule: tuple[Callable[[Any], bool], str]) -> Any:
    """``value`` if it passes ``rule``, else a PlanError naming the option, the value and what is accepted."""
    ok, accepted = rule
    if value is not None and not ok(value):
        raise PlanError(f"{_named(fn)}: {name}={value!r} is not accepted; {name} must be {accepted}.")
    return value


def take_options(fn: str, options: dict, rules: Any, *, pass_through: bool = False) -> tuple[dict, dict]:
    """(the options ``rules`` name, checked; the rest): an option outside ``rules`` is a PlanError unless ``pass_through``.

    Example:
        >>> take_options("classify_text", {"on_error": "raise", "model": "m"}, CASCADE, pass_through=True)
        ({'on_error': 'raise'}, {'model': 'm'})
    """
    rest = dict(options)
    taken = {k: check(fn, k, rest.pop(k), rule) for k, rule in rules.items() if k in rest}
    if rest and not pass_through:
        raise PlanError(f"{_named(fn)} got unknown options {sorted(rest)}; it takes {', '.join(sorted(rules))}.")
    return taken, rest


def parse_options(fn: str, options: dict, caps: Capabilities, session: Session, *, model: str | None,
                  own: Any = None, pass_through: bool = True, batch_size: int = 1024) -> ParsedOptions:
    """Check and split one AI call's options.

    Parameters:
        fn: the function's name, for messages.
        options: the keyword options the user passed.
        caps: the provider's capabilities (default concurrency, whether it runs locally or in this process, Batch API).
        session: the session the call is built in (cache and price defaults).
        model: the model (for its price).
        own: the function's own options and their rules (e.g. ``MEDIA``, ``EMBEDDING``, ``TEXT_MODEL``).
        pass_through: unknown options go into the request body (prompt) rather than being an error
            (never in process: no request is sent).
        batch_size: in process, rows per call when ``batch_size`` is not given.
    """
    if caps.in_process:
        return _parse_in_process(fn, options, own or {}, batch_size)
    parsed, opts = take_options(fn, options, {**RUNTIME, **(own or {})}, pass_through=pass_through)
    for k, rule in REQUEST.items():
        if k in opts:
            check(fn, k, opts[k], rule)
    if pass_through:
        _check_body_options(fn, opts, caps, accepted={**RUNTIME, **(own or {})})
    cap = answer_cap(fn, opts)
    for name in MAX_TOKENS_ALIASES:  # the call's config holds the cap; the wire format spells it per endpoint
        opts.pop(name, None)
    batch = bool(parsed.get("batch", False))
    if batch and not caps.batch_api:
        raise PlanError(f"{fn}(): this provider has no Batch API; use batch=False.")
    cache = parsed.get("cache")
    if isinstance(cache, bool):
        cache = CachePolicy.READ_WRITE if cache else CachePolicy.OFF
    policy, directory = session.cache_settings(cache, parsed.get("cache_dir"))
    ceiling, base = concurrency_bounds(parsed.get("max_concurrency"), caps)
    runtime = RuntimeConfig(
        max_concurrency=ceiling, base_concurrency=base,
        initial_concurrency=parsed.get("initial_concurrency"), adaptive=parsed.get("adaptive", True),
        rpm=parsed.get("rpm"), tpm=parsed.get("tpm"),
        retry=RetryPolicy(max_attempts=int(parsed.get("max_retries", 5)) + 1),
        max_cost=parsed.get("max_cost"), max_tokens_budget=parsed.get("max_tokens_budget"),
        on_error=parsed.get("on_error", "null"), cache_policy=policy, cache_dir=directory,
        stop_on_recurring=parsed.get("on_error") != "null",  # "null" given: every failed row stays data
        cache_store=session.cache_store_of(parsed.get("cache_url")),  # a handle: the URL holds a password
        prompt_version=parsed.get("prompt_version"), batch=batch,
        batch_poll_interval=float(parsed.get("batch_poll_interval", 5.0)),
        price=None if caps.local else session.price_of(model),
    )
    extra = {k: v for k, v in parsed.items() if k in (own or {})}
    # Whole floats as ints (``temperature=0.0`` is ``0``): one request, one cache key, from Python or the CLI.
    return ParsedOptions(runtime, parsed.get("timeout"), parsed.get("error_column", True),
                         parsed.get("usage_column", False), json_numbers(opts), extra, on_error=runtime.on_error,
                         output_cap=cap)


# The names the APIs give the output cap; the call keeps one typed field (``AICallConfig.max_output_tokens``),
# and each wire format names it as its endpoint wants (``max_output_tokens`` on /responses, ``max_tokens`` or
# ``max_completion_tokens`` on chat). Only this module reads these names out of a user's options.
MAX_TOKENS_ALIASES = ("max_tokens", "max_output_tokens", "max_completion_tokens")


def answer_cap(fn: str, options: dict) -> OutputCap | None:
    """The answer's token cap the user set, under any of its names (``MAX_TOKENS_ALIASES``); None: not set.

    The one place a call's options become its cap: ``parse_options`` (every AI call), and ``sem_agg``,
    which sizes its prompts before it builds its call. Two names with different values are a PlanError;
    ``None`` is not set (the server's own cap).

    Parameters:
        fn: the function's name, for messages.
        options: the options the user passed.

    Example:
        >>> answer_cap("sem_agg", {"max_output_tokens": 64, "model": "m"})
        OutputCap(name='max_output_tokens', tokens=64)
        >>> answer_cap("prompt", {"max_tokens": 5, "max_completion_tokens": 9})
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: prompt(): max_tokens=5 and max_completion_tokens=9 name one limit (the answer's tokens); pass one of them.
    """
    given = [k for k in MAX_TOKENS_ALIASES if k in options]
    if len({options[k] for k in given}) > 1:
        raise PlanError(f"{_named(fn)}: " + " and ".join(f"{k}={options[k]!r}" for k in given)
                        + " name one limit (the answer's tokens); pass one of them.")
    name = next((k for k in given if options[k] is not None), None)
    return None if name is None else OutputCap(name, json_numbers(options[name]))


def _check_body_options(fn: str, opts: dict, caps: Capabilities, accepted: Any) -> None:
    """Refuse a request option no server of this kind takes (a typo, mostly), with "did you mean"; ``extra_body`` passes anything.

    Example:
        >>> _check_body_options("prompt", {"temprature": 0.2}, Capabilities(), {})
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: prompt(): unknown option temprature=0.2 (did you mean temperature?). ...
        >>> _check_body_options("prompt", {"extra_body": {"temprature": 0.2}}, Capabilities(), {})
    """
    if "extra_body" in opts and not isinstance(opts["extra_body"], dict):
        raise PlanError(f"{_named(fn)}: extra_body={opts['extra_body']!r} is not accepted; extra_body must be a dict "
                        "of fields merged into every request body, e.g. extra_body={'my_option': 1}.")
    known = OPENAI_BODY_OPTIONS | set(REQUEST) | caps.body_options
    for name in opts:
        if name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known | set(accepted)), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise PlanError(
            f"{_named(fn)}: unknown option {name}={opts[name]!r}{hint}. No request is sent with an option this provider's "
            f"server does not take; to send a field the server takes that inferframe does not know, pass it in "
            f"extra_body={{{name!r}: ...}}.")


def _parse_in_process(fn: str, options: dict, own: Any, batch_size: int) -> ParsedOptions:
    """The options of a model run in this process: ``IN_PROCESS`` and the function's own, no request body."""
    parsed, _ = take_options(fn, options, {**IN_PROCESS, **own})
    instances = Instances(parsed.get("max_concurrency"), bool(parsed.get("use_process", False)),
                          float(parsed.get("gpus") or 0))
    size = sizing(parsed.get("max_concurrency") or 1, rows_per_call=int(parsed.get("batch_size") or batch_size))
    return ParsedOptions(None, None, parsed.get("error_column") is not False, False, {}, parsed,
                         on_error=parsed.get("on_error") or "null", sizing=size, instances=instances)
