"""Prefix-aware scheduling on the real embedded llama.cpp server: sorted vs arrival order, one run.

The workload (issue 14, benchmark b): 8 shared prefixes of 250 words (a passage per group), 64
prompts interleaved (prompt i uses passage i % 8), each a short question after its passage, on
the packaged Gemma 3 270M served by llama.cpp with 4 slots. Each order runs on a freshly started
server, so neither the slots' KV caches nor the server's RAM prompt cache carry over from the
other order. ``--rounds`` alternates the orders (arrival, sorted, arrival, sorted, ...) so drift of
a busy machine shows.

Arrival order is ``prefix_order=False``: llama.cpp then picks a slot per request itself (by prompt
similarity among idle slots). Sorted is the default: each passage's rows go to one slot
(``id_slot``, ``cache_prompt``), the slots working on different passages side by side.

Printed per run: wall seconds, rows/s, the share of prompt tokens llama.cpp served from its cache
(``usage.prompt_tokens_details.cached_tokens``, summed by last_run()), and at the end the ratio of
median rows/s, sorted / arrival. Target: sorted is never slower (ratio >= 1.0).

Usage:
    .venv/bin/python bench/prefix_local_slots.py
    .venv/bin/python bench/prefix_local_slots.py --rounds 2 --rows 64
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ["INFERFRAME_CACHE"] = "off"  # every row must reach the server
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sim_util import machine_line  # noqa: E402
from _util import table  # noqa: E402

import inferframe as ifr  # noqa: E402
from inferframe.functions import prompt  # noqa: E402
from inferframe.observe.progress import last_run  # noqa: E402
from inferframe.providers.local_server import get_local_server, stop_local_server  # noqa: E402

SLOTS = 4
WORDS = ("river stone market winter garden engine letter window harbor forest signal copper lantern valley "
         "meadow thunder candle bridge orchard pepper silver basket canyon feather island marble ribbon "
         "saddle tunnel velvet").split()


def prompts(n: int, groups: int, words: int) -> list[str]:
    passages = []
    for g in range(groups):
        text = " ".join(WORDS[(g * 11 + k * (g + 3)) % len(WORDS)] for k in range(words))
        passages.append(f"Passage {g}: {text}.\n\n")
    return [passages[i % groups] + f"Question {i}: does the passage mention the word {WORDS[i % len(WORDS)]}? Answer:"
            for i in range(n)]


def run(texts: list[str], ordered: bool) -> dict:
    stop_local_server()
    get_local_server(SLOTS)  # a fresh server: empty slots, empty RAM prompt cache
    df = ifr.from_pydict({"q": texts}).with_column(
        "a", prompt(ifr.col("q"), provider="local", max_tokens=4, temperature=0, prefix_order=ordered))
    t0 = time.perf_counter()
    out = df.to_arrow(progress=False)
    wall = time.perf_counter() - t0
    stats = last_run()[0]
    return {"wall": wall, "answered": out.column("a").null_count == 0, "cached": stats.get("cached_tokens", 0),
            "input": stats["input_tokens"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--words", type=int, default=250)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each order, alternating")
    args = ap.parse_args()
    texts = prompts(args.rows, args.groups, args.words)
    print(machine_line())
    print(f"{args.rows} prompts over {args.groups} interleaved passages of {args.words} words; embedded llama.cpp, "
          f"{SLOTS} slots, restarted before every run")
    run(texts[:8], True)  # warm-up: imports, the model file in the page cache
    results: dict[str, list[dict]] = {"arrival": [], "sorted": []}
    lines = []
    for k in range(args.rounds):
        for name, ordered in (("arrival", False), ("sorted", True)):
            r = run(texts, ordered)
            results[name].append(r)
            lines.append([name, k + 1, args.rows, f"{r['wall']:.2f}", f"{args.rows / r['wall']:.2f}",
                          f"{r['cached'] / max(1, r['input']):.1%}", "yes" if r["answered"] else "NO"])
    stop_local_server()
    print(table(["order", "round", "rows", "wall s", "rows/s", "prompt tokens cached", "all answered"], lines))
    med = {name: statistics.median(args.rows / r["wall"] for r in rs) for name, rs in results.items()}
    ratio = med["sorted"] / med["arrival"]
    print(f"median rows/s: arrival {med['arrival']:.2f}, sorted {med['sorted']:.2f}; sorted / arrival: {ratio:.2f}x "
          f"(target >= 1.0): {'PASS' if ratio >= 1.0 else 'FAIL'}")


if __name__ == "__main__":
    main()
