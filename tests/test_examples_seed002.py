"""The seed 002 examples run as scripts, offline, and print sensible results."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"



def _run(script: str) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", INFERFRAME_PROGRESS="0")
    proc = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True,
                          env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.timeout(300)
def test_sentiment_pipeline_example_labels_reviews():
    out = _run("sentiment_pipeline.py")
    # The seed's three reviews, in the table df.show() draws (one label per row, in order).
    shown = re.findall(r"│ (POSITIVE|NEGATIVE)\s*│", out)
    assert shown[:2] == ["POSITIVE", "NEGATIVE"], out
    assert len(shown) == 3 and "(3 rows)" in out
    labels = dict(reversed(line.split(None, 1)) for line in out.splitlines()
                  if line.startswith(("POSITIVE ", "NEGATIVE ")))
    assert labels == {
        "Absolutely love it, would buy again": "POSITIVE",
        "Stopped working after two days": "NEGATIVE",
        "Great value for the price": "POSITIVE",
        "I regret buying this": "NEGATIVE",
        "Five stars, exceeded my expectations": "POSITIVE",
        "Cheap plastic that broke immediately": "NEGATIVE",
    }


@pytest.mark.timeout(300)
def test_text_embedder_example_runs_in_a_worker_process():
    out = _run("text_embedder.py")
    assert "(3 rows)" in out and "list<float>" in out
    assert "64 documents embedded in a worker process: 384 dimensions each" in out
    # Only the topic word differs between documents: the nearest neighbour shares it.
    assert re.search(r"nearest to 'Note 0 about cats': 'Note \d+ about cats'", out), out
