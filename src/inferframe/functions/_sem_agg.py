"""``DataFrame.sem_agg()``: one model-written answer per group over all its rows, by hierarchical reduction.

``sem_agg`` checks its arguments, sizes its prompts from the model's context (``context_budget``) and
builds its prompt step, then a lazy plan node whose planner (``plan.semantic.agg``: the fold, level by
level) runs when a job reaches it. Calling it reads no data and sends no request.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"review": ["Late.", "Cold."]})
    >>> sem_agg(df, "Summarise {review}", max_chars=100, model="gemma-3-270m")._plan.describe()
    "SemAgg 'Summarise {review}' max_chars=100 -> fold est_calls=3 (at most)"
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import col
from inferframe.functions._sem_global import sealed, check_columns, criterion, operator
from inferframe.functions.ai import prompt
from inferframe.functions.templates import parse_template
from inferframe.plan.semantic.agg import Agg

__all__ = ["context_budget", "sem_agg"]


# Characters of English text per token, low: a pack sized by it stays within the context.
CHARS_PER_TOKEN = 3.0
# Tokens of each prompt that are not row text: the instruction, the numbering, the chat template.
PROMPT_OVERHEAD_TOKENS = 200
# The answer's room when max_tokens is not set.
DEFAULT_ANSWER_TOKENS = 512
DEFAULT_MAX_CHARS = 4000


def context_budget(options: dict) -> tuple[int, str]:
    """Characters of row text per prompt from the model's context window: (chars, how it was chosen).

    The window less the answer (``max_tokens``, else 512) and the prompt's own text, at 3 characters
    a token; 4000 characters where the window is not known.

    Example:
        >>> context_budget({"model": "gemma-3-270m"})
        (4008, 'gemma-3-270m: context of 2,048 tokens less 512 for the answer and 200 for the prompt')
    """
    from inferframe.ai.options import answer_cap
    from inferframe.models.registry import resolve_model
    from inferframe.providers.interface import context_size

    ref = resolve_model("sem_agg", options.get("provider"), options.get("model"), kind="generate",
                        options=dict(options))
    ctx = context_size(ref.spec.wire_format(), ref.model, ref.caps) if ref.spec is not None else None
    if not ctx:
        return DEFAULT_MAX_CHARS, f"{ref.model}: context not known, {DEFAULT_MAX_CHARS:,} characters"
    # sem_agg sizes its prompts before it builds its call: it asks the config step for the cap its call will hold.
    cap = answer_cap("sem_agg", options)
    answer = cap.tokens if cap else DEFAULT_ANSWER_TOKENS
    tokens = ctx - answer - PROMPT_OVERHEAD_TOKENS
    if tokens < 20:
        raise PlanError(f"sem_agg(): {ref.model}'s context of {ctx:,} tokens leaves no room for rows after "
                        f"max_tokens={answer}; lower max_tokens.")
    return int(tokens * CHARS_PER_TOKEN), (f"{ref.model}: context of {ctx:,} tokens less {answer} for the answer and "
                                           f"{PROMPT_OVERHEAD_TOKENS} for the prompt")


def sem_agg(df: Any, template: str, *, group_by: Any = None, max_chars: int | None = None, column: str = "sem_agg",
            on_error: str = "null", **options: Any) -> Any:
    """One answer per group: the model's answer to the template's instruction over all the group's rows.

    Lazy (``explain()`` shows it and the calls expected); its first run collects ``df`` and computes the
    result, once: the group columns (in order of first appearance) and ``column`` (null where every call of the group failed); its ``sem_stats`` is
    {"calls", "jobs", "failed", "levels": {group: levels}} (the group: its value, a tuple for several
    group columns, None without group_by).

    Parameters:
        df: the DataFrame.
        template: the instruction, with the columns it reads in braces: ``"Summarise the complaints in {review}"``.
        group_by: a column name or a list of them (None: one answer over all rows).
        max_chars: the characters of row text per prompt (default: as many as the model's context holds,
            ``context_budget``: about 4,000 on the embedded Gemma 3 270M).
        column: the answer column's name.
        on_error: "null" (default): a failed call's part is left out and counted; "raise": ``RowFailed``.
        **options: what ``prompt`` takes (provider, model, base_url, max_tokens, ...).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"film": ["A", "A", "B"], "review": ["Too long.", "Too loud.", "Dull."]})
        >>> df.sem_agg("Summarise the complaints in {review}", group_by="film", model="gemma-3-270m").column_names
        ['film', 'sem_agg']
    """
    options = sealed(options)
    t = parse_template(template, "sem_agg")
    keys = [group_by] if isinstance(group_by, str) else list(group_by) if isinstance(group_by, (list, tuple)) else []
    if (group_by is not None and not keys) or not all(isinstance(k, str) for k in keys):
        raise PlanError(f"sem_agg(group_by={group_by!r}) takes a column name or a list of them, e.g. group_by='film'.")
    if max_chars is not None and (not isinstance(max_chars, int) or isinstance(max_chars, bool) or max_chars < 20):
        raise PlanError(f"sem_agg(): max_chars={max_chars!r} must be a whole number >= 20, e.g. max_chars=4000.")
    budget = f"max_chars={max_chars:,} (given)" if max_chars is not None else None
    if max_chars is None:
        max_chars, budget = context_budget(options)
    if column in keys:
        raise PlanError(f"sem_agg(column={column!r}) is a group column; pass another name, e.g. column='summary'.")
    check_columns(df, t, "sem_agg", tuple(keys))
    schema = df.schema().to_arrow()
    out_schema = pa.schema([schema.field(k) for k in keys] + [pa.field(column, pa.string())])
    summarise = prompt(col("q"), **dict(options, on_error=on_error))
    return operator(df, out_schema, Agg(template, tuple(t.columns()), criterion(t), tuple(keys), column, out_schema,
                                        max_chars, budget, summarise))
