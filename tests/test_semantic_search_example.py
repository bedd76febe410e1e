"""The semantic search example runs end to end offline and finds the reviews a reader would expect."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "semantic_search.py"


def test_semantic_search_example(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(tmp_path / "db")], capture_output=True,
                          text=True, timeout=600, env={**__import__("os").environ, "INFERFRAME_PROGRESS": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "vec: embedding<float, 384>" in out
    nearest = out.split("DataFrame.nearest")[1]
    broke, slow, value = (nearest.split(q)[1].splitlines()[0] for q in
                          ("the item broke after a few days", "delivery took far too long", "excellent value, very happy"))
    assert "broke" in broke and "shipping was slow" in slow and "Excellent value" in value
    assert "300 rows" in out and (tmp_path / "db" / "reviews.lance").is_dir()
