"""Calibration on the embedded model: zero-shot classify_text balanced accuracy and sem_filter F1, before and after.

Issue 31 item 3. In one run, on the bundled data, with the embedded Gemma 3 270M (label scoring by
log-probabilities on the local llama.cpp server):

  classify_text    zero-shot, method="score": calibrate=False (the model's raw label probabilities),
                   calibrate=True (each label's probability divided by its probability for content-free
                   inputs "N/A", "", "[MASK]" in the same prompt, Zhao et al. 2021) and calibrate="batch"
                   (divided by the mean label probabilities of the rows scored so far, once 16 are;
                   Zhou et al. 2024; what calibrate="auto", the default, does zero-shot), on
                   - examples/data/reviews.csv (300 rows; stars 1-2 negative, 3 neutral, 4-5 positive),
                   - tests/data/golden_sentiment.csv (20 rows, positive/negative),
                   - the first --imdb rows of examples/data/classify/imdb_heldout.csv (positive/negative).
  sem_filter       calibrate=False, calibrate=True (the default: P(yes) divided by P(yes) for the
                   statement with the row content-free, e.g. "N/A mentions a cat") and calibrate="batch",
                   on reviews.csv, with
                   statements whose truth the review templates fix:
                   - "is a complaint about delivery or shipping": "arrived damaged", "shipping was slow";
                   - "says the product broke or stopped working": "broke", "stopped working", "fell apart";
                   - "is a positive review": 4 or 5 stars;
                   - "mentions a cat": no row (F1 undefined; the rows kept are all false positives).
                   Also whether the quality guard warned (LowInformationWarning) on each run, and the
                   rows kept and the true rows among them: a filter that keeps every row has F1
                   2t/(n+t) (t true rows of n): 0.119, 0.171 and 0.544 for the first three.

Balanced accuracy is the mean of the per-label recalls; a failed row counts as wrong. The response
cache stays on: a row's label requests are the same with and without calibration, so the second
setting costs only the content-free requests (a rerun of the script costs nothing).

Usage:
    .venv/bin/python bench/calibration.py              # 200 IMDB rows
    .venv/bin/python bench/calibration.py --imdb 0     # no IMDB rows (faster)
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import table  # noqa: E402  one table printer for every benchmark

import inferframe as ifr  # noqa: E402
from inferframe import col  # noqa: E402
from inferframe.errors import LowInformationWarning  # noqa: E402
from inferframe.functions import classify_text, sem_predicate  # noqa: E402
from inferframe.functions._calls import ai_expression  # noqa: E402
from inferframe.functions.ai import classify_call  # noqa: E402

MODEL = "gemma-3-270m"


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def star_label(stars: str) -> str:
    s = int(stars)
    return "negative" if s <= 2 else "neutral" if s == 3 else "positive"


def balanced_accuracy(predicted: list, gold: list[str]) -> float:
    recalls = []
    for label in sorted(set(gold)):
        rows = [p for p, g in zip(predicted, gold) if g == label]
        recalls.append(sum(p == label for p in rows) / len(rows))
    return sum(recalls) / len(recalls)


def f1(kept: list[bool], truth: list[bool]) -> tuple[float | None, int, int]:
    """(F1, rows kept, true rows kept); F1 is None where no row is true."""
    tp = sum(k and t for k, t in zip(kept, truth))
    n_kept, n_true = sum(kept), sum(truth)
    if not n_true:
        return None, n_kept, tp
    p = tp / n_kept if n_kept else 0.0
    r = tp / n_true
    return (2 * p * r / (p + r) if p + r else 0.0), n_kept, tp


def run_quiet(fn):
    """fn()'s result and whether the quality guard warned."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, any(issubclass(w.category, LowInformationWarning) for w in seen)


def classify(texts: list[str], labels: list[str], calibrate: bool | str) -> tuple[list, bool]:
    df = ifr.from_pydict({"t": texts})
    if calibrate == "batch":  # classify_text has no such option: its call with the batch prior switched on
        call = classify_call(col("t"), labels, method="score", calibrate=False, model=MODEL, confidence_column=False)
        call = dataclasses.replace(call, args=(dataclasses.replace(call.args[0], batch_prior=True),))
        expr = ai_expression(call)
    else:
        expr = classify_text(col("t"), labels, method="score", calibrate=calibrate, model=MODEL,
                             confidence_column=False)
    out, warned = run_quiet(lambda: df.with_column("y", expr).to_pydict()["y"])
    return out, warned


def predicate(texts: list[str], statement: str, calibrate: bool | str) -> tuple[list[bool], bool]:
    df = ifr.from_pydict({"review": texts})
    expr = sem_predicate("{review} " + statement, method="score", calibrate=calibrate, model=MODEL)
    out, warned = run_quiet(lambda: df.with_column("ok", expr).to_pydict()["ok"])
    return [bool(v) for v in out], warned


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--imdb", type=int, default=200, help="rows of imdb_heldout.csv (0: none)")
    args = ap.parse_args()
    started = time.perf_counter()
    reviews = read_csv(ROOT / "examples" / "data" / "reviews.csv")
    texts = [r["review"] for r in reviews]
    sets = [("reviews.csv (3 labels)", texts, [star_label(r["stars"]) for r in reviews],
             ["positive", "negative", "neutral"])]
    golden = read_csv(ROOT / "tests" / "data" / "golden_sentiment.csv")
    sets.append(("golden_sentiment.csv", [r["text"] for r in golden], [r["gold"] for r in golden],
                 ["positive", "negative"]))
    if args.imdb:
        imdb = read_csv(ROOT / "examples" / "data" / "classify" / "imdb_heldout.csv")[: args.imdb]
        sets.append((f"imdb_heldout.csv[:{len(imdb)}]", [r["text"] for r in imdb], [r["label"] for r in imdb],
                     ["positive", "negative"]))
    ifr.from_pydict({"t": ["warm-up"]}).with_column(  # starts the server outside the figures
        "y", classify_text(col("t"), ["a", "b"], method="score", model=MODEL)).collect()

    rows = []
    for name, xs, gold, labels in sets:
        figures = []
        for calibrate in (False, True, "batch"):
            predicted, warned = classify(xs, labels, calibrate)
            figures.append(f"{balanced_accuracy(predicted, gold):.3f}{' (warned)' if warned else ''}")
        rows.append([name, len(xs), *figures])
    print(f"classify_text zero-shot, label scoring on {MODEL}: balanced accuracy")
    print(table(["data", "rows", "uncalibrated", "content-free", "batch"], rows, "lrrrr"))
    print()

    statements = [
        ("is a complaint about delivery or shipping", lambda t: "arrived damaged" in t or "shipping was slow" in t),
        ("says the product broke or stopped working",
         lambda t: "broke" in t or "stopped working" in t or "fell apart" in t),
        ("is a positive review", None),
        ("mentions a cat", lambda t: False),
    ]
    rows = []
    for statement, rule in statements:
        truth = ([int(r["stars"]) >= 4 for r in reviews] if rule is None else [rule(t) for t in texts])
        cells = []
        for calibrate in (False, True, "batch"):
            kept, warned = predicate(texts, statement, calibrate)
            score, n_kept, tp = f1(kept, truth)
            cells.append(f"{'-' if score is None else f'{score:.3f}'} ({n_kept} kept, {tp} true)"
                         f"{' warned' if warned else ''}")
        rows.append([f"{{review}} {statement}", sum(truth), *cells])
    print(f"sem_filter on reviews.csv ({len(texts)} rows), label scoring on {MODEL}: F1")
    print(table(["statement", "true rows", "uncalibrated", "content-free (default)", "batch"], rows, "lrlll"))
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
