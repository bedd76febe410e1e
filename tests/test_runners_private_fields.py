"""No class of the runners layer rewrites another object's private fields: runtime objects are used
through their public hooks (``AdaptiveLimit.set_ceiling``, ``Breaker.on_trip``, ``RateLimiter.probe_lost``)."""

from __future__ import annotations

import ast
import pathlib

RUNNERS = pathlib.Path(__file__).resolve().parents[1] / "src" / "inferframe" / "runners"


def _private_writes(source: str) -> list[str]:
    """``x._name = ...`` (and ``+=``, annotated, tuple targets, ``setattr(x, "_name", ...)``) where x is not self/cls."""
    found = []

    def check(target: ast.AST, line: int) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                check(t, line)
        elif isinstance(target, ast.Starred):
            check(target.value, line)
        elif isinstance(target, ast.Attribute) and _private(target.attr):
            if not (isinstance(target.value, ast.Name) and target.value.id in ("self", "cls")):
                found.append(f"{line}: {ast.unparse(target)}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                check(t, node.lineno)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            check(node.target, node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            if not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls")):
                found.append(f"{node.lineno}: setattr({ast.unparse(node.args[0])}, {node.args[1].value!r})")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_the_scan_finds_writes_to_another_objects_private_fields():
    source = "lim._probing = False\nself._own = 1\na, b._x = 1, 2\nst.limiter._n += 1\nsetattr(o, '_y', 3)\nx.public = 1\n"
    assert _private_writes(source) == ["1: lim._probing", "3: b._x", "4: st.limiter._n", "5: setattr(o, '_y')"]


def test_no_runner_module_writes_another_objects_private_fields():
    files = sorted(RUNNERS.rglob("*.py"))
    assert any(f.parent.name == "ray_limits" for f in files)  # the coordinator's package is scanned too
    bad = [f"{f.relative_to(RUNNERS)}:{hit}" for f in files for hit in _private_writes(f.read_text())]
    assert bad == [], bad
