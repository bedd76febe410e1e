"""What prefix-aware scheduling costs per row: the runtime with and without it at 100,000 rows, one run.

The runtime sends 100,000 chat requests to a provider that answers at once (no HTTP, no
server), so what is measured is the runtime's own CPU per row: admission, the in-flight bound,
result building, and (when on) the prefix scheduler: the prompt text, the sort into groups,
one turn per row. Rows go in windows of 4,096 (the AI stage's default ``prefix_window``).
Two workloads:

  distinct  rows share only a 300-character system message (a classification job): the
            scheduler sorts and finds no groups worth keeping together.
  prefix    8 shared documents of 8,000 characters (about 2,000 tokens), interleaved, then a
            short question: the scheduler's sorts compare long shared prefixes.

Printed: microseconds per row off and on (the least of ``--repeat`` runs each, interleaved,
as other load on a 2-core machine only adds), their difference (the scheduling itself), and
on/off. ``--profile`` prints the scheduler's own functions' share (cProfile) for the prefix case.

Usage:
    .venv/bin/python bench/prefix_schedule_cost.py
    .venv/bin/python bench/prefix_schedule_cost.py --rows 100000 --window 4096
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sim_util import machine_line  # noqa: E402
from _util import table  # noqa: E402

from inferframe.providers import openai_format as wire  # noqa: E402
from inferframe.providers.interface import BaseTransport, Outcome, Request, Usage  # noqa: E402
from inferframe.runtime import InferenceRuntime, RuntimeConfig  # noqa: E402


class Instant(BaseTransport):
    """Answers every chat request at once."""

    name = service = cache_identity = "instant"

    async def send(self, request: Request) -> Outcome:
        return Outcome(value="ok", usage=Usage(10, 1))


def bodies(kind: str, n: int) -> list[dict]:
    if kind == "distinct":
        system = "Classify the review as positive or negative. " * 7
        return [{"messages": [{"role": "system", "content": system},
                              {"role": "user", "content": f"Review {i * 7919 % n}: the parcel came late but works."}]}
                for i in range(n)]
    docs = [f"Document {g}: " + " ".join(f"word{g}-{k}" for k in range(1000))[:8000] for g in range(8)]
    return [{"messages": [{"role": "user", "content": docs[i % 8] + f"\nQuestion {i}: what is it about?"}]}
            for i in range(n)]


async def run(reqs: list[Request], ordered: bool, window: int) -> float:
    rt = InferenceRuntime(Instant(), RuntimeConfig(cache_policy="off", max_concurrency=64, adaptive=False,
                                                   prefix_order=ordered), model="m")
    t0 = time.process_time()
    for k in range(0, len(reqs), window):
        out = await rt.run_many(reqs[k:k + window])
        assert all(r.value == "ok" for r in out)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--window", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    print(machine_line())
    lines = []
    for kind in ("distinct", "prefix"):
        # Each prompt kept beside its body, as ai.requests builds a request (the scheduler reads it there).
        reqs = [Request("chat", b, 20, wire.prompt_text(b)) for b in bodies(kind, args.rows)]
        asyncio.run(run(reqs[:2000], True, args.window))  # warm-up
        offs, ons = [], []
        for _ in range(args.repeat):
            gc.collect()
            offs.append(asyncio.run(run(reqs, False, args.window)))
            gc.collect()
            ons.append(asyncio.run(run(reqs, True, args.window)))
        off, on = min(offs), min(ons)
        per = 1e6 / args.rows
        lines.append([kind, f"{args.rows:,}", f"{off * per:.1f}", f"{on * per:.1f}", f"{(on - off) * per:.1f}",
                      f"{on / off:.2f}x"])
        if args.profile and kind == "prefix":
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.enable()
            asyncio.run(run(reqs[:20_000], True, args.window))
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats("scheduler|prefix|prompt_text", 12)
    print(table(["workload", "rows", "off CPU us/row", "on CPU us/row", "scheduling us/row", "on / off"], lines))


if __name__ == "__main__":
    main()
