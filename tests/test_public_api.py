import ast
import importlib
import pathlib
import pkgutil
import types

import pytest

import inferframe as ifr

ROOT = pathlib.Path(ifr.__file__).parent
ROOT_PACKAGE = "inferframe"

# DESIGN.md's layers, top imports bottom; its "knows nothing of" column holds for every row. Where the table's
# row order cannot be an import order the dependency decides (the table is the design, this list the order):
# - plan above expressions: the logical plan holds expression nodes and its rules rewrite them (table: expressions
#   first), and every operator that evaluates an expression imports expressions/evaluate;
# - runners above execution, plan, ai, runtime, providers and io (table: next to last): a runner runs the
#   physical operators and implements the coordinator the runtime's shared limits go through; it still
#   imports nothing of the user's API (dataframe, functions, udf);
# - execution above plan (table: plan above execution, since plan does physical planning) until the one
#   physical planner (issue 24 item 2) leaves the executor no plan node to read; then the two swap;
# - in-process models above the AI layer whose result columns and vector helpers they use;
# - observe (counters, progress, run history, evaluation's scoring) is the floor every layer reports to.
# Top-level modules that are layers of their own: session (settings resolved into plans) sits under
# the AI layer and above runtime/providers.
# "cli" (the command line) and "__main__" (python -m inferframe) sit above everything: they use the public API.
# "inferframe" is the root package (inferframe/__init__.py, the public API's names): only the command line sits
# above it, so `import inferframe` or `from inferframe import X` inside any layer fails the layer test.
LAYERS = ["__main__", "cli", "doctor", ROOT_PACKAGE, "spark", "dataframe", "sql", "functions", "udf", "runners", "execution", "plan", "expressions", "models", "ai", "session",
          "runtime", "providers", "structured", "media", "io", "observe"]
# Modules every layer may use: errors, types and small value classes with no inferframe imports of a layer.
BASE = {"errors", "datatype", "series", "file"}


def _modules():
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: pathlib.Path, pkg: str) -> list[str]:
    """Every module ``path`` imports, function-local imports included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1]) + ("." + base if base else "")
            found += [f"{base}.{a.name}" for a in node.names] + [base]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    return [m for m in found if m == ROOT_PACKAGE or m.startswith(ROOT_PACKAGE + ".")]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT_PACKAGE if module == ROOT_PACKAGE else None


def _public_packages():
    """inferframe and every subpackage whose __init__ declares ``__all__``."""
    out = [ifr]
    for info in pkgutil.iter_modules(ifr.__path__, prefix="inferframe."):
        if info.ispkg:
            module = importlib.import_module(info.name)
            if hasattr(module, "__all__"):
                out.append(module)
    return out


def test_all_is_pinned():
    assert sorted(ifr.__all__) == sorted([
        "ArgumentTypeError", "BatchAPIError", "BudgetExceededError", "BudgetExceededWarning", "ColumnNotFoundError", "DataFrame", "DataType", "DownloadError", "DriftWarning", "PromptLayoutHint", "ErrorKind",
        "Evaluation", "evaluate",
        "ExecutionError", "Expression", "ExpressionTypeError", "File", "GroupedDataFrame", "InferframeError", "LocalServerError",
        "MediaError", "OutputExistsError", "PathNotFoundError", "PathNotWritableError", "PlanError", "RenamedOptionWarning", "RowFailed", "Schema", "SchemaMismatchError", "Series", "ServiceError", "SparkEnvironmentError", "UDFError", "UnreadableFileError",
        "LowInformationWarning", "SemanticFailuresWarning", "cls", "col", "last_run", "from_arrow", "from_glob_path", "from_pandas", "from_pydict", "from_pylist", "from_ray_dataset", "func", "functions",
        "lit", "method", "read_csv", "read_json", "read_parquet", "report", "run_sample", "runs", "set_cache", "set_history",
        "set_prices", "set_provider", "set_runner_native", "set_runner_ray", "set_runner_spark", "set_tracing",
        "from_duckdb", "from_huggingface", "from_polars", "read_lance", "sql", "from_spark",
    ])
    for name in ifr.__all__:
        assert getattr(ifr, name) is not None


@pytest.mark.parametrize("package", _public_packages(), ids=lambda m: m.__name__)
def test_all_names_every_public_member(package):
    """As httpx's test_exported_members: ``__all__`` lists every public name of the package and nothing else.

    Submodules become attributes of their package when imported, so a module counts only where ``__all__``
    names it on purpose (``inferframe.functions``).
    """
    exported = package.__all__
    assert len(exported) == len(set(exported)), sorted(n for n in exported if exported.count(n) > 1)
    missing = [name for name in exported if not hasattr(package, name)]
    assert not missing, f"{package.__name__}.__all__ names what it does not define: {missing}"
    public = {
        name for name, value in vars(package).items()
        if not name.startswith("_") and (not isinstance(value, types.ModuleType) or name in exported)
    }
    assert sorted(public - set(exported)) == [], f"public in {package.__name__} but not in __all__"


def test_public_packages_are_found():
    names = {m.__name__ for m in _public_packages()}
    assert {"inferframe", "inferframe.functions", "inferframe.observe", "inferframe.dataframe"} <= names, names


def test_every_package_is_a_layer_with_an_init():
    packages = {p.parent.name for p in ROOT.glob("*/*.py")} - {"simulator"}
    assert packages <= set(LAYERS), packages - set(LAYERS)
    for pkg in {p.parent for p in ROOT.rglob("*.py")}:
        assert (pkg / "__init__.py").exists(), f"{pkg} has no __init__.py"
    top = {p.stem for p in ROOT.glob("*.py")} - {"__init__"}
    assert top <= set(LAYERS) | BASE, top - set(LAYERS) - BASE


def _layer_violations(modules: dict[str, pathlib.Path]) -> list[str]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for name, path in modules.items():
        me = _layer(name)
        if me not in rank:
            continue
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for target in _imports(path, pkg):
            other = _layer(target)
            if other in rank and rank[other] < rank[me]:
                bad.append(f"{name} imports {target}")
    return bad


def test_layers_import_one_way():
    """A lower layer never imports a higher one (function-local imports included)."""
    bad = _layer_violations(_modules())
    assert not bad, bad


@pytest.mark.parametrize("line", ["import inferframe", "import inferframe as ifr", "from inferframe import col",
                                  "from inferframe.dataframe import DataFrame", "from .. import functions"])
def test_layer_check_catches_an_upward_import(tmp_path, line):
    """The root package and the user API rank above the ai layer: importing them from ai is a violation."""
    module = tmp_path / "probe.py"
    module.write_text(f"def f():\n    {line}\n")
    assert _layer_violations({"inferframe.ai.probe": module}), line
    assert not _layer_violations({"inferframe.cli.probe": module}), line


def test_base_modules_import_no_layer():
    for stem in BASE:
        for target in _imports(ROOT / f"{stem}.py", "inferframe"):
            assert _layer(target) in BASE, f"{stem} imports {target}"


def test_no_import_cycles():
    """The module graph, function-local imports included, has no cycle."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        deps = set()
        for target in _imports(path, pkg):
            while target and target not in modules:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            # A package's __init__ re-exports its children; importing a child runs it first, not a cycle.
            if target and target != name and not name.startswith(target + "."):
                deps.add(target)
        graph[name] = deps
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_executor_never_sees_http_and_runtime_knows_no_wire_format():
    for path in (ROOT / "execution").rglob("*.py"):
        text = path.read_text()
        assert "inferframe.providers" not in text and "inferframe.runtime" not in text and "aiohttp" not in text, path
    for path in (ROOT / "runtime").rglob("*.py"):
        text = path.read_text()
        assert "pyarrow" not in text, path
        # Neutral records only: no concrete provider, no header names, no Batch API paths.
        assert "x-ratelimit" not in text and "/v1/" not in text and "custom_id" not in text, path
        for target in _imports(path, "inferframe.runtime"):
            if _layer(target) == "providers":
                assert target.startswith("inferframe.providers.interface"), f"{path.name} imports {target}"


def test_no_provider_name_is_branched_on_outside_its_module():
    import re

    names = ["openai", "local", "vllm", "lm_studio", "ollama", "openrouter", "gemma-3-270m"]
    pattern = re.compile(r"""(==|!=|\bin\b|startswith\()\s*\(?["'](%s)["']""" % "|".join(map(re.escape, names)))
    bad = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("providers", "simulator", "io"):  # io: "local" is a filesystem's name there
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                bad.append(f"{rel}:{i}: {line.strip()}")
    assert not bad, bad


def test_the_readme_layer_table_follows_the_layer_order():
    """README's "How it works" table lists the layers top to bottom in the order this test enforces (issue 32 item 6)."""
    import re

    readme = (ROOT.parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| layer | job |"):].split("\n\n")[0]
    rows = [re.findall(r"`([a-z_]+)`", line.split("|")[1]) for line in table.splitlines()[2:]]
    listed = [name for row in rows for name in row]
    assert listed and set(listed) <= set(LAYERS), listed
    assert listed == sorted(listed, key=LAYERS.index), listed
    missing = {l for l in LAYERS if l not in (ROOT_PACKAGE, "__main__", "doctor")} - set(listed)
    assert not missing, f"layers the README table leaves out: {sorted(missing)}"
