"""The embedded local model: inferframe prompt() throughput by server slots, and against a sequential loop.

Every configuration runs in a fresh Python subprocess, one after the other, in one run:

  inferframe, slots S   ``prompt(format("Review: {}\\nSentiment:", col("review")), system_message=FEW_SHOT,
                        max_tokens=8, stop=["\\n"], temperature=0, usage_column=True)`` on the local
                        provider (no provider given, OPENAI_API_KEY unset), with
                        INFERFRAME_LOCAL_PARALLEL=S, so the llama.cpp server gets S slots and
                        inferframe keeps S requests in flight (its default max_concurrency for the
                        local provider). S in --slots (default 1,2,4,8,16; the library default is 8).
  sequential            one request at a time (http.client, one keep-alive connection) against a
                        ``LocalServer(n_parallel=<best S>)``, with the very same request bodies:
                        they are built by inferframe's own ``build_body`` from the config inside the
                        prompt() expression.

Rows: the first --rows reviews of examples/data/reviews.csv (default 64). Warm-up, identical
for every configuration and not timed: the server is started, then the last 16 reviews of the
file (never among the timed rows) are sent once, by inferframe with S in flight or by the
sequential loop one by one. This loads the model and puts the few-shot prefix in llama.cpp's
KV cache (which, on the default server, it then cannot reuse: see the diagnostic row below). The timed part of the inferframe child is read_csv -> limit -> with_column ->
collect; output tokens are summed from the per-row usage column (and cross-checked against
``last_run()``). While it runs, a thread samples inferframe's requests in flight every 50 ms.

A last, diagnostic row (skip it with --no-swa-full) runs the inferframe child once more against
``LocalServer(n_parallel=<best S>, extra_args=["--swa-full"])`` through provider="openai" at the
same concurrency. Gemma 3 uses sliding-window attention; without a full-size SWA cache llama.cpp
cannot reuse the cached few-shot prefix and evaluates the whole prompt for every request. The
column "prompt tok evaluated/req" reads, from the llama-server log, how many prompt tokens the
server actually ran per timed request (the rest came from its KV cache).

Answers at temperature 0 are compared row by row with the sequential loop's (stripped text):
batched decoding in llama.cpp may change a token now and then, so "most rows" should agree.

Usage:
    .venv/bin/python bench/local_model.py                  # 64 rows, slots 1,2,4,8,16
    .venv/bin/python bench/local_model.py --rows 32 --slots 4,8
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from _util import run_child as _run_child  # one child-process runner for every benchmark
from _util import table  # one table printer for every benchmark

ROOT = Path(__file__).resolve().parent.parent
CSV = ROOT / "examples" / "data" / "reviews.csv"
RESULT_PREFIX = "BENCH_RESULT "
WARMUP_ROWS = 16  # taken from the end of the file; the timed rows come from the start
MAX_TOKENS = 8
STOP = ["\n"]

# Same few-shot prompt as examples/demo.py: the packaged model is a base model.
FEW_SHOT = (
    "Classify the sentiment of each product review as positive, negative or neutral.\n\n"
    "Review: Absolutely love it, works perfectly.\nSentiment: positive\n\n"
    "Review: Terrible quality, it broke after two days.\nSentiment: negative\n\n"
    "Review: It is okay, nothing special.\nSentiment: neutral\n\n"
    "Review: Very disappointed, returning it.\nSentiment: negative\n\n"
    "Review: Great value, exceeded my expectations.\nSentiment: positive\n\n"
    "Review: Does the job, no more, no less.\nSentiment: neutral\n\n"
)
TEMPLATE = "Review: {}\nSentiment:"


def loadavg() -> str:
    a = os.getloadavg()
    return f"{a[0]:.2f} {a[1]:.2f} {a[2]:.2f}"




def emit(result: dict) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_child(args: list[str], env_changes: dict[str, str | None], timeout: float = 600) -> dict:
    return _run_child([__file__, *args], env=env_changes, timeout=timeout, cwd=ROOT)


def read_reviews() -> list[dict]:
    import csv

    with open(CSV, newline="") as f:
        return list(csv.DictReader(f))


def prompt_expr(ifr_col, prompt, format):
    return prompt(format(TEMPLATE, ifr_col("review")), system_message=FEW_SHOT, max_tokens=MAX_TOKENS,
                  stop=STOP, temperature=0, usage_column=True)


# --------------------------------------------------------------------------- children


def prompt_evals(log_path, start: int) -> list[int]:
    """Prompt tokens llama-server evaluated per request, from its log after byte offset ``start``."""
    import re

    with open(log_path, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    return [int(n) for n in re.findall(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens", text)]


def child_inferframe(rows: int, swa_full_slots: int | None = None) -> None:
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import format, prompt
    from inferframe.observe import last_run
    from inferframe.providers.local_server import LocalServer, get_local_server

    reviews = read_reviews()
    warm = reviews[-WARMUP_ROWS:]
    t0 = time.perf_counter()
    if swa_full_slots is None:
        server = get_local_server()  # what the local provider will use; started here, not timed
        expr = lambda: prompt_expr(col, prompt, format)  # noqa: E731
    else:
        # Diagnostic: the same server with llama.cpp's --swa-full, so that the few-shot prefix is
        # reused from the KV cache; reached through provider="openai" at the same concurrency.
        server = LocalServer(n_parallel=swa_full_slots, extra_args=["--swa-full"]).start()
        expr = lambda: prompt(format(TEMPLATE, col("review")), system_message=FEW_SHOT,  # noqa: E731
                              max_tokens=MAX_TOKENS, stop=STOP, temperature=0, usage_column=True,
                              provider="openai", base_url=server.base_url, api_key="none", model="gemma-3-270m",
                              use_chat_completions=True, max_concurrency=swa_full_slots)
    startup_s = time.perf_counter() - t0
    slots = server.n_parallel

    t0 = time.perf_counter()
    ifr.from_pydict({"id": [int(r["id"]) for r in warm], "review": [r["review"] for r in warm]}) \
        .with_column("s", expr()).collect(progress=False)
    warmup_s = time.perf_counter() - t0

    # Sample the requests in flight (the server's busy slots, from llama.cpp's /slots) while the timed run goes.
    samples: list[int] = []
    stop = threading.Event()
    slots_url = server.base_url.rstrip("/").removesuffix("/v1") + "/slots"

    def sampler() -> None:
        import urllib.request
        while not stop.is_set():
            try:
                with urllib.request.urlopen(slots_url, timeout=2) as r:
                    samples.append(sum(bool(s.get("is_processing")) for s in json.loads(r.read())))
            except (OSError, ValueError):
                pass
            stop.wait(0.05)

    th = threading.Thread(target=sampler, daemon=True)
    log_start = os.path.getsize(server.log_path)
    th.start()
    t0 = time.perf_counter()
    df = ifr.read_csv(str(CSV)).limit(rows).with_column("s", expr())
    out = df.collect(progress=False).to_pydict()
    elapsed = time.perf_counter() - t0
    stop.set()
    th.join()
    evals = prompt_evals(server.log_path, log_start)
    if swa_full_slots is not None:
        server.stop()

    usage = out["s_usage"]
    out_tok = sum((u or {}).get("output_tokens") or 0 for u in usage)
    in_tok = sum((u or {}).get("input_tokens") or 0 for u in usage)
    run = last_run()[0]
    errors = sum(1 for e in out.get("s_error", []) if e is not None)
    busy = [s for s in samples if s > 0]
    emit({
        "slots": slots, "rows": len(out["s"]), "elapsed": elapsed, "startup_s": startup_s, "warmup_s": warmup_s,
        "output_tokens": out_tok, "input_tokens": in_tok, "errors": errors,
        "last_run_output_tokens": run["output_tokens"], "last_run_input_tokens": run["input_tokens"],
        "last_run_rows": run["rows_done"], "requests": run.get("requests"), "cache_hits": run.get("cache_hits", 0),
        "mean_in_flight": statistics.fmean(busy) if busy else 0.0, "max_in_flight": max(samples or [0]),
        "prompt_eval_tokens": statistics.fmean(evals) if evals else None,
        "answers": {str(i): a for i, a in zip(out["id"], out["s"])},
    })


def child_sequential(rows: int, slots: int) -> None:
    from inferframe import col
    from inferframe.functions import format, prompt
    from inferframe.ai.requests import build_body
    from inferframe.providers.local_server import LocalServer

    # The exact config prompt() builds, so the bodies are byte-for-byte what inferframe sends.
    config = prompt_expr(col, prompt, format)._node.child.args[0].udf.owner.args[0]
    reviews = read_reviews()

    def body(r: dict) -> bytes:
        return json.dumps(build_body(config, [TEMPLATE.format(r["review"])])).encode()

    timed = [(int(r["id"]), body(r)) for r in reviews[:rows]]
    warm = [body(r) for r in reviews[-WARMUP_ROWS:]]

    t0 = time.perf_counter()
    server = LocalServer(n_parallel=slots).start()
    startup_s = time.perf_counter() - t0
    try:
        u = urlparse(server.base_url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        path = u.path + "/chat/completions"

        def send(b: bytes) -> dict:
            conn.request("POST", path, body=b, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {data[:300]!r}")
            return json.loads(data)

        t0 = time.perf_counter()
        for b in warm:
            send(b)
        warmup_s = time.perf_counter() - t0

        answers, out_tok, in_tok = {}, 0, 0
        log_start = os.path.getsize(server.log_path)
        t0 = time.perf_counter()
        for i, b in timed:
            r = send(b)
            answers[str(i)] = r["choices"][0]["message"]["content"]
            out_tok += r["usage"]["completion_tokens"]
            in_tok += r["usage"]["prompt_tokens"]
        elapsed = time.perf_counter() - t0
        conn.close()
        evals = prompt_evals(server.log_path, log_start)
    finally:
        server.stop()
    emit({"slots": slots, "rows": len(timed), "elapsed": elapsed, "startup_s": startup_s, "warmup_s": warmup_s,
          "output_tokens": out_tok, "input_tokens": in_tok, "answers": answers,
          "prompt_eval_tokens": statistics.fmean(evals) if evals else None,
          "sample_body": json.loads(timed[0][1])})


# --------------------------------------------------------------------------- parent


def norm(a) -> str | None:
    return None if a is None else str(a).strip().lower()


def agreement(a: dict, b: dict) -> tuple[int, int]:
    keys = sorted(set(a) & set(b), key=int)
    return sum(1 for k in keys if norm(a[k]) == norm(b[k])), len(keys)


def expected_label(stars: int) -> str:
    return "positive" if stars >= 4 else ("negative" if stars <= 2 else "neutral")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--slots", default="1,2,4,8,16")
    p.add_argument("--no-swa-full", action="store_true", help="skip the --swa-full diagnostic row")
    p.add_argument("--child", choices=["inferframe", "sequential", "swa-full"])
    p.add_argument("--child-slots", type=int)
    a = p.parse_args()
    if a.child == "inferframe":
        return child_inferframe(a.rows)
    if a.child == "swa-full":
        return child_inferframe(a.rows, a.child_slots)
    if a.child == "sequential":
        return child_sequential(a.rows, a.child_slots)

    from inferframe.providers.local_server import DEFAULT_N_PARALLEL

    reviews = read_reviews()
    if not 1 <= a.rows <= len(reviews) - WARMUP_ROWS:
        sys.exit(f"--rows must be 1..{len(reviews) - WARMUP_ROWS} (the last {WARMUP_ROWS} reviews are the warm-up)")
    slots_list = [int(s) for s in a.slots.split(",")]
    stars = {r["id"]: int(r["stars"]) for r in reviews}
    timed_texts = [r["review"] for r in reviews[:a.rows]]
    dup = len(timed_texts) - len(set(timed_texts))
    started = time.perf_counter()
    print(f"local_model.py: {a.rows} reviews, max_tokens={MAX_TOKENS}, stop={STOP!r}, temperature 0, "
          f"{WARMUP_ROWS} warm-up rows per configuration")
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average at start: {loadavg()}")

    # No key: the local provider is the default. The response cache is off (and pointed at a
    # throw-away directory) so that no answer is served from an earlier configuration's run.
    env = {"OPENAI_API_KEY": None, "INFERFRAME_CACHE": "off",
           "INFERFRAME_CACHE_DIR": tempfile.mkdtemp(prefix="inferframe-bench-cache-")}
    results = {}
    for s in slots_list:
        print(f"  running inferframe, INFERFRAME_LOCAL_PARALLEL={s} ...", flush=True)
        load = os.getloadavg()[0]
        results[s] = run_child(["--child", "inferframe", "--rows", str(a.rows)],
                               {**env, "INFERFRAME_LOCAL_PARALLEL": str(s)})
        results[s]["load"] = load
    best = max(slots_list, key=lambda s: a.rows / results[s]["elapsed"])
    print(f"  running sequential loop against LocalServer(n_parallel={best}) ...", flush=True)
    load = os.getloadavg()[0]
    seq = run_child(["--child", "sequential", "--rows", str(a.rows), "--child-slots", str(best)], env)
    seq["load"], seq["requests"] = load, seq["rows"]
    swa = None
    if not a.no_swa_full:
        print(f"  running diagnostic: inferframe against LocalServer(n_parallel={best}, extra_args=['--swa-full']) ...",
              flush=True)
        load = os.getloadavg()[0]
        swa = run_child(["--child", "swa-full", "--rows", str(a.rows), "--child-slots", str(best)], env)
        swa["load"] = load

    def acc(ans: dict) -> str:
        ok = sum(1 for k, v in ans.items() if norm(v) == expected_label(stars[k]))
        return f"{100 * ok / len(ans):.0f}%"

    def pe(r: dict) -> str:
        return "-" if r.get("prompt_eval_tokens") is None else f"{r['prompt_eval_tokens']:.0f}"

    def row(label: str, r: dict, in_flight: str, vs_seq: str) -> list:
        return [label, f"{r['elapsed']:.1f}", f"{r['rows'] / r['elapsed']:.2f}", f"{r['output_tokens'] / r['elapsed']:.1f}",
                r["output_tokens"], r["requests"], in_flight, r.get("errors", 0), pe(r), vs_seq, acc(r["answers"]),
                f"{r['startup_s']:.1f}+{r['warmup_s']:.1f}", f"{r['load']:.2f}"]

    def vs(r: dict) -> str:
        same, n = agreement(r["answers"], seq["answers"])
        return f"{same}/{n} ({100 * same / n:.0f}%)"

    rows = []
    for s in slots_list:
        r = results[s]
        note = " (default)" if s == DEFAULT_N_PARALLEL else ""
        note += " <- best" if s == best else ""
        rows.append(row(f"inferframe, slots {s}{note}", r, f"{r['mean_in_flight']:.1f}/{r['max_in_flight']}", vs(r)))
    rows.append(row(f"sequential, server slots {best}", seq, "1.0/1", "-"))
    if swa is not None:
        rows.append(row(f"diagnostic: inferframe, slots {best}, --swa-full", swa,
                        f"{swa['mean_in_flight']:.1f}/{swa['max_in_flight']}", vs(swa)))
    print()
    print(table(["configuration", "time s", "rows/s", "out tok/s", "out tok", "requests", "in flight mean/max",
                 "errors", "prompt tok evaluated/req", "same answer as seq.", "agrees w/ stars", "start+warm s",
                 "load 1m before"], rows))
    print("(out tok: summed from the usage column; requests: HTTP requests sent, from last_run(): inferframe sends "
          "identical prompts only once per run.\n prompt tok evaluated/req: mean prompt tokens llama-server ran per "
          "timed request, from its log; the rest came from its KV cache)")

    b = results[best]
    r_if, r_seq = b["rows"] / b["elapsed"], seq["rows"] / seq["elapsed"]
    t_if, t_seq = b["output_tokens"] / b["elapsed"], seq["output_tokens"] / seq["elapsed"]
    d = results.get(DEFAULT_N_PARALLEL)
    print()
    print(f"best slots by rows/s: {best} (library default DEFAULT_N_PARALLEL = {DEFAULT_N_PARALLEL}"
          + (f"; default gives {d['rows'] / d['elapsed']:.2f} rows/s = {100 * (d['rows'] / d['elapsed']) / r_if:.0f}% of the best)" if d else ")"))
    print(f"ratio inferframe(slots {best}) / sequential: rows/s {r_if / r_seq:.2f}x, output tokens/s {t_if / t_seq:.2f}x")
    if 1 in results:
        o = results[1]
        print(f"ratio inferframe(slots 1) / sequential: rows/s {(o['rows'] / o['elapsed']) / r_seq:.2f}x "
              "(engine overhead at one request in flight)")
    mism = [s for s in slots_list if (results[s]["last_run_output_tokens"], results[s]["last_run_input_tokens"])
            != (results[s]["output_tokens"], results[s]["input_tokens"])]
    if not mism:
        print("usage column vs last_run() totals: equal in every run")
    else:
        print(f"usage column vs last_run() totals DIFFER for slots {mism}: e.g. slots {mism[0]}: usage column "
              f"{results[mism[0]]['output_tokens']} out / {results[mism[0]]['input_tokens']} in, last_run() "
              f"{results[mism[0]]['last_run_output_tokens']} out / {results[mism[0]]['last_run_input_tokens']} in, "
              f"{results[mism[0]]['requests']} requests for {results[mism[0]]['rows']} rows ({dup} duplicate review "
              "text(s) among the timed rows: a deduplicated row repeats the usage in its column, last_run() counts it once)")
    hits = {s: results[s]["cache_hits"] for s in slots_list if results[s]["cache_hits"]}
    print("response cache hits: " + (f"{hits} (the cache was NOT off!)" if hits else "0 in every run (cache off)"))
    tok_same = all(results[s]["input_tokens"] == seq["input_tokens"] for s in slots_list)
    print(f"input tokens: inferframe {b['input_tokens']}, sequential {seq['input_tokens']} "
          f"({'same prompts' if tok_same else 'DIFFERENT prompt token counts'}); "
          f"output tokens per row: {b['output_tokens'] / b['rows']:.2f} vs {seq['output_tokens'] / seq['rows']:.2f}")
    diff = [k for k in sorted(seq["answers"], key=int) if norm(b["answers"].get(k)) != norm(seq["answers"][k])]
    if diff:
        print(f"rows answered differently (slots {best} vs sequential): "
              + "; ".join(f"id {k}: {b['answers'].get(k)!r} vs {seq['answers'][k]!r}" for k in diff[:6])
              + (" ..." if len(diff) > 6 else ""))
    if swa is not None:
        print(f"diagnostic: llama-server with --swa-full (full-size KV cache for Gemma 3's sliding-window layers, so "
              f"the few-shot prefix is reused): {swa['rows'] / swa['elapsed']:.2f} rows/s = "
              f"{(swa['rows'] / swa['elapsed']) / r_if:.2f}x inferframe(slots {best}) on the default server")
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
