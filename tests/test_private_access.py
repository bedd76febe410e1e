"""No module uses another module's private attribute: the CLI's `cache clear` once reached into
ResponseCache._db for VACUUM; ResponseCache.clear() gives the space back itself now."""

import ast
import pathlib

import inferframe as ifr

ROOT = pathlib.Path(ifr.__file__).parent


def _attributes(path):
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)]


def _private_uses(paths, attr=None, root=ROOT):
    """``x._name`` where ``x`` is not self/cls (``attr``: only that name), as "file:line: expression"."""
    found = []
    for path in paths:
        for node in _attributes(path):
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            if (node.attr == attr if attr else private) and not (
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_reads_another_objects_db():
    assert _private_uses(ROOT.rglob("*.py"), attr="_db") == []


def test_the_check_finds_a_private_db(tmp_path):
    bad = tmp_path / "probe.py"
    bad.write_text("def vacuum(cache):\n    cache._db.execute('VACUUM')\n    self._db.close()\n")
    assert _private_uses([bad], attr="_db", root=tmp_path) == ["probe.py:2: cache._db"]


def test_the_command_line_uses_no_private_name_of_another_module():
    paths = list((ROOT / "cli").rglob("*.py"))
    assert len(paths) >= 8, "the command line is a package of modules, one per command group"
    assert _private_uses(paths) == []
    imported = [f"{p.relative_to(ROOT)}: {a.name}" for p in paths for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.ImportFrom) for a in n.names if a.name.startswith("_")]
    assert imported == []
