"""``sem_join(left, right, predicate)`` as a function, the way ``inferframe.functions`` offers every semantic operator.

The planner lives under ``DataFrame.sem_join`` (above this layer), so the function asks ``left`` to plan it.

Example:
    >>> import inferframe as ifr
    >>> a = ifr.from_pydict({"review": ["great", "awful"]})
    >>> sem_join(a, a, "{review:left} and {review:right} agree", model="gemma-3-270m").column_names
    ['review', 'right.review']
"""

from __future__ import annotations

from typing import Any

from inferframe.errors import PlanError


def sem_join(left: Any, right: Any, predicate: str, **options: Any) -> Any:
    """The pairs of rows of ``left`` and ``right`` for which the model says ``predicate`` holds (``DataFrame.sem_join``).

    Parameters:
        left, right: the DataFrames.
        predicate: a template reading both sides, e.g. ``"{review:left} and {review:right} agree"``.
        **options: as ``DataFrame.sem_join`` (plan, on_property, target_recall, examples, system_message, ...).
    """
    if not hasattr(left, "sem_join"):
        raise PlanError(f"sem_join(): left must be a DataFrame (e.g. ifr.from_pydict(...)), got {type(left).__name__}.")
    return left.sem_join(right, predicate, **options)
