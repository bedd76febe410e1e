"""A provider plugin whose import raises disables only itself (issue 42).

A real installed plugin: a dist-info with an ``inferframe.providers`` entry point, on the path of a child
process, pointing at a module whose import raises. Asking for it is a PlanError that names the plugin and why;
every other provider, the embedded local model included, still works.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent("""
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    from inferframe.providers.registry import REGISTRY

    print("NAMES", REGISTRY.names())
    df = ifr.from_pydict({"q": ["Say hi."]})
    try:
        df.with_column("a", prompt(col("q"), provider="broken_llm", model="m"))
    except ifr.PlanError as e:
        print("ASKED:", e)
    out = df.with_column("a", prompt(col("q"), max_tokens=4, temperature=0)).to_pydict()  # the embedded model
    print("LOCAL", out["a_error"], bool(out["a"][0]))
""")


@pytest.mark.timeout(600)
def test_a_plugin_whose_import_raises_disables_only_itself(tmp_path):
    (tmp_path / "broken_llm_plugin.py").write_text(
        'raise ImportError("broken_llm_plugin needs libbroken 2.0, found 1.4")\n')
    dist = tmp_path / "broken_llm_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-llm-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[inferframe.providers]\nbroken_llm = broken_llm_plugin:register\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # the offline default: the local model
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=560)
    assert done.returncode == 0, done.stderr[-3000:]
    names = next(line for line in done.stdout.splitlines() if line.startswith("NAMES"))
    assert "'openai'" in names and "'local'" in names and "broken_llm" not in names
    asked = next(line for line in done.stdout.splitlines() if line.startswith("ASKED:"))
    assert "'broken_llm'" in asked and "broken_llm = broken_llm_plugin:register" in asked
    assert "ImportError: broken_llm_plugin needs libbroken 2.0, found 1.4" in asked
    assert "LOCAL [None] True" in done.stdout, done.stdout + done.stderr[-3000:]
