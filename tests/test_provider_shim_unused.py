"""The deprecated ``Provider`` base (every hook with a default) is kept for plugins for one release; the package
itself names providers by their protocols (``Transport`` and those of ``providers/protocols.py``)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "inferframe"
HOME = {"providers/interface.py"}  # where it is defined (and said to be deprecated)


def test_no_module_of_the_package_imports_the_deprecated_provider_base():
    users = []
    for path in SRC.rglob("*.py"):
        where = path.relative_to(SRC).as_posix()
        if where in HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("inferframe.providers")
                    and any(a.name == "Provider" for a in node.names)):
                users.append(f"{where}:{node.lineno}")
    assert users == [], f"annotate with Transport (providers.interface) or a protocol instead: {users}"


def test_the_grammar_is_imported_only_by_the_provider_that_speaks_it():
    """llama.cpp's GBNF is the local provider's wire format; what other layers need of a schema's answer
    size (the default max_tokens, a schema fitted to the user's) is in ``structured.answer_budget``."""
    users = []
    for path in SRC.rglob("*.py"):
        where = path.relative_to(SRC).as_posix()
        if where.startswith("providers/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "") == "inferframe.providers.gbnf":
                users.append(f"{where}:{node.lineno}")
    assert users == [], users
