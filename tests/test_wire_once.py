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
    real = _spec.PyWalker.__init__

    def counted(self, *a, **k):
        parses.append(1)
        real(self, *a, **k)

    monkeypatch.setattr(_spec.PyWalker, "__init__", counted)
    expr = prompt(col("t"), return_format=Review, model="gemma-3-270m")
    assert len(parses) == 1
    from inferframe.plan.ai_nodes import ai_call_of

    assert isinstance(ai_call_of(expr._node).udf.call.config.return_format, Spec)


RUNTIME = AI.parent / "runtime"
# What a request carries beside its body (issue 32 item 3): nobody after the wire format reads them back out of it.
_BODY_READERS = {"prompt_text", "estimate_tokens"}
_BOUND_NAMES = {"max_tokens", "max_output_tokens", "max_completion_tokens", "n_predict"}


def test_the_runtime_reads_no_prompt_or_bound_out_of_a_body():
    """Before: the limiter's estimate read max_tokens under four names, the prompt text was pulled back out 3 times."""
    bad = []
    for p in RUNTIME.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in _BODY_READERS:
                bad.append(f"{p.name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Constant) and node.value in _BOUND_NAMES:
                bad.append(f"{p.name}:{node.lineno} {node.value!r}")
    assert not bad, bad


def test_ai_asks_the_wire_format_for_a_prompt_once_per_request():
    """Only ai/requests.py asks for the prompt text (when a request is built); the operators read ``Request.prompt``."""
    askers = {p.name for p in AI.glob("*.py") for node in ast.walk(ast.parse(p.read_text()))
              if isinstance(node, ast.Attribute) and node.attr in _BODY_READERS}
    assert askers <= {"requests.py"}, askers
