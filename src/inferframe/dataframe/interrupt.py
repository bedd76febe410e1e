"""What Ctrl-C during a job with AI calls tells the user: what was kept, and how to go on.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import prompt
    >>> df = ifr.from_pydict({"q": ["hi"]}).with_column("a", prompt(ifr.col("q"), model="gemma-3-270m"))
    >>> interrupted_message(df._plan, [{"rows_done": 3, "errors": 1, "not_run": 0}]).split(" (")[0]
    'interrupted: 2 answered rows are kept in the response cache'
"""

from __future__ import annotations

from inferframe.plan import logical as lp


def interrupted_message(plan: lp.LogicalPlan, runs: list[dict]) -> str:
    """One line: the rows answered so far and where they are kept, or that nothing was kept; how to resume.

    Parameters:
        plan: the interrupted job's plan (its AI calls name the cache and its policy).
        runs: ``last_run()`` of the job: each AI call's totals.
    """
    from inferframe.plan.inspect import ai_calls

    answered = sum(max(0, r.get("rows_done", 0) - r.get("errors", 0) - r.get("not_run", 0)) for r in runs)
    caches = set()
    for _, node in ai_calls(plan):
        runtime = getattr(node.udf.call.config, "runtime", None) if node.udf.call is not None else None
        if runtime is not None:
            caches.add((runtime.cache_policy.writes, runtime.cache_dir))
    if not any(writes for writes, _ in caches):
        return (f"interrupted: {answered} rows were answered, but the response cache is off, so a rerun asks again; "
                "nothing was written.")
    where = ", ".join(sorted(d for writes, d in caches if writes and d)) or "the response cache"
    rows = "1 answered row is" if answered == 1 else f"{answered} answered rows are"
    return (f"interrupted: {rows} kept in the response cache ({where}); nothing was written. "
            "Run the same job again to resume: kept answers are not sent or paid again.")
