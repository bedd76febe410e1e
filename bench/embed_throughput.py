"""In-process embedding throughput: inferframe's embed_text vs SentenceTransformer.encode on the same texts.

Both sides run the packaged all-MiniLM-L6-v2 on the CPU with the same settings (encode batch 32,
normalised vectors). Each measurement runs in a fresh Python process, so each peak RSS is its own;
the two modes alternate for ``--rounds`` rounds in one run of this script.

Both sides import torch and sentence-transformers before the clock starts (a process pays that
once, whichever way it calls the model; the import time is printed), and both include building the
model in their time:

- direct: time ``SentenceTransformer(path)`` then ``model.encode(texts)``;
- inferframe: time ``from_pydict(...).with_column("v", embed_text(col("text"))).to_arrow()``,
  which builds the model instance on the worker and feeds it batches.

Usage:
    .venv/bin/python bench/embed_throughput.py                 # 4,000 texts, 3 rounds
    .venv/bin/python bench/embed_throughput.py --texts 1000 --rounds 1

Target: inferframe at least 90% of direct encode throughput.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PeakRSS, emit_result, now, run_child, table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def make_texts(n: int) -> list[str]:
    """``n`` distinct review-like texts (the demo's reviews, varied), 10-60 words each."""
    with open(ROOT / "examples" / "data" / "reviews.csv") as f:
        reviews = [r["review"] for r in csv.DictReader(f)]
    out = []
    for i in range(n):
        a, b = reviews[i % len(reviews)], reviews[(i * 7 + 3) % len(reviews)]
        out.append(f"{a} {b} Order {i}." if i % 3 else f"{a} Order {i}.")
    return out


def child(mode: str, n: int, batch_size: int) -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    texts = make_texts(n)
    with PeakRSS() as rss:
        t_import = now()
        import torch  # noqa: F401
        from sentence_transformers import SentenceTransformer

        from inferframe.models.loading import packaged_minilm

        import_s = now() - t_import
        if mode == "direct":
            t0 = now()
            model = SentenceTransformer(str(packaged_minilm()), device="cpu")
            vectors = model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                                   show_progress_bar=False)
            elapsed = now() - t0
            shape = list(vectors.shape)
        else:
            import inferframe as ifr
            from inferframe.functions import embed_text

            df = ifr.from_pydict({"text": texts}).with_column("v", embed_text(ifr.col("text"), batch_size=batch_size))
            t0 = now()
            out = df.to_arrow()
            elapsed = now() - t0
            shape = [out.num_rows, out.schema.field("v").type.list_size]
    emit_result({"mode": mode, "seconds": elapsed, "import_s": import_s, "texts_per_s": n / elapsed, "peak_rss_mib": rss.peak_mib,
                 "shape": shape})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=1024, help="rows per embed_text batch")
    ap.add_argument("--child", choices=["direct", "inferframe"])
    args = ap.parse_args()
    if args.child:
        child(args.child, args.texts, args.batch_size)
        return
    print(f"CPUs: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}; {args.texts} texts, {args.rounds} rounds")
    results: dict[str, list[dict]] = {"direct": [], "inferframe": []}
    for r in range(args.rounds):
        for mode in ("direct", "inferframe"):
            res = run_child([__file__, "--child", mode, "--texts", str(args.texts), "--batch-size", str(args.batch_size)])
            results[mode].append(res)
            print(f"round {r + 1} {mode:10s} {res['texts_per_s']:8.1f} texts/s  {res['seconds']:6.2f} s  "
                  f"peak RSS {res['peak_rss_mib']:.0f} MiB  shape {res['shape']}  (imports {res['import_s']:.1f} s, untimed)",
                  flush=True)
    rows = []
    for mode, rs in results.items():
        tps = [x["texts_per_s"] for x in rs]
        rows.append([mode, f"{statistics.median(tps):.1f}", f"{max(tps):.1f}",
                     f"{max(x['peak_rss_mib'] for x in rs):.0f}"])
    print()
    print(table(["mode", "median texts/s", "best texts/s", "peak RSS MiB"], rows, "lrrr"))
    med = {m: statistics.median(x["texts_per_s"] for x in rs) for m, rs in results.items()}
    pairs = [i["texts_per_s"] / d["texts_per_s"] for d, i in zip(results["direct"], results["inferframe"])]
    print(f"\ninferframe/direct: {med['inferframe'] / med['direct']:.2f}x of median throughput "
          f"(per round: {', '.join(f'{p:.2f}' for p in pairs)}); target >= 0.90")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
