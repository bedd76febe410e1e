"""In-process models load torch with OpenMP's waiting threads asleep (models/loading.py ``offline``), unless the user chose.

libgomp reports what it read when ``OMP_DISPLAY_ENV=VERBOSE`` (on stderr, as torch loads it): the test loads
the packaged MiniLM through ``embed_text`` in a fresh process and reads how long a waiting thread spins,
``GOMP_SPINCOUNT`` (with no policy set: 300,000 spins, though the report's policy line says PASSIVE too;
PASSIVE: 0; ACTIVE: 30,000,000,000).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

JOB = """
import os
import inferframe as ifr
from inferframe import col
from inferframe.functions import embed_text
ifr.from_pydict({"t": ["a short text"]}).with_column("v", embed_text(col("t"))).to_arrow()
print("after the load:", os.environ.get("OMP_WAIT_POLICY"))
import sys
print("sentence-transformers imported:", "sentence_transformers" in sys.modules)
"""


def _spins(**env: str) -> tuple[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    ran = subprocess.run([sys.executable, "-c", JOB], env={**base, "OMP_DISPLAY_ENV": "VERBOSE", **env},
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    # The packaged MiniLM only mean-pools its encoder: it runs through transformers, and sentence-transformers'
    # import (2-3 CPU-s of every process that loaded the model) is not paid (models/text.py MeanPooledSentenceTransformer).
    assert "sentence-transformers imported: False" in ran.stdout
    read = [line.split("=", 1)[1].strip() for line in ran.stderr.splitlines() if "GOMP_SPINCOUNT" in line]
    return read[0] if read else "(not reported)", ran.stdout.splitlines()[0].strip()


@pytest.mark.timeout(600)
def test_the_embedding_model_loads_with_sleeping_openmp_threads_and_leaves_the_environment_as_it_was():
    policy, after = _spins()
    assert policy == "'0'"  # no spinning: a waiting thread sleeps
    assert after == "after the load: None"  # processes started later get the machine's default


@pytest.mark.timeout(600)
def test_a_policy_the_user_set_is_kept():
    policy, after = _spins(OMP_WAIT_POLICY="ACTIVE")
    assert policy == "'30000000000'" and after == "after the load: ACTIVE"
