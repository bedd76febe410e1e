"""The working column names of sem_join's plans, and the one way a side's row is written as text.

Example:
    >>> side_text(("t",), {"t": "good"}), side_text(("a", "b"), {"a": 1, "b": 2})
    ('good', 'a: 1\\nb: 2')
"""

from __future__ import annotations

DEFAULT_K = 10  # the k a blocking plan is estimated with before its sample has chosen one
KEY, ONE, CHECK = "__sem_join_key", "__sem_join_one", "__sem_join_check"
LVEC, RVEC, SCORE, RANK = "__sem_join_lvec", "__sem_join_rvec", "__sem_join_score", "__sem_join_rank"
ROW, RROW = "__sem_join_row", "__sem_join_rrow"
ANSWER, CANDIDATES = "__sem_join_answer", "__sem_join_candidates"


def side_text(columns: tuple, row: dict) -> str:
    """A side's row as a request shows it (as ``functions.sem_join.side_message`` writes it): its one column's value,
    or ``name: value`` lines for several."""
    if len(columns) == 1:
        return str(row[columns[0]])
    return "\n".join(f"{c}: {row[c]}" for c in columns)
