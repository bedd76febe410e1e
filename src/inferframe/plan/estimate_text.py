"""The text of an estimate (``DataFrame.estimate()``'s dict): a line per AI call and the total, for ``explain`` and SQL's EXPLAIN.

Example:
    >>> estimate_lines({"calls": [{"call": "prompt[m]", "rows": 3, "input_tokens": 30, "cost_usd": 0.001}],
    ...                 "input_tokens": 30, "cost_usd": 0.001})
    ['prompt[m]: 3 calls, 30 input tokens, $0.0010', 'total: 30 input tokens, $0.0010']
"""

from __future__ import annotations


def estimate_lines(found: dict) -> list[str]:
    """One line per AI call of an ``estimate_plan`` result, and the total."""
    lines = []
    for c in found["calls"]:
        if c.get("rows") is None:
            lines.append(f"{c['call']}: {c.get('note', 'not known before the run')}")
            continue
        note = f" ({c['note']})" if c.get("note") else ""
        lines.append(f"{c['call']}: {c['rows']:,} calls, {c.get('input_tokens') or 0:,} input tokens, "
                     f"{_dollars(c.get('cost_usd'))}{note}")
    unknown = any(c.get("rows") is None for c in found["calls"])
    tokens = f"at least {found['input_tokens']:,} input tokens (the calls above without a count: known after the run)" \
        if unknown else f"{found['input_tokens']:,} input tokens"
    lines.append(f"total: {tokens}, {_dollars(found['cost_usd'])}")
    return lines


def _dollars(cost: float | None) -> str:
    return "price unknown" if cost is None else f"${cost:.4f}"
