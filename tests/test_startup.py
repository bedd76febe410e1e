"""What a bare ``import inferframe`` costs: every CLI call, Ray worker and test subprocess pays it."""

import json
import subprocess
import sys

# Heavy modules the package imports where they are used, never at import: pandas alone was 0.17 s of
# a 0.5 s start (through pyarrow.dataset), and the others pull in far more.
NOT_AT_IMPORT = ("pandas", "pyarrow.dataset", "torch", "ray", "pyspark", "openai", "sentence_transformers",
                 # OpenTelemetry: imported only once a job finds a provider configured (observe.otel).
                 "opentelemetry")


def test_import_inferframe_leaves_the_heavy_modules_unimported():
    code = f"import sys, json, inferframe; print(json.dumps([m for m in {NOT_AT_IMPORT!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
