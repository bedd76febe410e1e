"""A fresh process's first vector from the packaged MiniLM: sentence-transformers' runner against transformers'.

``embed_text`` with the default model runs ``MeanPooledSentenceTransformer`` (the model only mean-pools its
encoder, so transformers gives the same vectors) where it ran ``SentenceTransformerEmbedder``, which imports
sentence-transformers (and scikit-learn with it). Every process that embeds pays the start once: a script, a
CLI call, a worker process, a Ray or Spark worker. Each run is a fresh interpreter that imports inferframe,
builds the runner and embeds two texts; the two runners alternate for ``--rounds`` rounds. Prints wall and CPU
seconds per run (the child's own ``getrusage``), the medians and their ratio, and the largest difference
between the two runners' vectors.

Usage:
    .venv/bin/python bench/embed_start.py             # 3 rounds: about 1 min
    .venv/bin/python bench/embed_start.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, resource, sys, time
started = time.perf_counter()
from inferframe.models.loading import model_files
from inferframe.models import text
runner = getattr(text, sys.argv[1])(str(model_files(None)), device="cpu")
vectors = runner._encode(["a first text to embed", "and a second one"])
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": time.perf_counter() - started, "cpu": usage.ru_utime + usage.ru_stime,
                  "st": "sentence_transformers" in sys.modules, "vectors": vectors.tolist()}))
"""

RUNNERS = ("SentenceTransformerEmbedder", "MeanPooledSentenceTransformer")


def run(runner: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, runner], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import numpy as np

    seen: dict[str, list[dict]] = {r: [] for r in RUNNERS}
    for i in range(args.rounds):
        for runner in RUNNERS if i % 2 == 0 else RUNNERS[::-1]:
            got = run(runner)
            seen[runner].append(got)
            print(f"  round {i + 1} {runner:31s} {got['wall']:5.2f} s wall {got['cpu']:5.2f} CPU-s "
                  f"(sentence_transformers imported: {got['st']})")
    wall = {r: statistics.median(g["wall"] for g in seen[r]) for r in RUNNERS}
    cpu = {r: statistics.median(g["cpu"] for g in seen[r]) for r in RUNNERS}
    diff = float(np.abs(np.array(seen[RUNNERS[0]][0]["vectors"]) - np.array(seen[RUNNERS[1]][0]["vectors"])).max())
    old, new = RUNNERS
    print(f"median: {old} {wall[old]:.2f} s / {cpu[old]:.2f} CPU-s; {new} {wall[new]:.2f} s / {cpu[new]:.2f} CPU-s")
    print(f"{new} starts {wall[old] / wall[new]:.2f}x faster, {cpu[old] - cpu[new]:.2f} CPU-s less a process; "
          f"largest difference between their vectors {diff:.1e}")


if __name__ == "__main__":
    main()
