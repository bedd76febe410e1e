"""One ``max_cost``/``max_tokens_budget`` for every worker of a job: each worker spends what the coordinator granted it.

A worker's ``runtime.budget.Budget`` reserves each request's worst case against its own allowance;
when a request does not fit, it asks the coordinator (the Ray actor, or the Spark driver's job
service) for more, and the coordinator never grants more in all than the cap. What a worker was
granted and did not spend stays with it (its next requests use it), so the workers together spend
at most the cap; near the end a worker may hold back a row that another worker's unspent grant
would have paid for (a cap, not a quota).

Example:
    >>> ledger = BudgetLedger()
    >>> ledger.grant("k|prompt[m]", 0.01, None, 0.004, 0), ledger.grant("k|prompt[m]", 0.01, None, 0.008, 0)
    ([0.004, 0], [0.006, 0])
    >>> ledger.grant("k|prompt[m]", 0.01, None, 0.001, 0)   # the cap is granted: nothing more
    [0.0, 0]
"""

from __future__ import annotations

from typing import Any


class BudgetLedger:
    """The coordinator's side: what each call's workers were granted, never more than its cap."""

    def __init__(self) -> None:
        self.granted: dict[str, list] = {}

    def grant(self, key: str, max_cost: float | None, max_tokens: int | None, cost: float, tokens: int) -> list:
        """Grant up to (``cost``, ``tokens``) of the call ``key``'s caps; returns what was granted."""
        given = self.granted.setdefault(key, [0.0, 0])
        c = max(0.0, min(cost, max_cost - given[0])) if max_cost is not None else cost
        t = max(0, min(tokens, max_tokens - given[1])) if max_tokens is not None else tokens
        given[0] += c
        given[1] += t
        return [c, t]


class BudgetGrants:
    """A worker's side: asks the coordinator for more of a call's budget (one call per grant).

    Parameters:
        link: the coordinator's link (``ActorLink`` on Ray, ``LeaseLink`` on Spark): ``await link.call(method, *args)``.
        key: the endpoint+model key of the limits it belongs to.
    """

    def __init__(self, link: Any, key: str) -> None:
        self.link, self.key = link, key

    async def take(self, label: str, max_cost: float | None, max_tokens: int | None, cost: float,
                   tokens: int) -> tuple[float, int]:
        """Up to (``cost``, ``tokens``) more for the call ``label``; less (or nothing) once the cap is granted."""
        got = await self.link.call("grant_budget", f"{self.key}|{label}|{max_cost}|{max_tokens}", max_cost,
                                   max_tokens, cost, tokens)
        return float(got[0]), int(got[1])
