"""``DataFrame.sem_agg()``: one model-written answer per group over all its rows, by hierarchical reduction.

``sem_agg`` is lazy; when it runs it collects its input (it needs every row). Per group, the rows'
texts (the values of the columns the template reads), in order, are packed into prompts of at most ``max_chars`` characters
of text; the model answers the instruction for each pack (level 1), and the partial answers are
packed and combined the same way, level by level, until one remains. Every level of every group is
one DataFrame job of ``prompt`` calls. A failed call's part is left out of the next level and
counted; ``on_error="raise"`` stops at it. The result's ``sem_stats`` holds the calls, jobs, failures
and the levels of each group.

Example:
    >>> pack(["aaaa", "bb", "cc", "ddddd"], 6)
    [['aaaa', 'bb'], ['cc'], ['ddddd']]
    >>> def initials(prompts):  # a stand-in for the model: the first letter of every text
    ...     return ["".join(x[0] for x in texts) for _, texts in prompts]
    >>> reduce_groups({"g": ["aa", "bb", "cc", "dd", "ee"], "h": ["xy"]}, 4, initials)
    ({'g': 'ae', 'h': 'x'}, {'g': 3, 'h': 1})
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.functions._sem_global import Calls, sealed, ask_prompts, check_columns, criterion, document, whole_table
from inferframe.functions.templates import parse_template

__all__ = ["context_budget", "expected_calls", "pack", "reduce_groups", "sem_agg"]

# Answers a round of prompts: (level, texts) per prompt -> the answer, or None where it failed.
Summarise = Callable[[list[tuple[int, list[str]]]], list[str | None]]


def pack(texts: list[str], max_chars: int, at_least: int = 1) -> list[list[str]]:
    """Order-preserving packs of ``texts`` of at most ``max_chars`` characters each (a longer text is cut to fit).

    ``at_least``: each pack but the last holds at least this many texts (each then cut to ``max_chars // at_least``),
    so that a fold level always shrinks.
    """
    limit = max(1, max_chars // at_least)
    packs: list[list[str]] = []
    size = 0
    for text in texts:
        text = text[:limit]
        if packs and (size + len(text) <= max_chars or len(packs[-1]) < at_least):
            packs[-1].append(text)
            size += len(text)
        else:
            packs.append([text])
            size = len(text)
    return packs


def reduce_groups(groups: dict, max_chars: int, summarise: Summarise) -> tuple[dict, dict]:
    """Each group's texts reduced to one answer, level by level; one ``summarise`` round per level for all groups.

    Returns (answer by group, None where every part failed; levels by group).
    """
    items = {g: list(texts) for g, texts in groups.items()}
    answers: dict = {g: None for g in groups}
    levels = dict.fromkeys(groups, 0)
    level = 0
    while items:
        level += 1
        work = [(g, p) for g, texts in items.items() for p in pack(texts, max_chars, 1 if level == 1 else 2)]
        out = summarise([(level, p) for _, p in work])
        nxt: dict = {}
        for (g, _), a in zip(work, out):
            levels[g] = level
            if a is not None:
                nxt.setdefault(g, []).append(a)
        for g in items:
            done = sum(1 for h, _ in work if h == g) == 1
            if done or g not in nxt:
                answers[g] = nxt.get(g, [None])[0] if done else None
            else:
                items[g] = nxt[g]
        items = {g: nxt[g] for g in items if g in nxt and sum(1 for h, _ in work if h == g) > 1}
    return answers, levels


# Characters of English text per token, low: a pack sized by it stays within the context.
CHARS_PER_TOKEN = 3.0
# Tokens of each prompt that are not row text: the instruction, the numbering, the chat template.
PROMPT_OVERHEAD_TOKENS = 200
# The answer's room when max_tokens is not set.
DEFAULT_ANSWER_TOKENS = 512
DEFAULT_MAX_CHARS = 4000
# One worked example before the texts: a base model (the embedded Gemma 3 270M) otherwise goes on
# numbering the texts instead of answering (0 of 4 groups right on bench/sem_global.py offline).
_EXAMPLE = ("Texts:\n1. The battery died after one day.\n2. Great screen, but the battery is weak.\n"
            "Task: What do the texts say about the battery.\nAnswer: The battery is weak and runs out fast.\n\n")


def context_budget(options: dict) -> tuple[int, str]:
    """Characters of row text per prompt from the model's context window: (chars, how it was chosen).

    The window less the answer (``max_tokens``, else 512) and the prompt's own text, at 3 characters
    a token; 4000 characters where the window is not known.

    Example:
        >>> context_budget({"model": "gemma-3-270m"})
        (4008, 'gemma-3-270m: context of 2,048 tokens less 512 for the answer and 200 for the prompt')
    """
    from inferframe.models.registry import resolve_model
    from inferframe.providers.registry import provider_class

    ref = resolve_model("sem_agg", options.get("provider"), options.get("model"), kind="generate",
                        options=dict(options))
    ctx = provider_class(ref.spec).context_size(ref.model, ref.caps) if ref.spec is not None else None
    if not ctx:
        return DEFAULT_MAX_CHARS, f"{ref.model}: context not known, {DEFAULT_MAX_CHARS:,} characters"
    answer = options.get("max_tokens") or DEFAULT_ANSWER_TOKENS
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
    what = criterion(t)
    schema = df.schema().to_arrow()
    out_schema = pa.schema([schema.field(k) for k in keys] + [pa.field(column, pa.string())])

    def compute(source: Any) -> tuple[pa.Table, dict]:
        groups: dict = {}
        for r in source.to_arrow().select(list(dict.fromkeys([*keys, *t.columns()]))).to_pylist():
            text = document(t, r)
            if text:
                groups.setdefault(tuple(r[k] for k in keys), []).append(text)
        calls = Calls()

        def summarise(work: list[tuple[int, list[str]]]) -> list[str | None]:
            prompts = []
            for level, texts in work:
                listed = "\n".join(f"{i}. {x}" for i, x in enumerate(texts, 1))
                note = "" if level == 1 else "These are partial answers, each over a part of the texts; combine them into one.\n"
                prompts.append(f"{_EXAMPLE}{note}Texts:\n{listed}\nTask: {what}.\nAnswer:")
            answers = ask_prompts(source, prompts, calls, dict(options, on_error=on_error))
            # A base model may go on with another "Task:"/"Texts:" block after its answer: keep the answer.
            return [None if a is None else a.split("\nTask:")[0].split("\nTexts:")[0].strip() for a in answers]

        answers, levels = reduce_groups(groups, max_chars, summarise)
        data = {k: [g[i] for g in answers] for i, k in enumerate(keys)}
        data[column] = list(answers.values())
        table = pa.table({k: pa.array(v, out_schema.field(k).type) for k, v in data.items()}, schema=out_schema)
        stats = calls.as_dict(levels={(None if not g else g[0] if len(g) == 1 else g): n for g, n in levels.items()},
                              max_chars=max_chars, budget=budget)
        return table, stats

    by = f" group_by={keys}" if keys else ""
    return whole_table(df, out_schema, f"SemAgg {template!r}{by} max_chars={max_chars:,}", compute,
                       lambda n: expected_calls(n, max_chars))


def expected_calls(n: int | None, max_chars: int) -> str:
    """sem_agg's model calls before it runs, in words, for ``n`` input rows (None: not known before the run).

    Example:
        >>> expected_calls(300, 4000)
        'at most 300 calls at the first level for 300 rows (fewer: rows packed up to 4,000 characters a prompt), then about half as many to fold each level'
    """
    if n is None:
        rows = f"one call per pack of rows (up to {max_chars:,} characters a prompt)"
    else:
        rows = f"at most {n:,} calls at the first level for {n:,} rows (fewer: rows packed up to {max_chars:,} characters a prompt)"
    return f"{rows}, then about half as many to fold each level"
