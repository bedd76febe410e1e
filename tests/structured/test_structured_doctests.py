"""The examples in the structured modules' docstrings run and stay true."""

import doctest

import pytest

import inferframe.structured as structured
from inferframe.structured import _spec, arrow_types, from_python, from_schema, json_schema, nodes, validate


@pytest.mark.parametrize("module", [structured, _spec, nodes, from_python, from_schema, arrow_types, json_schema, validate],
                         ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_only_allowed_imports():
    """The module stays pure: pyarrow, pydantic, the stdlib and inferframe.errors only."""
    import ast
    import pathlib
    import sys

    root = pathlib.Path(structured.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            else:
                continue
            for mod in mods:
                top = mod.split(".")[0]
                if top == "inferframe":
                    assert mod == "inferframe.errors" or mod.startswith("inferframe.structured"), (path, mod)
                else:
                    assert top in {"pyarrow", "pydantic", "__future__"} or top in sys.stdlib_module_names, (path, mod)
