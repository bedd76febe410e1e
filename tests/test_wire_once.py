"""Issue 32 item 2: ai/ sees the provider interface only; the registry is consulted once per AI function call at plan time."""

from __future__ import annotations

import ast
import pathlib

import pytest

from inferframe import col
from inferframe.functions import classify_text, prompt
from inferframe.providers import registry

AI = pathlib.Path(__file__).resolve().parents[1] / "src" / "inferframe" / "ai"
# What ai/ may import from providers: the interface (protocols, request/outcome types), the spec (plain
# data carrying its resolved wire format) and the tokenizer helpers; no wire format, concrete provider or registry.
ALLOWED = {"inferframe.providers.interface", "inferframe.providers.spec", "inferframe.providers.tokens"}


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names if node.module == "inferframe.providers")
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_ai_imports_only_the_provider_interface():
    bad = {f"{p.name}: {m}" for p in AI.glob("*.py") for m in _imports(p)
           if m.startswith("inferframe.providers") and m not in ALLOWED}
    assert not bad, sorted(bad)


@pytest.fixture
def lookups(monkeypatch):
    seen = []
    real = registry.REGISTRY.get

    def counted(name):
        seen.append(name)
        return real(name)

    monkeypatch.setattr(registry.REGISTRY, "get", counted)
    return seen


@pytest.mark.parametrize("build", [
    lambda: prompt(col("t"), model="gemma-3-270m", max_tokens=4),
    lambda: prompt(col("t"), provider="vllm", base_url="http://127.0.0.1:9/v1", model="m", return_format=["a", "b"]),
    lambda: classify_text(col("t"), ["yes", "no"], method="generate", model="gemma-3-270m"),
])
def test_the_registry_is_consulted_once_per_call(lookups, build):
    """Before: 7 lookups for one prompt() (resolve, check_ready, capabilities, base_url_for, provider_class, ...)."""
    build()
    assert len(lookups) == 1, lookups


def test_a_return_format_is_parsed_once_per_call(monkeypatch):
    """Before: json_schema_for / arrow_type_for / Validator each parsed the raw return_format again (4 times)."""
    import pydantic

    from inferframe.structured import Spec, _spec

    class Review(pydantic.BaseModel):
        stars: int
        note: str | None = None

    parses = []
    real = _spec._PyWalker.__init__

    def counted(self, *a, **k):
        parses.append(1)
        real(self, *a, **k)

    monkeypatch.setattr(_spec._PyWalker, "__init__", counted)
    expr = prompt(col("t"), return_format=Review, model="gemma-3-270m")
    assert len(parses) == 1
    from inferframe.plan.ai_nodes import ai_call_of

    assert isinstance(ai_call_of(expr._node).udf.call.config.return_format, Spec)
