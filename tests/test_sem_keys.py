"""A key given to a whole-table semantic operator never enters its plan's pickle (DESIGN: Security)."""

from __future__ import annotations

import cloudpickle
import pytest

import inferframe as ifr

KEY = "sk-never-in-a-pickle-4242"


@pytest.mark.parametrize("build", [
    lambda df: df.sem_topk("{t} is the best", k=1, provider="openai", model="gpt-5-mini", api_key=KEY),
    lambda df: df.sem_agg("Summarise {t}", provider="openai", model="gpt-5-mini", api_key=KEY),
    lambda df: df.sem_dedup("{t} are the same", provider="openai", model="gpt-5-mini", api_key=KEY),
])
def test_a_key_given_to_the_operator_stays_out_of_the_plan(build):
    """Before: sem_topk's rounds captured api_key= in their closures, in clear in the plan's pickle."""
    df = build(ifr.from_pydict({"t": ["a", "b", "c"]}))
    assert KEY.encode() not in cloudpickle.dumps(df._plan)
