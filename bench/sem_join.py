"""sem_join on a self-join of IMDB sentences, "same sentiment": F1, model calls, tokens and time per plan, vs the naive nested loop.

Data: the first --rows (default 256) of examples/data/classify/imdb_heldout.csv (gold sentiment, CC BY
4.0; see its README). The gold join is every ordered pair of distinct rows with the same label
(256 rows: 65,280 ordered pairs). A row is never paired with itself (those pairs are dropped).

Two backends, one run:
  sim      the project's OpenAI simulator (model "gpt-5-mini", chat completions, constrained
           generation). Its answers are planted: a row's sentiment is the gold label, flipped for a
           deterministic 5% of rows; a pair check answers "same label" (gold), flipped for a
           deterministic 5% of pairs. So F1 shows what each plan does with an imperfect model.
  offline  the embedded Gemma 3 270M (llama.cpp, label scoring); the property is classified with 20
           examples per label from imdb_examples.csv, the pair check zero-shot.

Plans: projection (on_property="sentiment", property_values=["positive", "negative"]); batched
(--pairs-per-request right rows per request, the numbers of those that agree; sim, on the nested loop's rows); blocking
(embedding top-k, k chosen on a sample of left rows for --target-recall, then a check per candidate;
on the first --block-rows rows, sim);
naive nested loop (a check per pair). The naive loop and, offline, blocking run on a subset of the
first rows (their rows shown in the table; offline, k's sample is 4 rows); their calls for all rows are extrapolated exactly (calls = pairs for the
nested loop). "calls" are the model requests the server saw (sim) or the check/property rows sent
(offline, label scoring makes one request per label). The blocking recall is measured on the left
rows outside k's sample (held out), against what the nested loop's checks say on the same rows.

Usage:
    .venv/bin/python bench/sem_join.py                 # both backends
    .venv/bin/python bench/sem_join.py --backend sim --rows 256 --naive-rows 64 --block-rows 64
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import table  # noqa: E402

import inferframe as ifr  # noqa: E402
from inferframe import col  # noqa: E402
from inferframe.functions import classify_text  # noqa: E402
from inferframe.observe import last_run  # noqa: E402

PRED = "{text:left} and {text:right} express the same sentiment"
LABELS = ["positive", "negative"]
DATA = ROOT / "examples/data/classify/imdb_heldout.csv"
EXAMPLES = ROOT / "examples/data/classify/imdb_examples.csv"


def load(n: int) -> list[dict]:
    with open(DATA, newline="") as f:
        rows = list(csv.DictReader(f))[:n]
    return [{"id": i, "text": r["text"], "gold": r["label"]} for i, r in enumerate(rows)]


def f1(found: set, gold: set) -> tuple[float, float, float]:
    tp = len(found & gold)
    p = tp / len(found) if found else 0.0
    r = tp / len(gold) if gold else 0.0
    return (2 * p * r / (p + r) if p + r else 0.0), p, r


def gold_pairs(rows: list[dict]) -> set:
    return {(a["id"], b["id"]) for a in rows for b in rows if a["id"] != b["id"] and a["gold"] == b["gold"]}


def flip(key: str, share: float) -> bool:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


class Planted:
    """The simulator's answers: gold labels with 5% of rows and 5% of pair checks flipped."""

    def __init__(self, rows: list[dict], noise: float = 0.05) -> None:
        self.label = {r["text"]: r["gold"] for r in rows}
        self.noise = noise

    def row(self, text: str) -> str:
        g = self.label[text]
        return ("negative" if g == "positive" else "positive") if flip("row" + text, self.noise) else g

    def same(self, a: str, b: str) -> bool:
        s = self.label[a] == self.label[b]
        return (not s) if flip("pair" + a + "\x00" + b, self.noise) else s

    def __call__(self, body: dict) -> str:
        system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
        if "numbered candidate" in system:  # the batched plan: the numbers of the candidates that agree
            statement, listed = text.split("\n\nCandidates:\n", 1)
            left = statement.removeprefix("Statement: ").split(" and [candidate]")[0]
            cands = [line.split(". ", 1) for line in listed.splitlines()]
            return json.dumps({"matches": [int(num) for num, t in cands if self.same(left, t)]})
        if "Decide" in system:
            a, b = text[: -len(" express the same sentiment")].split(" and ", 1) if text.count(" and ") == 1 else \
                self._split(text)
            return json.dumps({"label": "yes" if self.same(a, b) else "no"})
        return json.dumps({"label": self.row(text)})

    def _split(self, text: str) -> tuple[str, str]:
        body = text[: -len(" express the same sentiment")]
        for a in self.label:
            if body.startswith(a + " and ") and body[len(a) + 5:] in self.label:
                return a, body[len(a) + 5:]
        raise ValueError(f"unplanted pair: {text[:80]!r}")


def pairs_of(df) -> set:
    out = df.to_pydict()
    return {(a, b) for a, b in zip(out["id"], out["right.id"]) if a != b}


def note_of(df) -> str:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        text = df.explain(show_all=False)
    return next(line for line in text.splitlines() if "SemJoin" in line).strip("* ")


def run_plan(name, frame, opts, sim=None, **kw):
    """(pairs, calls, tokens, seconds, note) of one plan; calls from the simulator or from last_run()."""
    before = sim.stats()["total_requests"] if sim else 0
    t = time.perf_counter()
    j = frame.sem_join(frame, PRED, **kw, **opts)
    found = pairs_of(j)
    note = note_of(j)  # after the run: the plan that ran, with the k its sample chose (before it: "k=?")
    secs = time.perf_counter() - t
    runs = [r for r in last_run() if r["label"].startswith("sem_join.")]
    tokens = sum(r["input_tokens"] + r["output_tokens"] for r in runs)
    calls = (sim.stats()["total_requests"] - before) if sim else sum(r["rows_done"] for r in runs)
    return found, calls, tokens, secs, note


def bench(backend: str, rows: list[dict], args) -> list[list]:
    frame = ifr.from_pylist([{"id": r["id"], "text": r["text"]} for r in rows])
    naive_rows = rows[: args.naive_rows]
    naive_frame = ifr.from_pylist([{"id": r["id"], "text": r["text"]} for r in naive_rows])
    gold = gold_pairs(rows)
    out = []
    sim = None
    if backend == "sim":
        from inferframe.simulator import Simulator, SimulatorConfig

        planted = Planted(rows)
        ctx = Simulator(SimulatorConfig(responder=planted))
        sim = ctx.__enter__()
        opts = dict(provider="openai", base_url=sim.base_url, api_key="sk-bench", model="gpt-5-mini",
                    use_chat_completions=True, cache="off", max_concurrency=64)
        prop = dict(on_property="sentiment", property_values=LABELS)
    else:
        opts = dict(model="gemma-3-270m", cache="off")
        prop = dict(on_property="sentiment", property_values=LABELS, property_examples=str(EXAMPLES))
    try:
        n = len(rows)
        # (a) projection
        found, calls, tokens, secs, note = run_plan("projection", frame, opts, sim, plan="projection", **prop)
        score = f1(found, gold)
        # the per-row classification's ceiling: the same classification, joined in Python
        cls_opts = {k: v for k, v in opts.items()}
        if backend == "offline":
            cls_opts = dict(cls_opts, examples=str(EXAMPLES))
        labels = frame.with_column("s", classify_text(
            col("text"), LABELS, system_message="What is the sentiment of the text? Answer with exactly one of: "
            "positive, negative.", **cls_opts)).to_pydict()["s"]
        acc = sum(l == r["gold"] for l, r in zip(labels, rows)) / n
        by_label = {(a["id"], b["id"]) for a, la in zip(rows, labels) for b, lb in zip(rows, labels)
                    if a["id"] != b["id"] and la is not None and la == lb}
        ceiling = f1(by_label, gold)[0]
        out.append([backend, "projection", n, f"{score[0]:.3f}", f"{calls} ({calls / n:.2f}/row)", tokens,
                    f"{secs:.1f}", f"row acc {acc:.3f}, F1 from per-row labels {ceiling:.3f}"])
        # (d) naive nested loop on a subset; calls for all rows are n*n (self pairs are sent too)
        found, calls, tokens, secs, note = run_plan("nested", naive_frame, opts, sim, plan="nested")
        nested_found = found
        m = len(naive_rows)
        nested_row = [backend, "naive nested", m, f"{f1(found, gold_pairs(naive_rows))[0]:.3f}",
                      f"{calls} measured; {n * n} for {n} rows", tokens, f"{secs:.1f}",
                      f"{secs * n * n / max(calls, 1):.0f} s extrapolated to {n} rows"]
        # (b) blocking, k on a sample; recall on the held-out left rows against the nested loop's checks
        brows = rows[: args.block_rows] if sim is not None else naive_rows
        bframe = ifr.from_pylist([{"id": r["id"], "text": r["text"]} for r in brows])
        found, calls, tokens, secs, note = run_plan("blocking", bframe, opts, sim, plan="blocking",
                                                    target_recall=args.target_recall, sample_size=args.sample)
        k = int(note.split("k=")[1].split()[0])
        if sim is not None:  # the planted checks of every pair, computed without asking
            model_yes = {(a["id"], b["id"]) for a in brows for b in brows
                         if a["id"] != b["id"] and planted.same(a["text"], b["text"])}
        else:  # the nested loop above checked every pair of these rows
            model_yes = nested_found
        sampled = {brows[i]["id"] for i in _sampled_ids(len(brows), args.sample)}
        ref = {p for p in model_yes if p[0] not in sampled}
        held = {p for p in found if p[0] not in sampled}
        recall = len(held & ref) / len(ref) if ref else 1.0
        out.append([backend, f"blocking k={k}", len(brows), f"{f1(found, gold_pairs(brows))[0]:.3f}",
                    f"{calls} ({calls / len(brows):.1f}/row)", tokens, f"{secs:.1f}",
                    f"held-out recall {recall:.3f} vs nested checks (target {args.target_recall})"])
        if sim is not None:
            # (c) several pairs per request, on the nested loop's rows: rows * ceil(rows / p) calls
            p = args.pairs_per_request
            found, calls, tokens, secs, note = run_plan("batched", naive_frame, opts, sim, plan="batched",
                                                        pairs_per_request=p)
            out.append([backend, f"batched p={p}", m, f"{f1(found, gold_pairs(naive_rows))[0]:.3f}",
                        f"{calls} ({calls / m:.1f}/row)", tokens, f"{secs:.1f}",
                        f"{p} candidates per request; {n * -(-n // p)} calls for {n} rows"])
        out.append(nested_row)
    finally:
        if sim is not None:
            ctx.__exit__(None, None, None)
    return out


def _sampled_ids(n: int, size: int) -> set:
    import numpy as np

    rng = np.random.default_rng(0)  # sem_join's default seed: the same sample
    return set(int(i) for i in rng.choice(n, size=min(size, n), replace=False))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["sim", "offline", "both"], default="both")
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--naive-rows", type=int, default=64, help="rows of the naive nested loop's subset (sim)")
    ap.add_argument("--pairs-per-request", type=int, default=8, help="candidates per request of the batched plan (sim)")
    ap.add_argument("--offline-naive-rows", type=int, default=16, help="offline: nested and blocking run on these rows")
    ap.add_argument("--block-rows", type=int, default=64, help="rows of the blocking run (sim)")
    ap.add_argument("--sample", type=int, default=8)
    ap.add_argument("--target-recall", type=float, default=0.9)
    args = ap.parse_args()
    rows = load(args.rows)
    for backend in (["sim", "offline"] if args.backend == "both" else [args.backend]):
        out: list = []
        a = argparse.Namespace(**vars(args))
        if backend == "offline":
            a.naive_rows, a.sample = args.offline_naive_rows, min(args.sample, 4)
        out += bench(backend, rows, a)
        print(table(["backend", "plan", "rows", "F1", "model calls", "tokens", "wall s", "note"], out), flush=True)


if __name__ == "__main__":
    main()
