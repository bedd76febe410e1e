import inferframe as ifr


def test_all_is_pinned():
    assert sorted(ifr.__all__) == sorted([
        "ColumnNotFoundError", "DataFrame", "DataType", "ExecutionError", "Expression", "ExpressionTypeError",
        "File", "GroupedDataFrame", "InferframeError", "PlanError", "Schema", "Series", "UDFError", "cls", "col",
        "from_arrow", "from_glob_path", "from_pandas", "from_pydict", "from_pylist", "func", "functions", "lit",
        "method", "read_csv", "read_json", "read_parquet", "set_cache", "set_prices", "set_provider", "set_runner_native",
    ])
    for name in ifr.__all__:
        assert getattr(ifr, name) is not None


def test_layers_import_one_way():
    """A lower layer never imports a higher one (DESIGN.md: layers)."""
    import ast
    import pathlib

    order = ["dataframe", "functions", "models", "udf", "runners", "execution", "plan", "expressions", "providers", "runtime", "io"]
    root = pathlib.Path(ifr.__file__).parent
    bad = []
    for i, layer in enumerate(order):
        higher = set(order[:i])
        for path in (root / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                mods = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    mods = [node.module]
                elif isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                for m in mods:
                    parts = m.split(".")
                    if parts[0] == "inferframe" and len(parts) > 1 and parts[1] in higher:
                        bad.append(f"{path.relative_to(root)} imports {m}")
    assert not bad, bad


def test_executor_never_sees_http_and_runtime_has_no_arrow():
    import pathlib

    root = pathlib.Path(ifr.__file__).parent
    for path in (root / "execution").rglob("*.py"):
        text = path.read_text()
        assert "inferframe.providers" not in text and "inferframe.runtime" not in text and "aiohttp" not in text, path
    for path in (root / "runtime").rglob("*.py"):
        assert "pyarrow" not in path.read_text(), path
