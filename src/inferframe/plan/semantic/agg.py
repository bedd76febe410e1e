"""sem_agg's planner: one answer per group over all its rows, by a hierarchical fold asked level by level.

``sem_agg`` builds a ``WholeTable`` node holding an ``Agg`` (plain data: the arguments, checked, and
the prompt step ``functions.sem_agg`` built); calling it reads nothing. When a job reaches the node,
``run`` collects its input (it needs every row) and folds: per group, the rows' texts (the values of
the columns the template reads), in order, are packed into prompts of at most ``max_chars``
characters; the model answers the instruction for each pack (level 1), and the partial answers are
packed and combined the same way, level by level, until one remains. Every level of every group is
one job. A failed call's part is left out of the next level and counted.

| plan | what runs | model calls |
|---|---|---|
| ``fold`` | packs of rows per prompt, then their answers folded two or more at a time | at most n at level 1 (fewer: rows packed), then about half as many per level |

Example:
    >>> pack(["aaaa", "bb", "cc", "ddddd"], 6)
    [['aaaa', 'bb'], ['cc'], ['ddddd']]
    >>> def initials(prompts):  # a stand-in for the model: the first letter of every text
    ...     return ["".join(x[0] for x in texts) for _, texts in prompts]
    >>> reduce_groups({"g": ["aa", "bb", "cc", "dd", "ee"], "h": ["xy"]}, 4, initials)
    ({'g': 'ae', 'h': 'x'}, {'g': 3, 'h': 1})
    >>> estimate(300)
    599
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import pyarrow as pa

from inferframe.expressions.expression import Expression
from inferframe.plan.logical import LogicalPlan
from inferframe.plan.semantic.rounds import Calls, ask_texts, calls_word, document, finish, known_rows
from inferframe.plan.whole_table import Runtime

# Answers a round of prompts: (level, texts) per prompt -> the answer, or None where it failed.
Summarise = Callable[[list[tuple[int, list[str]]]], list[str | None]]

# One worked example before the texts: a base model (the embedded Gemma 3 270M) otherwise goes on
# numbering the texts instead of answering (0 of 4 groups right on bench/sem_global.py offline).
_EXAMPLE = ("Texts:\n1. The battery died after one day.\n2. Great screen, but the battery is weak.\n"
            "Task: What do the texts say about the battery.\nAnswer: The battery is weak and runs out fast.\n\n")


@dataclasses.dataclass(frozen=True)
class Agg:
    """sem_agg's planner (a ``whole_table.Operator``): what the user asked, checked, and its prompt step.

    Parameters:
        template: the instruction as given (for explain()); ``columns``: the columns it reads; ``what``:
            the instruction with each field written as its column's name.
        keys: the group columns; ``column``: the answer column; ``out_schema``: the result's columns.
        max_chars: characters of row text per prompt; ``budget``: how they were chosen (for sem_stats).
        summarise: the prompt step over column ``q`` (the prompt text).
    """

    template: str
    columns: tuple
    what: str
    keys: tuple
    column: str
    out_schema: pa.Schema
    max_chars: int
    budget: str
    summarise: Expression = dataclasses.field(repr=False)

    @property
    def note(self) -> str:
        by = f" group_by={list(self.keys)}" if self.keys else ""
        return f"SemAgg {self.template!r}{by} max_chars={self.max_chars:,}"

    def calls(self, rows: int | None) -> str:
        return expected_calls(rows, self.max_chars)

    def line(self, input: LogicalPlan, stats: dict | None) -> str:
        if stats is not None:
            return f"{self.note} -> fold: {stats['calls']:,} calls in {stats['jobs']} levels"
        rows = known_rows(input)
        return f"{self.note} -> fold {calls_word(estimate(rows))} (at most)"

    def run(self, runtime: Runtime, input: LogicalPlan) -> tuple[pa.Table, dict]:
        """One row per group (in order of first appearance) with its answer, and the ``sem_stats``."""
        keys = list(self.keys)
        groups: dict = {}
        for r in runtime.table(input).select(list(dict.fromkeys([*keys, *self.columns]))).to_pylist():
            text = document(self.columns, r)
            if text:
                groups.setdefault(tuple(r[k] for k in keys), []).append(text)
        calls = Calls()

        def summarise(work: list[tuple[int, list[str]]]) -> list[str | None]:
            prompts = []
            for level, texts in work:
                listed = "\n".join(f"{i}. {x}" for i, x in enumerate(texts, 1))
                note = "" if level == 1 else "These are partial answers, each over a part of the texts; combine them into one.\n"
                prompts.append(f"{_EXAMPLE}{note}Texts:\n{listed}\nTask: {self.what}.\nAnswer:")
            answers = ask_texts(runtime, prompts, self.summarise, calls)
            # A base model may go on with another "Task:"/"Texts:" block after its answer: keep the answer.
            return [None if a is None else a.split("\nTask:")[0].split("\nTexts:")[0].strip() for a in answers]

        answers, levels = reduce_groups(groups, self.max_chars, summarise)
        data = {k: [g[i] for g in answers] for i, k in enumerate(keys)}
        data[self.column] = list(answers.values())
        out = self.out_schema
        table = pa.table({k: pa.array(v, out.field(k).type) for k, v in data.items()}, schema=out)
        stats = calls.as_dict(levels={(None if not g else g[0] if len(g) == 1 else g): n for g, n in levels.items()},
                              max_chars=self.max_chars, budget=self.budget)
        return table, finish(self.note, stats, calls)


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


def estimate(n: int | None) -> int | None:
    """The most calls a fold of ``n`` rows asks (one pack per row, then halving): 2n - 1; None where n is unknown."""
    return None if n is None else max(0, 2 * n - 1)


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
