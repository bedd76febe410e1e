"""One name for each option, in Python, SQL and the CLI (issue 43 item 3).

The names are ``inferframe.functions._vocabulary``'s tables. An old name still works for one release,
with a warning (a DeprecationWarning in Python and SQL, a ``warning:`` line in the CLI); the old and
the new name together is a PlanError; and nothing inside the package uses an old name.
"""

import ast
import pathlib

import inferframe
from inferframe.functions._vocabulary import ALIASES, CLI_ALIASES, SQL_ALIASES

SRC = pathlib.Path(inferframe.__file__).parent
VOCABULARY = SRC / "functions" / "_vocabulary.py"
# Keywords of other libraries' APIs that happen to spell an old name: argparse's add_argument(choices=...).
FOREIGN_KEYWORDS = {("add_argument", "choices")}


def _callee(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def old_names_used(path: pathlib.Path, root: pathlib.Path = SRC.parent) -> list[str]:
    """``file:line: name`` for each old Python name as a parameter or keyword, and each old CLI flag or SQL name."""
    tree = ast.parse(path.read_text(), str(path))
    strings = set(CLI_ALIASES.values()) | set(SQL_ALIASES)
    hits = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.Call):
            names = [k.arg for k in node.keywords if (_callee(node), k.arg) not in FOREIGN_KEYWORDS]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in strings:
            names = [node.value]
        hits += [f"{path.relative_to(root)}:{node.lineno}: {n}" for n in names if n in ALIASES or n in strings]
    return hits


def test_the_scan_finds_an_old_name_as_a_parameter_a_keyword_and_an_old_flag(tmp_path):
    """The scan below can fail: each kind of use it looks for is found in a file that has it."""
    f = tmp_path / "probe.py"
    f.write_text("def f(per_label=1):\n    return g(instructions='x')\n"
                 "FLAG = '--system'\nSQL = 'fail_on_error'\nOK = p.add_argument('--x', choices=[1])\n")
    assert sorted(old_names_used(f, tmp_path)) == ["probe.py:1: per_label", "probe.py:2: instructions",
                                                   "probe.py:3: --system", "probe.py:4: fail_on_error"]


def test_no_old_option_name_is_used_inside_the_package():
    """Before: per_label in load_examples and split_examples, choices in the providers' format_fields, score_column and
    rank_column in DataFrame.nearest, fail_on_error read in sql_ai_functions, --system and --choices in the CLI."""
    hits = [h for p in sorted(SRC.rglob("*.py")) if p != VOCABULARY for h in old_names_used(p)]
    assert not hits, "old option names used inside the package (use the names of functions/_vocabulary.py):\n" \
                     + "\n".join(hits)
