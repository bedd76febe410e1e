"""``classify_text(method="embedding")``: a label per row from an in-process embedding model, with its probability.

The operator (``EmbeddingHead``: a logistic regression on the examples' embeddings, or similarity
to label descriptions) is in ``inferframe.ai.head``; this module checks the call and builds it, with
the embedding model resolved by ``resolve_model`` (its class goes to the operator).

Example:
    >>> import inferframe as ifr
    >>> expr = embedding_classify(ifr.col("review"), ["positive", "negative"],
    ...                           examples=[("Loved it.", "positive"), ("Dull.", "negative")])
    >>> df = ifr.from_pydict({"review": ["What a wonderful film!"]}).with_column("label", expr)
    >>> df.schema()["label"], df.schema()["label_confidence"]
    (DataType(category<string>), DataType(double))
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall
from inferframe.ai.examples import load_examples
from inferframe.ai.head import ZERO_SHOT_TEMPERATURE, EmbeddingHead
from inferframe.ai.options import EMBEDDING_HEAD, TEXT_MODEL, parse_options
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, to_node
from inferframe.functions._calls import ai_expression
from inferframe.models.loading import require
from inferframe.models.registry import resolve_model
from inferframe.providers.registry import REGISTRY
from inferframe.session import current

_IN_PROCESS = ("sentence_transformers", "transformers")


def embedding_classify(text: Any, labels: list[str], *, examples: Any = None, label_descriptions: Any = None,
                       embed_model: str | None = None, **options: Any) -> Expression:
    """Classify every row by its embedding: a head trained on ``examples``, or similarity to label descriptions.

    The column expression of ``embedding_classify_call`` (see there for the parameters).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"t": ["I adore this, wonderful!", "Awful, I hate it."]})
        >>> expr = embedding_classify(ifr.col("t"), ["positive", "negative"],
        ...                           label_descriptions={"positive": "I love it, wonderful",
        ...                                               "negative": "I hate it, awful"})
        >>> df.with_column("s", expr).to_pydict()["s"]
        ['positive', 'negative']
    """
    return ai_expression(embedding_classify_call(text, labels, examples=examples, label_descriptions=label_descriptions,
                                                 embed_model=embed_model, **options))


def embedding_classify_call(text: Any, labels: list[str], *, examples: Any = None, label_descriptions: Any = None,
                            embed_model: str | None = None, examples_per_label: int | None = None,
                            **options: Any) -> AICall:
    """Classify every row by its embedding: a head trained on ``examples``, or similarity to label descriptions.

    Parameters:
        text: the text column.
        labels: the allowed labels (at least two, distinct).
        examples: labelled rows (an inferframe DataFrame, a list of (text, label) pairs, or a CSV,
            Parquet or JSON-lines file; see ``load_examples``). With them, a logistic regression on
            their embeddings picks the label; its regularisation C is chosen by stratified
            cross-validation on the examples (log loss), so the confidences are calibrated on them.
        label_descriptions: dict label -> text (or list of texts) to compare rows with (cosine
            similarity, softmax at ``temperature``); without examples a label lacking one is
            compared with its own name; with examples, the head's probabilities are multiplied by
            the descriptions' and renormalised.
        embed_model: an in-process embedding model directory or name (default: the packaged all-MiniLM-L6-v2).
        examples_per_label: examples of each label the head trains on (default: as many as the smallest label has).
        **options: provider ("sentence_transformers", default, or "transformers"); seed (which
            examples, see ``load_examples``); C (fixed regularisation instead of
            cross-validation); temperature (zero-shot softmax temperature, default
            ``ZERO_SHOT_TEMPERATURE``); confidence_column (default True); batch_size, device,
            encode_batch_size, long_inputs, max_concurrency, use_process, gpus, on_error, error_column
            as for ``embed_text``.

    The column is a dictionary-encoded string, as with the other methods; "<name>_confidence" is
    the chosen label's probability (the probabilities of all labels sum to one). An empty text
    gets a null label and an error of kind "input". Examples and labels are checked here, before
    any work: a label outside ``labels`` is a PlanError.

    Example:
        >>> import inferframe as ifr
        >>> call = embedding_classify_call(ifr.col("t"), ["positive", "negative"])
        >>> call.function, call.label
        ('classify_text[embedding]', 'classify[zero-shot, all-MiniLM-L6-v2]')
    """
    if not isinstance(text, Expression):
        raise PlanError("classify_text(method='embedding') takes one text column, e.g. col('review'); "
                        f"got {type(text).__name__}.")
    labels = [str(label) for label in labels]
    if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
        raise PlanError(f"classify_text() needs at least two distinct, non-empty string labels, got {labels!r}.")
    fn = "classify_text(method='embedding')"
    provider = options.get("provider") or "sentence_transformers"
    if provider not in _IN_PROCESS:
        raise PlanError(f"{fn} runs an embedding model in this process: provider must be "
                        f"one of {list(_IN_PROCESS)}, not {provider!r}. Use method='score' or 'generate' for {provider!r}.")
    run = parse_options(fn, options, REGISTRY.get(provider).capabilities, current(), model=embed_model,
                        own={**TEXT_MODEL, **EMBEDDING_HEAD})
    options = run.extra
    descriptions = _descriptions(label_descriptions, labels)
    pairs: tuple = ()
    if examples is not None:
        pairs = tuple(load_examples(examples, labels, examples_per_label=examples_per_label, seed=options.get("seed", 0)))
        empty = [label for t, label in pairs if not t.strip()]
        if empty:
            raise PlanError(f"examples: an empty text (label {empty[0]!r}) has no embedding to learn from.")
    elif examples_per_label is not None or options.get("seed") is not None:
        raise PlanError("classify_text(method='embedding'): examples_per_label= and seed= choose examples; pass "
                        "examples=... too.")
    temperature = float(options.get("temperature") or ZERO_SHOT_TEMPERATURE)
    c = options.get("C")
    require(provider)
    if pairs and importlib.util.find_spec("sklearn") is None:
        raise PlanError('classify_text(method="embedding", examples=...) trains a scikit-learn logistic regression, '
                        'and scikit-learn is not installed. Install it with: pip install "inferframe[embed]"')
    ref = resolve_model(fn, provider, embed_model, kind="text", options={})
    confidence = bool(options.get("confidence_column", True))
    settings = {
        "labels": tuple(labels), "examples": pairs, "descriptions": descriptions, "embedder": ref.runner,
        "temperature": temperature, "C": None if c is None else float(c), "device": options.get("device"),
        "encode_batch_size": int(options.get("encode_batch_size") or 32),
        "long_inputs": options.get("long_inputs") or "chunk",
        "on_error": run.on_error, "confidence": confidence,
        "label": f"classify[{'head' if pairs else 'zero-shot'}, {ref.model}]",
    }
    return AICall("classify_text[embedding]", EmbeddingHead, (ref.path,), (to_node(text),),
                  pa.dictionary(pa.int32(), pa.string()), run.sizing, kwargs=tuple(settings.items()), model=ref,
                  options=run, method="classify", is_async=False, error_column=run.error_column,
                  confidence_column=confidence, on_error=run.on_error, instances=run.instances, accepts=("text",))


def _descriptions(label_descriptions: Any, labels: list[str]) -> tuple:
    if label_descriptions is None:
        return ()
    if not isinstance(label_descriptions, dict):
        raise PlanError("label_descriptions must be a dict: label -> description text (or a list of texts).")
    extra = sorted(set(map(str, label_descriptions)) - set(labels))
    if extra:
        raise PlanError(f"label_descriptions names {extra}, which are not among the labels {labels}.")
    out = []
    for label in labels:
        if label not in label_descriptions:
            continue  # compared with its own name instead
        d = label_descriptions[label]
        texts = (d,) if isinstance(d, str) else tuple(d)
        if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
            raise PlanError(f"label_descriptions[{label!r}] must be a non-empty text or list of texts, got {d!r}.")
        out.append((label, texts))
    return tuple(out)
