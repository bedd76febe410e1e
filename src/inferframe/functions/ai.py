"""``prompt()`` and ``classify_text()``: ask a model about every row, as a column expression.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"q": ["2+2?"]})
    >>> df = df.with_column("a", prompt(ifr.col("q"), model="gemma-3-270m", max_tokens=4))
    >>> df.schema()["a"]
    DataType(string)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall, ModelRef, sizing
from inferframe.ai.classify import ClassifyConfig, ClassifyOperator
from inferframe.ai.config import AICallConfig
from inferframe.ai.label_scoring import CONTENT_FREE
from inferframe.ai.examples import demonstrations, load_examples
from inferframe.ai.options import MEDIA, PROMPT_ONLY, parse_options
from inferframe.ai.prompt import PromptOperator
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, lit, to_node
from inferframe.functions._calls import ai_expression, message_parts
from inferframe.functions._vocabulary import take
from inferframe.functions.layout_hint import warn_layout
from inferframe.models.registry import image_refusal, resolve_model
from inferframe.structured.answer_budget import fit_to_budget
from inferframe.providers.interface import RepairFormat, check_options, default_max_tokens, format_fields, require
from inferframe.providers.spec import ProviderSpec
from inferframe.runtime.config import DEFAULT_PREFIX_WINDOW
from inferframe.session import current


def prompt(messages: Any, return_format: Any = None, *, system_message: str | None = None,
           provider: str | ProviderSpec | None = None, model: str | None = None,
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
        use_chat_completions: use /chat/completions instead of /responses (default: the provider's choice).
        **options: request options passed through (temperature, max_tokens / max_output_tokens, seed,
            stop, reasoning, tools, extra_body, ...); runtime options: max_concurrency, rpm, tpm,
            max_retries, max_cost, max_tokens_budget, timeout, on_error ("null" or "raise", below),
            cache ("read_write" default, "read_only", "refresh", "off"), cache_dir, prompt_version,
            error_column (add "<name>_error", default True), usage_column (add "<name>_usage"),
            repair (ask once more when an answer breaks return_format); prefix_order (default True:
            rows sharing a prompt prefix go out together so server prompt caches hit; the output
            order never changes) and prefix_window (rows pending for it, default 4096); batch=True (run through the
            OpenAI Batch API: half price, answers within 24 h; batch_poll_interval seconds); media options:
            max_image_size, image_format, image_detail, pdf_mode ("file" or "text").

    Every option is checked here, before any request: a bad value is a PlanError naming it.
    With ``df.with_column("label", prompt(...))`` a failed row gets a null label and its
    error in ``label_error``: struct{kind, message, status, attempts, raw}. With
    ``on_error="raise"`` the first row that fails, whatever failed (an HTTP error, a malformed
    or refused answer, one that breaks return_format, an input that cannot be sent), stops the
    job with ``RowFailed`` naming that row's error kind and message; the same rule holds for
    every AI function. By default a refusal that will recur on every row (the same 4xx message on
    the first 3 rows: an unknown model, an invalid parameter) stops the job with one
    ``ServiceError`` quoting the server; ``on_error="null"``, given, keeps those rows as data too.

    Example:
        >>> from inferframe import col
        >>> expr = prompt(col("review"), system_message="Classify the sentiment.", model="gemma-3-270m")
        >>> prompt(col("review"), max_concurrency=0)
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: prompt(): max_concurrency=0 is not accepted; max_concurrency must be a whole number >= 1.
    """
    return ai_expression(prompt_call(messages, return_format, system_message, provider, model, use_chat_completions,
                                     options))


def prompt_call(messages: Any, return_format: Any, system_message: str | None, provider: Any, model: str | None,
                use_chat_completions: bool | None, options: dict, fn: str = "prompt") -> AICall:
    """What ``prompt()`` resolves when the plan is built: its ``AICall`` (config, inputs, value type, options, sizing).

    Example:
        >>> from inferframe import col
        >>> call = prompt_call(col("q"), None, None, None, "gemma-3-270m", None, {"max_tokens": 4})
        >>> call.config.label, call.sizing.batch, call.config.max_output_tokens
        ('prompt[gemma-3-270m]', 128, 4)
    """
    parts = message_parts(messages, fn)
    ref = provider if isinstance(provider, ModelRef) else resolve_model(fn, provider, model, kind="generate",
                                                                         options=options)
    spec, caps, model = ref.spec, ref.caps, ref.model
    if return_format is None:  # choices=[...], its old name, took any iterable of labels
        return_format = take(fn, options, "return_format", None)
        return_format = None if return_format is None else list(return_format)
    take(fn, options, "return_format", return_format)  # both given: a PlanError
    parsed = parse_options(fn, options, caps, current(), model=model, own={**PROMPT_ONLY, **MEDIA})
    if parsed.timeout is not None:
        spec = spec.with_option("timeout", parsed.timeout)
    if use_chat_completions is None:
        endpoint = caps.default_endpoint
    else:
        endpoint = "chat" if use_chat_completions else "responses"
    value_type, format_request, schema = pa.string(), (), None
    wire = spec.wire_format()
    cap = parsed.output_cap.tokens if parsed.output_cap else None
    check_options(wire, fn, endpoint, model, caps, options, parsed.output_cap)  # limits the server documents: refused before any request
    if return_format is not None:
        from inferframe.structured import arrow_type_for, build_spec, json_schema_for

        return_format = build_spec(return_format)  # parsed once: the call holds the spec, not the raw format
        value_type = arrow_type_for(return_format)
        grammar = caps.structured_outputs == "grammar"  # a grammar enforces string lengths; OpenAI's strict mode rejects them
        name, schema = json_schema_for(return_format, lengths=grammar)
        if grammar:
            # Under the user's max_tokens, free text and open lists shrink so the model can close the JSON.
            schema = fit_to_budget(schema, cap)
        fields = format_fields(wire, caps, endpoint, name, schema, _labels_of(schema))
        # An option the user set (e.g. dry_multiplier=0) wins over the provider's field of that name.
        format_request = tuple((k, v) for k, v in fields.items() if k not in parsed.request)
    if parsed.extra.get("repair"):
        require(wire, RepairFormat, spec.name, fn)
    if cap is None:
        cap = default_max_tokens(wire, schema)
    runtime = dataclasses.replace(parsed.runtime, prefix_order=parsed.extra.get("prefix_order", True),
                                  prefix_window=parsed.extra.get("prefix_window", DEFAULT_PREFIX_WINDOW))
    config = AICallConfig(
        endpoint=endpoint, provider=spec, model=model, system_message=system_message,
        options=tuple(sorted(parsed.request.items())), runtime=runtime, n_parts=len(parts),
        label=f"prompt[{model}]", media=parsed.media(), return_format=return_format, format_request=format_request,
        repair=bool(parsed.extra.get("repair", False)), max_output_tokens=cap,
    )
    warn_layout(parts, system_message)  # a note only: the prompt is sent as written
    size = sizing(runtime.max_concurrency, batch_api=runtime.batch,
                  prefix_window=runtime.prefix_window if runtime.prefix_order else 0)
    return AICall("prompt", PromptOperator, (config,), tuple(parts), value_type, size, model=ref, options=parsed,
                  error_column=parsed.error_column, usage_column=parsed.usage_column, on_error=runtime.on_error,
                  no_images=image_refusal(ref))


def _labels_of(schema: dict) -> list[str] | None:
    """The labels of a choices format ({"label": enum}), else None."""
    props = schema.get("properties") or {}
    if list(props) == ["label"] and all(isinstance(c, str) for c in props["label"].get("enum") or [None]):
        return list(props["label"]["enum"])
    return None


METHODS = ("auto", "generate", "score", "embedding")
DEFAULT_EXAMPLES_PER_LABEL = 20  # demonstrations shown: a longer prompt is slower for every row


def classify_text(text: Any, labels: list[str], *, system_message: str | None = None, method: str = "auto",
                  examples: Any = None, examples_per_label: int | None = None, confidence_column: bool = True,
                  calibrate: bool | str = "auto",
                  label_descriptions: Any = None, nearest_examples: int = 0, cascade: Any = None,
                  target_accuracy: float = 0.9, embed_model: str | None = None, **options: Any) -> Expression:
    """Put every row into exactly one of ``labels``; the column is a dictionary-encoded string.

    Parameters:
        text: the text column to classify (or a list of expressions joined into one message).
        labels: the allowed labels (at least two, distinct).
        system_message: instructions; by default a short instruction naming the labels.
        method: "generate": constrained generation (the server enforces the labels where it can, every
            answer is checked; anything else is an error of kind "schema"); "score": every label is
            scored as a continuation of the prompt by the model's log-probabilities, calibrated on
            content-free inputs, and the most probable one wins; "embedding": a classifier on
            embeddings of ``examples`` (or similarity to ``label_descriptions``); "auto" (default):
            "score" where the provider returns log-probabilities, else "generate".
        examples: labelled rows (a DataFrame, a list of (text, label) pairs, or a file), balanced per
            label and shown as demonstrations after the instructions and before the row.
        examples_per_label: at most this many examples per label are shown (a seeded balanced sample;
            default 20); with method="embedding", this many per label train the head (default: all).
        nearest_examples: instead, show each row the k examples of every label most similar to it
            (embeddings by ``embed_model``, computed in this process; all of ``examples`` are candidates).
            The calibration then uses the fixed balanced sample as its context.
        confidence_column: add "<name>_confidence" (float64): the label's calibrated probability;
            null where the row failed, and with method="generate", which gives no probability.
        calibrate: with method="score", True: divide by the labels' probabilities for content-free
            inputs ("N/A", "", "[MASK]"; scored once per call) and renormalise (Zhao et al. 2021);
            "batch": divide by the mean label probabilities of the rows scored so far in the run, once
            16 are (Zhou et al. 2024); "auto" (default): content-free with ``examples`` (on the
            embedded model, 80 IMDB sentences outside the held-out set, it raised balanced accuracy
            with 20 examples per label from 0.87 to 0.93), "batch" zero-shot (bench/calibration.py:
            0.783 to 0.879 on 200 held-out IMDB rows, where content-free gave 0.663).
        label_descriptions: for method="embedding": a text per label to compare rows with.
        cascade: stages, cheapest first (method names or dicts of these options, e.g.
            ``["embedding", "score"]``): each stage answers the rows it is confident about and sends
            the rest on; thresholds are chosen on held-back ``examples`` to keep ``target_accuracy``
            (see ``inferframe.ai.cascade``).
        target_accuracy: with ``cascade``, the accuracy the thresholds keep on the held-back examples.
        embed_model: the in-process embedding model of method="embedding", of a cascade's embedding
            stages and of ``nearest_examples`` (default: the packaged all-MiniLM-L6-v2); ``model``
            names the language model.
        **options: everything ``prompt()`` takes (provider, model, temperature, max_concurrency,
            on_error, ...); with on_error="raise" an answer outside the labels stops the job.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"review": ["Loved it."]})
        >>> df = df.with_column("label", classify_text(ifr.col("review"), ["positive", "negative"],
        ...                                            model="gemma-3-270m", method="generate"))
        >>> df.column_names, df.schema()["label_confidence"]
        (['review', 'label', 'label_error', 'label_confidence'], DataType(double))
    """
    if isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__"):
        raise PlanError(f"classify_text(): labels must be a list of strings, e.g. ['positive', 'negative'], "
                        f"got {labels!r}" + (" (one string: split it yourself, e.g. labels.split(','))." if isinstance(labels, str) else "."))
    labels = list(labels)
    if len(labels) < 2 or len(set(labels)) != len(labels) or not all(isinstance(x, str) and x for x in labels):
        raise PlanError(f"classify_text() needs at least two distinct, non-empty string labels, got {labels!r}.")
    if method not in METHODS:
        raise PlanError(f"classify_text(): method={method!r} is not one of {', '.join(map(repr, METHODS))}.")
    if cascade is not None:
        if method != "auto":
            raise PlanError("classify_text(): pass either method=... or cascade=[...] (each stage names its method).")
        from inferframe.functions.classify_cascade import cascade_call

        return ai_expression(cascade_call(
            text, labels, cascade, examples=examples, target_accuracy=target_accuracy,
            examples_per_label=examples_per_label, system_message=system_message, calibrate=calibrate,
            label_descriptions=label_descriptions, confidence_column=confidence_column, build_stage=classify_call,
            embed_model=embed_model, **options))
    return ai_expression(classify_call(text, labels, system_message=system_message, method=method, examples=examples,
                                       examples_per_label=examples_per_label, confidence_column=confidence_column,
                                       calibrate=calibrate, label_descriptions=label_descriptions,
                                       nearest_examples=nearest_examples, embed_model=embed_model, **options))


def classify_call(text: Any, labels: list[str], *, system_message: str | None = None, method: str = "auto",
                  examples: Any = None, examples_per_label: int | None = None, confidence_column: bool = True,
                  calibrate: bool | str = "auto", label_descriptions: Any = None, nearest_examples: int = 0,
                  embed_model: str | None = None, **options: Any) -> AICall:
    """The ``AICall`` of ``classify_text`` with one method (labels and method checked by the caller).

    Example:
        >>> from inferframe import col
        >>> call = classify_call(col("t"), ["yes", "no"], method="generate", model="gemma-3-270m")
        >>> call.function, call.config.method, call.config.labels
        ('classify_text', 'generate', ('yes', 'no'))
    """
    if not isinstance(nearest_examples, int) or isinstance(nearest_examples, bool) or nearest_examples < 0:
        raise PlanError(f"classify_text(): nearest_examples={nearest_examples!r} must be a whole number >= 0.")
    if nearest_examples and (examples is None or method == "embedding"):
        raise PlanError("classify_text(nearest_examples=k) picks each row's demonstrations from examples=...: pass "
                        "examples, with method 'score', 'generate' or 'auto'.")
    examples_per_label = take("classify_text", options, "examples_per_label", examples_per_label)
    if method == "embedding":
        from inferframe.functions.classify_embedding import embedding_classify_call

        # Here the embedding model answers: model= was its name, the one language models are named by.
        embed_model = take("classify_text", options, "embed_model", embed_model, old=("model",))
        return embedding_classify_call(text, labels, examples=examples, label_descriptions=label_descriptions,
                                       confidence_column=confidence_column, embed_model=embed_model,
                                       examples_per_label=examples_per_label, **options)
    if label_descriptions is not None:
        raise PlanError("classify_text(): label_descriptions= is used by method='embedding' only.")
    if embed_model is not None and not nearest_examples:
        raise PlanError("classify_text(): embed_model= names the embedding model of method='embedding', of a "
                        "cascade's embedding stages and of nearest_examples=k; model= names the language model.")
    examples_per_label = DEFAULT_EXAMPLES_PER_LABEL if examples_per_label is None else examples_per_label
    if not isinstance(examples_per_label, int) or isinstance(examples_per_label, bool) or examples_per_label < 1:
        raise PlanError(f"classify_text(): examples_per_label={examples_per_label!r} must be a whole number >= 1.")
    if calibrate not in (True, False, "auto", "batch"):
        raise PlanError(f"classify_text(): calibrate={calibrate!r} is not True, False, 'batch' or 'auto'.")
    pairs = None
    if examples is not None:
        pairs = load_examples(examples, labels)
        if len(pairs) > examples_per_label * len(labels):
            # A long prompt is slower for every row and can outgrow a slot's context: a balanced sample.
            pairs = load_examples(examples, labels, examples_per_label=examples_per_label)
    if system_message is None:
        system_message = ("Classify the text into exactly one of these labels: " + ", ".join(labels)
                          + ". Answer with the label only.")
    parts = message_parts(text, "classify_text")
    prefix, suffix = demonstrations(pairs)
    ref = resolve_model("prompt", options.pop("provider", None), options.pop("model", None), kind="generate",
                        options=options)
    method = _scoring_method(method, ref)
    calibration_prefix = None
    if nearest_examples:
        if len(parts) != 1:
            raise PlanError("classify_text(nearest_examples=k) takes one text column, e.g. col('review').")
        from inferframe.functions.nearest_examples import nearest_demonstrations

        # The per-row demonstrations end with "Text: ": they take the fixed prefix's place before the row.
        demos = nearest_demonstrations(Expression(parts[0]), load_examples(examples, labels), nearest_examples,
                                       embed_model=embed_model)
        parts = [demos._node, *parts]
        calibration_prefix, prefix = prefix, ""
        if method == "generate":
            parts = [*parts, to_node(lit(suffix))]
    elif method == "generate" and pairs:
        parts = [to_node(lit(prefix)), *parts, to_node(lit(suffix))]
    call = prompt_call([Expression(p) for p in parts], labels, system_message, ref, None,
                       options.pop("use_chat_completions", None), options)
    scored = method == "score"
    base = call.config
    config = ClassifyConfig(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)},
                            labels=tuple(labels), method=method, prefix=prefix if scored or pairs else "",
                            suffix=suffix if scored or pairs else "", confidence=confidence_column,
                            content_free_prefix=calibration_prefix,
                            content_free=CONTENT_FREE if calibrate is True or (calibrate == "auto" and pairs) else (),
                            batch_prior=calibrate == "batch" or (calibrate == "auto" and not pairs))
    if scored:
        config = dataclasses.replace(config, label=f"classify_text[{config.model}]")
    return dataclasses.replace(call, function="classify_text", operator=ClassifyOperator, args=(config,),
                               confidence_column=confidence_column)


def _scoring_method(method: str, ref: ModelRef) -> str:
    """"score" or "generate": what the provider's log-probabilities allow (checked before any request)."""
    logprobs = ref.caps.logprobs
    if method == "auto":
        # Only full-label scores are a safe default: first-token scores (OpenAI) need labels that
        # differ in their first word, and reasoning models refuse logprobs.
        return "score" if logprobs == "tokens" else "generate"
    if method == "score" and logprobs == "none":
        raise PlanError(f"classify_text(method='score'): provider {ref.provider!r} returns no log-probabilities; "
                        "use method='generate'.")
    return method
