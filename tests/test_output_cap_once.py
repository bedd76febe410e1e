"""The answer's token cap is read once (issue 43 item 4, "each value read once").

``max_tokens`` and its aliases ``max_output_tokens`` / ``max_completion_tokens`` were read or reshaped
in 12 places. Now one step (``ai.options``: ``parse_options`` / ``answer_cap``) turns the user's options
into the call's config, whose ``max_output_tokens`` is the one typed field every later reader takes:
the wire formats (which still spell the field per endpoint: they write it, never read it), the local
provider, sem_join, sem_agg and the budget (through ``Request.max_output_tokens``).
"""

import ast
import pathlib

import inferframe as ifr

ROOT = pathlib.Path(ifr.__file__).parent
NAMES = {"max_tokens", "max_output_tokens", "max_completion_tokens"}
CONFIG_STEP = "ai/options.py"
# Readers of something that is not a user's options: a built wire body, or the server's side.
BODY_READERS = {
    ("providers/openai_format.py", "estimate_tokens"),  # the token estimate of a body built elsewhere
    ("providers/local.py", "send"), ("providers/local.py", "_BODY_CAPS"),  # a cap given in extra_body=
    ("providers/interface.py", "OPENAI_BODY_OPTIONS"),  # the names a server takes, for "unknown option"
    ("cli/output.py", "print_estimate"),  # a column of estimate_call's record
}
SERVER_SIDE = "simulator/"  # the simulated server reads the request as a server does


def _named(node) -> bool:
    return isinstance(node, ast.Constant) and node.value in NAMES


def reads_in(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, scope, how) of each read of a cap's raw name: ``d["max_tokens"]``, ``d.get/pop("max_tokens")``,
    ``"max_tokens" in d``, or a list of its names (how the aliases were looked up)."""
    found = []

    def visit(node, scope):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and scope == "<module>":
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            scope = next((t.id for t in targets if isinstance(t, ast.Name)), scope)
            for child in ast.iter_child_nodes(node):
                visit(child, scope)
            return
        how = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _named(node.slice):
            how = f"[{node.slice.value!r}]"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args and _named(node.args[0])):
            how = f".{node.func.attr}({node.args[0].value!r})"
        elif (isinstance(node, ast.Compare) and _named(node.left)
              and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)):
            how = f"{node.left.value!r} in"
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and sum(map(_named, node.elts)) >= 2:
            how = "a list of its names"
        if how:
            found.append((node.lineno, scope, how))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(tree, "<module>")
    return found


def raw_cap_reads(root: pathlib.Path = ROOT) -> list[str]:
    """Every read of the cap's raw names outside the config step and the body readers."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == CONFIG_STEP or rel.startswith(SERVER_SIDE):
            continue
        for line, scope, how in reads_in(ast.parse(path.read_text())):
            if (rel, scope) not in BODY_READERS:
                bad.append(f"{rel}:{line} ({scope}) reads {how}")
    return bad


def test_only_the_config_step_reads_the_answer_cap_from_options():
    """Before: ai/config.py, functions/ai.py, _sem_join_api.py, openai_format.request_body, openai.py and
    protocols.py (OUTPUT_CAPS) each read it again."""
    assert raw_cap_reads() == []


def test_the_check_finds_a_read(tmp_path):
    """The check can fail: each way of reading the cap is found."""
    (tmp_path / "m.py").write_text(
        "def f(opts, body):\n"
        "    a = opts.get('max_tokens')\n"
        "    b = body['max_output_tokens']\n"
        "    c = 'max_completion_tokens' in opts\n"
        "    return ('max_tokens', 'max_output_tokens')\n"
        "def g(body, cap):\n"
        "    body['max_tokens'] = cap  # writing the wire's name is not reading it\n")
    assert [r.split(" reads ")[1] for r in raw_cap_reads(tmp_path)] == [
        ".get('max_tokens')", "['max_output_tokens']", "'max_completion_tokens' in", "a list of its names"]
