"""Size limits on the source: no module over 500 lines, no function over 80 lines, and no module
importing another module's leading-underscore name (a name another module needs is public)."""

import ast
import pathlib

import inferframe as ifr

ROOT = pathlib.Path(ifr.__file__).parent
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _sources():
    return sorted(ROOT.rglob("*.py"))


def _module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def long_modules(paths=None, root=ROOT):
    return [f"{p.relative_to(root)}: {n}" for p in (paths or _sources())
            if (n := p.read_text().count("\n")) > MAX_MODULE_LINES]


def long_functions(paths=None, root=ROOT):
    found = []
    for path in paths or _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {node.name} ({size})")
    return found


def private_imports(paths=None, root=ROOT):
    """``from inferframe.x import _name`` in a module other than ``inferframe.x``."""
    found = []
    for path in paths or _sources():
        own = _module_name(path) if root == ROOT else "inferframe." + path.stem
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module != own and node.level == 0:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {node.module}.{alias.name}")
    return found


def test_no_module_over_500_lines():
    assert long_modules() == []


def test_no_function_over_80_lines():
    assert long_functions() == []


def test_no_module_imports_another_modules_private_name():
    assert private_imports() == []


def test_the_checks_find_what_they_look_for(tmp_path):
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 501)
    small = tmp_path / "small.py"
    small.write_text("x = 1\n" * 500)
    assert long_modules([big, small], root=tmp_path) == ["big.py: 501"]
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * 80 + "\n\ndef g():\n" + "    x = 1\n" * 79)
    assert long_functions([long], root=tmp_path) == ["long.py:1: f (81)"]
    uses = tmp_path / "uses.py"
    uses.write_text("from inferframe.a import _hidden, shown, __version__\n"
                    "from inferframe.uses import _own\n"
                    "def f():\n    from inferframe.b import _late\n")
    assert private_imports([uses], root=tmp_path) == ["uses.py:1: inferframe.a._hidden",
                                                       "uses.py:4: inferframe.b._late"]
