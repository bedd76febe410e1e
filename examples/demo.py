"""The main demo: classify bundled product reviews with the embedded local model.

Run it with the README's demo command. It reads examples/data/reviews.csv,
asks the packaged Gemma 3 270M model (served by a llama.cpp server that
inferframe starts and stops itself; no key, no network) for the sentiment of
every review with a few-shot prompt, writes Parquet atomically, and shows the
results next to the star ratings.

    python examples/demo.py            # all 300 reviews
    python examples/demo.py --rows 50  # a quicker run
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

import inferframe as ifr
from inferframe import col
from inferframe.functions import format, prompt

HERE = pathlib.Path(__file__).parent

# The packaged model is a base model, not a chat model: show it the pattern to continue.
FEW_SHOT = (
    "Classify the sentiment of each product review as positive, negative or neutral.\n\n"
    "Review: Absolutely love it, works perfectly.\nSentiment: positive\n\n"
    "Review: Terrible quality, it broke after two days.\nSentiment: negative\n\n"
    "Review: It is okay, nothing special.\nSentiment: neutral\n\n"
    "Review: Very disappointed, returning it.\nSentiment: negative\n\n"
    "Review: Great value, exceeded my expectations.\nSentiment: positive\n\n"
    "Review: Does the job, no more, no less.\nSentiment: neutral\n\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="only the first N reviews")
    args = parser.parse_args()

    df = ifr.read_csv(HERE / "data" / "reviews.csv")
    if args.rows:
        df = df.limit(args.rows)
    df = df.with_column(
        "sentiment",
        prompt(format("Review: {}\nSentiment:", col("review")), system_message=FEW_SHOT,
               max_tokens=3, stop=["\n"], temperature=0),
    ).with_column("sentiment", col("sentiment").str.strip().str.lower())

    out = pathlib.Path(tempfile.mkdtemp(prefix="inferframe-demo-")) / "reviews_scored"
    started = time.perf_counter()
    df.write_parquet(str(out))
    elapsed = time.perf_counter() - started

    scored = ifr.read_parquet(str(out))
    print("\nReviews with the model's sentiment:")
    scored.select("stars", "review", "sentiment").show(8, max_width=60)

    expected = (col("stars") >= 4).if_else("positive", (col("stars") <= 2).if_else("negative", "neutral"))
    summary = (
        scored.with_column("agrees", (col("sentiment") == expected).cast(ifr.DataType.int64()))
        .groupby("sentiment")
        .agg(col("id").count().alias("reviews"), col("agrees").mean().alias("agrees_with_stars"))
        .sort("reviews", desc=True)
    )
    print("\nSentiment counts, and how often they agree with the star rating:")
    summary.show()

    run = ifr.last_run()[0]
    print(
        f"\n{run['rows_done']} reviews in {elapsed:.1f} s ({run['rows_done'] / elapsed:.1f} rows/s), "
        f"{run['input_tokens'] + run['output_tokens']:,} tokens, {run['cache_hits']} answers from the response cache "
        f"(run it again: all of them), {run['errors']} errors, cost ${run['cost']:.2f} (local model).\n"
        f"Parquet written to {out}"
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt as exc:
        # Ctrl-C: inferframe's one line (what the cache kept, how to resume) instead of a traceback.
        print(f"\n{exc or 'interrupted'}", file=sys.stderr)
        raise SystemExit(130) from None
