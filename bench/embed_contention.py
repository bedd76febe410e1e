"""In-process embeddings when another process holds a core: torch's OpenMP threads asleep vs spinning.

inferframe loads in-process models with ``OMP_WAIT_POLICY=PASSIVE`` (models/loading.py ``offline``) unless the
user set it: waiting OpenMP threads sleep. The default policy spins, and a spinning thread stalls the others
whenever the OS gives its core to another process (a second model worker, a Ray or Spark node's other tasks).
Each case runs in a fresh process (libgomp reads the policy once, as torch loads): 1,100 texts through the
packaged MiniLM, quiet and beside one busy process, with inferframe's default and with ``ACTIVE`` (what
inferframe used before, torch's default). Prints wall seconds and the process's CPU seconds.

    .venv/bin/python bench/embed_contention.py [--rows 1100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

JOB = """
import json, os, resource, sys, time
import inferframe as ifr
from inferframe import col
from inferframe.functions import embed_text
texts = [f"The cat sat on the warm windowsill and purred. (note {i})" for i in range(int(sys.argv[1]))]
ifr.from_pydict({"t": texts[:10]}).with_column("v", embed_text(col("t"))).to_arrow()  # the load, in neither figure
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
ifr.from_pydict({"t": texts}).with_column("v", embed_text(col("t"))).to_arrow()
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime}))
"""


def run(rows: int, policy: str | None, busy: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(INFERFRAME_PROGRESS="0", INFERFRAME_CACHE_DIR=tempfile.mkdtemp(prefix="embed-contention-"))
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        out = subprocess.run([sys.executable, "-c", JOB, str(rows)], env=env, capture_output=True, text=True,
                             timeout=900, check=True)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1100)
    args = parser.parse_args()
    print(f"{args.rows} texts, packaged MiniLM, {os.cpu_count()} CPUs; wall s / CPU s of the embedding process")
    found = {}
    for busy in (False, True):
        for name, policy in (("inferframe (PASSIVE)", None), ("spinning (ACTIVE)", "ACTIVE")):
            found[(busy, name)] = r = run(args.rows, policy, busy)
            where = "beside one busy process" if busy else "quiet"
            print(f"  {where:24s} {name:22s} {r['wall']:6.2f} s wall  {r['cpu']:6.2f} CPU s")
    for busy in (False, True):
        a, b = found[(busy, "spinning (ACTIVE)")], found[(busy, "inferframe (PASSIVE)")]
        print(f"  {'beside a busy process' if busy else 'quiet'}: spinning/asleep = {a['wall'] / b['wall']:.2f}x wall, "
              f"{a['cpu'] / b['cpu']:.2f}x CPU")


if __name__ == "__main__":
    main()
