"""Each value of a call is derived once, where the expression is built (issue: "each value read once")."""

import collections

import pytest
from pydantic import BaseModel

import inferframe.structured as structured
from inferframe import col
from inferframe.functions import prompt


class Ticket(BaseModel):
    label: str
    urgency: int


@pytest.fixture
def calls(monkeypatch):
    """How many times prompt() asks structured for the answer's Arrow type and JSON schema."""
    seen = collections.Counter()
    for name in ("arrow_type_for", "json_schema_for"):
        real = getattr(structured, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            seen[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(structured, name, counted)
    return seen


@pytest.mark.parametrize("where", [dict(provider="openai", model="gpt-5-mini", api_key="sk-test"),  # strict schema
                                   dict(model="gemma-3-270m", max_tokens=40)])  # a grammar, fitted to max_tokens
def test_prompt_derives_the_answers_type_and_schema_once(calls, where):
    prompt(col("text"), return_format=Ticket, **where)
    assert calls == {"arrow_type_for": 1, "json_schema_for": 1}


def test_building_a_transport_reads_the_registry_once(monkeypatch):
    """The spec an expression holds carries its wire format and capabilities: building its transport
    where it sends asks the registry only for the URL and key variables (it asked 4 times)."""
    from inferframe.providers import registry
    from inferframe.providers.spec import ProviderSpec

    spec = registry.resolved(ProviderSpec("openai", base_url="http://127.0.0.1:9/v1"))
    gets = []
    real = registry.REGISTRY.get
    monkeypatch.setattr(registry.REGISTRY, "get", lambda name: (gets.append(name), real(name))[1])
    transport = spec.connect()
    assert gets == ["openai"] and transport.capabilities == spec.caps


def test_sem_join_resolves_its_model_once(monkeypatch):
    """sem_join builds several calls of one model (the checks, the property, the proposal): the registry is read
    for it once (it was read 4 times)."""
    import inferframe as ifr
    from inferframe.providers import registry

    left, right = ifr.from_pydict({"x": ["cat", "dog"]}), ifr.from_pydict({"y": ["animal", "pet"]})
    gets = []
    real = registry.REGISTRY.get
    monkeypatch.setattr(registry.REGISTRY, "get", lambda name: (gets.append(name), real(name))[1])
    joined = left.sem_join(right, "{x:left} is a {y:right}", provider="openai", model="gpt-5-mini", api_key="sk-test")
    assert gets == ["openai"]
    assert "sk-test" not in repr(joined._plan.__getstate__() if hasattr(joined._plan, "__getstate__") else vars(joined._plan))
