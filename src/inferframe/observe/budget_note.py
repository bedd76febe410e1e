"""What a job that reached its ``max_cost``/``max_tokens_budget`` says at its end: one ``BudgetExceededWarning``.

The message gives what was spent against the cap, how many rows were not run, and how to go on:
a cap that answers every row (suggested from what the answered rows cost), and the response cache
that keeps what was paid, so the rerun pays only for the rest.

Example:
    >>> import warnings
    >>> run = {"label": "prompt[m]", "cost": 0.00097, "input_tokens": 900, "output_tokens": 400, "rows_done": 600,
    ...        "not_run": 570, "cache_hits": 0, "budget": {"max_cost": 0.001, "worst_cost": 0.0001}}
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warn_budget([run])
    >>> print(w[0].message)
    prompt[m] reached its budget: $0.000970 and 1,300 tokens spent against max_cost=0.001; 570 of 600 rows were not run (their error kind is 'budget'). A request is sent only while its worst case (prompt and max_tokens at the model's price) fits in what is left. To go on, raise the cap (e.g. max_cost=0.022; --max-cost on the command line) and run again: the response cache keeps what was paid, so the rerun pays only for the rest.
"""

from __future__ import annotations

import math

from inferframe.errors import BudgetExceededWarning, warn_user


def warn_budget(runs: list[dict]) -> None:
    """One warning at the end of a job whose calls held rows back for their budget (none when no row was held)."""
    held = [r for r in runs if r.get("not_run") and r.get("budget")]
    if not held:
        return
    text = " ".join(
        f"{r['label']} reached its budget: {spent_text(r)} against {cap_text(r['budget'])}; {r['not_run']:,} of "
        f"{r.get('rows_done') or 0:,} rows were not run (their error kind is 'budget')." for r in held)
    warn_user(f"{text} A request is sent only while its worst case (prompt and max_tokens at the model's price) fits "
              f"in what is left. {go_on(held[0])}", BudgetExceededWarning)


def cap_text(budget: dict) -> str:
    """The caps of a call, as set: ``max_cost=0.001`` and/or ``max_tokens_budget=3000``."""
    caps = [f"max_cost={plain(budget['max_cost'])}"] if budget.get("max_cost") is not None else []
    caps += [f"max_tokens_budget={budget['max_tokens_budget']}"] if budget.get("max_tokens_budget") is not None else []
    return " and ".join(caps) or "its budget"


def spent_text(run: dict) -> str:
    """What a call spent: dollars and tokens."""
    return f"${run.get('cost') or 0.0:.6f} and {(run.get('input_tokens') or 0) + (run.get('output_tokens') or 0):,} tokens spent"


def plain(x: float) -> str:
    """A dollar figure without an exponent.

    Example:
        >>> plain(0.001), plain(3.2e-05), plain(1.5)
        ('0.001', '0.000032', '1.5')
    """
    return f"{x:.10f}".rstrip("0").rstrip(".") or "0"


def _round_up(x: float) -> float:
    """``x`` rounded up to two significant figures (a cap to suggest).

    Example:
        >>> _round_up(0.0229), _round_up(3120.0), _round_up(0.0)
        (0.023, 3200.0, 0.0)
    """
    if x <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return round(math.ceil(x / step - 1e-9) * step, 12)


def go_on(run: dict) -> str:
    """How to go on past a budget: the cap that would answer every row (spent per answered row, times the rows, and
    one request's worst case), max_tokens where a request had none, and the cache that keeps what was paid."""
    b = run.get("budget") or {}
    rows = run.get("rows_done") or 0
    answered = max(0, rows - (run.get("not_run") or 0) - (run.get("cache_hits") or 0))
    hint = []
    for name, used, worst, fmt in (
            ("max_cost", run.get("cost") or 0.0, b.get("worst_cost") or 0.0, plain),
            ("max_tokens_budget", (run.get("input_tokens") or 0) + (run.get("output_tokens") or 0),
             b.get("worst_tokens") or 0, lambda x: f"{x:.0f}")):
        if b.get(name) is None:
            continue
        whole = used / answered * rows * 1.1 if answered else 0.0
        cli = "; --max-cost on the command line" if name == "max_cost" else ""
        hint.append(f"{name}={fmt(_round_up(max(whole + worst, b[name] * 2)))}{cli}")
    text = f"To go on, raise the cap (e.g. {', '.join(hint)}) and run again: the response cache keeps what was paid, " \
           "so the rerun pays only for the rest."
    if b.get("unbounded"):
        text += (f" A request with no max_tokens is reserved at the model's output limit ({b['unbounded']:,} tokens): "
                 "set max_tokens to reserve less.")
    return text
