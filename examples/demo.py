"""The main demo: a small review-analysis pipeline over the bundled reviews file.

Run it with the README's demo command. It reads examples/data/reviews.csv,
scores every review with a Python UDF, aggregates per product, writes Parquet
atomically and shows the tables.
"""

from __future__ import annotations

import pathlib
import re
import tempfile

import inferframe as ifr
from inferframe import col
from inferframe.functions import format

HERE = pathlib.Path(__file__).parent
POSITIVE = {"love", "great", "best", "fantastic", "excellent", "happy", "wonderful", "superb", "adores", "premium"}
NEGATIVE = {"broke", "terrible", "worst", "waste", "disappointed", "damaged", "awful", "scam", "fragile", "cheap"}


@ifr.func
def keyword_sentiment(review: str) -> str:
    """A deliberately simple scorer; the AI demo replaces it with a model."""
    words = set(re.findall(r"[a-z]+", review.lower()))
    score = len(words & POSITIVE) - len(words & NEGATIVE)
    return "positive" if score > 0 else "negative" if score < 0 else "neutral"


def main() -> None:
    df = ifr.read_csv(HERE / "data" / "reviews.csv")
    df = df.with_column("sentiment", keyword_sentiment(col("review")))
    df = df.with_column("summary", format("{} ({} stars): {}", col("product"), col("stars"), col("sentiment")))
    print("Scored reviews:")
    df.select("id", "review", "sentiment", "summary").show(6, max_width=40)

    per_product = (
        df.groupby("product")
        .agg(col("stars").mean().alias("avg_stars"), col("id").count().alias("reviews"))
        .sort("avg_stars", desc=True)
    )
    print("\nProducts by average stars:")
    per_product.show(5)

    agreement = df.with_column(
        "agrees",
        ((col("stars") >= 4) & (col("sentiment") == "positive"))
        | ((col("stars") <= 2) & (col("sentiment") == "negative"))
        | ((col("stars") == 3) & (col("sentiment") == "neutral")),
    ).agg(col("agrees").cast(ifr.DataType.int64()).mean().alias("agreement_with_stars"))
    print("\nHow often the keyword scorer agrees with the stars:")
    agreement.show()

    out = pathlib.Path(tempfile.mkdtemp(prefix="inferframe-demo-")) / "reviews_scored"
    written = df.write_parquet(str(out))
    print(f"\nWrote {ifr.read_parquet(str(out)).count_rows()} rows to {len(written.to_pylist())} Parquet file(s) in {out}")


if __name__ == "__main__":
    main()
