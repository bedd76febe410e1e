"""What a provider can do is asked one way: its protocols, through ``supports``/``require`` (issue 43 item 5).

Capabilities came both from ``getattr`` probing (``providers.protocols._ask``, behind knows_model,
context_size, reads_images, embedding_size, format_fields, check_options, ...; ``prefix_lanes``,
``routed``; ``ai.requests.prompt_of``) and from the runtime-checkable protocols. The probing is gone:
a provider that implements part of a protocol is not asked it (the protocol is the contract).
"""

import ast
import pathlib
from typing import Protocol

import inferframe as ifr
from inferframe.providers import protocols

ROOT = pathlib.Path(ifr.__file__).parent


def protocol_methods() -> set[str]:
    """The method names of every capability protocol (``RequestFormat``, ``ModelCatalog``, ``BatchAPI``, ...)."""
    names = set()
    for value in vars(protocols).values():
        if isinstance(value, type) and issubclass(value, Protocol) and value is not Protocol:
            names |= {k for k in vars(value) if not k.startswith("_") and callable(getattr(value, k))}
    return names


def probes(root: pathlib.Path = ROOT, methods: set[str] | None = None) -> list[str]:
    """``getattr(x, "<method>")`` / ``hasattr(x, "<method>")`` of a protocol's method, or a helper named ``_ask``."""
    methods = protocol_methods() if methods is None else methods
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in methods):
                found.append(f"{rel}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "_ask" and rel.startswith("providers/"):
                found.append(f"{rel}:{node.lineno} def _ask")
    return found


def test_no_capability_is_probed_with_getattr():
    """Before: protocols.py's _ask and its 9 callers, prefix_lanes/routed and ai/requests.prompt_of probed."""
    assert protocol_methods() >= {"request_body", "prompt_text", "knows_model", "context_size", "check_options",
                                  "prefix_lanes", "routed", "batch_lines", "tokenize"}
    assert probes() == []


def test_the_check_finds_a_probe(tmp_path):
    (tmp_path / "m.py").write_text("def f(wire):\n    return getattr(wire, 'context_size', None), hasattr(wire, 'name')\n")
    assert probes(tmp_path) == ["m.py:2 getattr(..., 'context_size')"]
