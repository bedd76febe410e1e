"""Structured outputs on the embedded model: llama.cpp's schema grammar against inferframe's compact one.

Sends the same few-shot extraction requests (a 4-field model with a nested list) to the embedded
llama.cpp server with Gemma 3 270M, one at a time, three ways:

  unconstrained   no grammar (the cost of plain sampling; answers are not checked)
  llama.cpp json  ``response_format: json_schema``: the server's own grammar (what main sent)
  compact gbnf    inferframe's grammar from ``providers/gbnf.py`` (no free whitespace)

and prints, per way: answers that parse and validate, mean tokens per answer, share of
whitespace outside strings, generation speed (llama.cpp's own ``timings.predicted_per_second``)
and wall seconds per row, then the ratios. ``--max-tokens`` is the cap (default 200).

``--unbounded`` instead sends one zero-shot row with no max_tokens of the user's: as main did
(``response_format``, no bound) and as inferframe does now (compact grammar, the schema-derived
default max_tokens), each with a client timeout of ``--timeout`` seconds (default 120).

``--summary`` (issue 27) runs ``prompt(format("Rate this review 1-5 and summarise: {}", ...),
return_format=MovieReview)`` (an int rating 1-5, a free-text summary, a Literal verdict) through
the whole library over the first ``--rows`` bundled reviews, zero-shot and with every default,
three times: "before" passes main's request fields as options (grammar with unbounded strings, DRY
off, the old default max_tokens), "bound, no DRY" only turns DRY off (``dry_multiplier=0``), "after"
passes nothing. It prints records that validate, records with a non-empty summary, length errors,
rows reported as "the model repeated itself", rows/s and the mean summary length.

    .venv/bin/python bench/local_structured.py [--rows 20] [--max-tokens 200]
    .venv/bin/python bench/local_structured.py --unbounded
    .venv/bin/python bench/local_structured.py --summary [--rows 60]

Measured 2026-11-25, ``--summary --rows 24`` on the shared 2-core box while other jobs (a second
llama-server, compilers) ran, so rows/s are low for all three alike:

    way                      validate  with a summary  valid %  length errors  'repeated itself'  rows/s
    before (main's request)     20/24           11/24    45.8%              4                  1    0.04
    bound, no DRY               17/24           17/24    70.8%              7                  5    0.12
    after (defaults)            24/24           24/24   100.0%              0                  0    0.15
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).parent))

from pydantic import BaseModel, Field, ValidationError  # noqa: E402

from _util import table  # noqa: E402

FEW_SHOT = (
    "Extract the product, the sentiment, up to three tags and the star rating from each review.\n\n"
    'Review: The headphones broke after a week.\nJSON: {"product":"headphones","sentiment":"negative",'
    '"tags":[{"name":"durability"}],"stars":1}\n\n'
    'Review: Great blender, makes perfect smoothies.\nJSON: {"product":"blender","sentiment":"positive",'
    '"tags":[{"name":"quality"},{"name":"taste"}],"stars":5}\n\n'
)


class Tag(BaseModel):
    name: str


class Review(BaseModel):
    product: str
    sentiment: Literal["positive", "negative", "neutral"]
    tags: list[Tag] = Field(max_length=3)
    stars: int = Field(ge=1, le=5)


def reviews(n: int) -> list[str]:
    with open(Path(__file__).parent.parent / "examples/data/reviews.csv") as f:
        return [r["review"] for r in csv.DictReader(f)][:n]


def post(url: str, body: dict, timeout: float = 600) -> tuple[dict, float]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        out = json.loads(resp.read())
    return out, time.perf_counter() - t


def outside_whitespace(text: str) -> float:
    """Share of characters that are whitespace outside JSON strings."""
    inside, escaped, ws = False, False, 0
    for ch in text:
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = False
        elif ch == '"':
            inside = True
        elif ch.isspace():
            ws += 1
    return ws / max(1, len(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--zero-shot", action="store_true", help="no few-shot system message (as a new user first tries)")
    ap.add_argument("--unbounded", action="store_true", help="one zero-shot row without a user max_tokens, main vs now")
    ap.add_argument("--timeout", type=float, default=120.0, help="client timeout per request with --unbounded")
    ap.add_argument("--summary", action="store_true", help="issue 27: a free-text summary field, before vs after")
    args = ap.parse_args()
    if args.summary:
        return summary(args.rows)
    from inferframe.providers.gbnf import json_schema_to_gbnf
    from inferframe.providers.local_server import get_local_server
    from inferframe.structured import json_schema_for, response_format_for

    server = get_local_server()
    url = server.base_url + "/chat/completions"
    name, schema = json_schema_for(Review)
    ways = {
        "unconstrained": {},
        "llama.cpp json": response_format_for(name, schema, "chat"),
        "compact gbnf": {"grammar": json_schema_to_gbnf(schema)},
    }
    if args.unbounded:
        return unbounded(url, name, schema, args.timeout)
    texts = reviews(args.rows)
    post(url, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})  # warm-up, untimed
    print(f"local_structured: {len(texts)} reviews, max_tokens={args.max_tokens}, one request at a time, "
          f"{'zero-shot' if args.zero_shot else 'few-shot'}, {server.model}")
    rows, speeds = [], {}
    stats = {way: {"ok": 0, "cut": 0, "tokens": [], "ws": [], "tps": [], "secs": []} for way in ways}
    for text in texts:  # the ways take turns per row, so the machine's load falls on each alike
        system = [] if args.zero_shot else [{"role": "system", "content": FEW_SHOT}]
        for way, fields in ways.items():
            body = {"messages": system + [{"role": "user", "content": f"Review: {text}\nJSON:"}],
                    "max_tokens": args.max_tokens, "temperature": 0, **fields}
            out, dt = post(url, body)
            answer = out["choices"][0]["message"]["content"] or ""
            st = stats[way]
            st["cut"] += out["choices"][0].get("finish_reason") == "length"
            try:
                Review.model_validate_json(answer)
                st["ok"] += 1
            except (ValidationError, ValueError):
                pass
            st["tokens"].append(out["usage"]["completion_tokens"])
            st["ws"].append(outside_whitespace(answer))
            st["tps"].append(out.get("timings", {}).get("predicted_per_second") or 0.0)
            st["secs"].append(dt)
    for way, st in stats.items():
        speeds[way] = statistics.median(st["tps"])
        rows.append([way, f"{st['ok']}/{len(texts)}", f"{st['cut']}", f"{statistics.mean(st['tokens']):.1f}",
                     f"{100 * statistics.mean(st['ws']):.1f}%", f"{speeds[way]:.1f}",
                     f"{statistics.mean(st['secs']):.2f}", f"{max(st['secs']):.2f}"])
    print(table(["way", "valid", "cut at max_tokens", "tokens/answer", "whitespace", "tokens/s (median)",
                 "s/row (mean)", "s/row (max)"], rows, "lrrrrrrr"))
    base = speeds["unconstrained"] or 1.0
    print(f"\ngeneration speed vs unconstrained: llama.cpp json {speeds['llama.cpp json'] / base:.2f}x, "
          f"compact gbnf {speeds['compact gbnf'] / base:.2f}x")


def unbounded(url: str, name: str, schema: dict, timeout: float) -> None:
    from inferframe.providers.gbnf import json_schema_to_gbnf
    from inferframe.providers.local import LocalProvider
    from inferframe.structured import response_format_for

    messages = [{"role": "user", "content": f"Review: {reviews(2)[1]}\nJSON:"}]
    bound = LocalProvider.default_max_tokens(schema)
    print(f"local_structured --unbounded: one zero-shot row, no max_tokens from the user, client timeout {timeout:g} s")
    # Now first: an abandoned unbounded request goes on generating in the server and would slow what follows.
    for label, fields in ((f"now: compact grammar, default max_tokens={bound}",
                           {"grammar": json_schema_to_gbnf(schema), "max_tokens": bound}),
                          ("main: llama.cpp json_schema, no bound", response_format_for(name, schema, "chat"))):
        try:
            out, dt = post(url, {"messages": messages, "temperature": 0, **fields}, timeout=timeout)
            print(f"  {label}: {dt:.1f} s, {out['usage']['completion_tokens']} tokens, "
                  f"finish_reason {out['choices'][0]['finish_reason']}")
        except TimeoutError:
            print(f"  {label}: no answer within {timeout:g} s")


class MovieReview(BaseModel):
    rating: int = Field(ge=1, le=5)
    summary: str
    verdict: Literal["recommend", "avoid", "neutral"]


def summary(n: int) -> None:
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import format, prompt
    from inferframe.providers.gbnf import json_schema_to_gbnf
    from inferframe.structured.answer_budget import answer_token_bound
    from inferframe.providers.local_server import get_local_server
    from inferframe.structured import json_schema_for

    schema = json_schema_for(MovieReview)[1]
    # What main sent: every string unbounded in the grammar, no DRY, max_tokens from 48-token strings.
    before = {"grammar": json_schema_to_gbnf(schema, max_string_length=None), "dry_multiplier": 0.0,
              "max_tokens": max(64, int(1.5 * answer_token_bound(schema, max_string_length=None)))}
    server = get_local_server()
    df = ifr.read_csv(str(Path(__file__).parent.parent / "examples/data/reviews.csv")).limit(n)
    question = format("Rate this review 1-5 and summarise: {}", col("review"))
    ifr.from_pydict({"q": ["warm up"]}).with_column("a", prompt(col("q"), max_tokens=2, cache=False)).to_pydict()
    print(f"local_structured --summary: {n} bundled reviews, zero-shot, MovieReview(rating 1-5, summary str, "
          f"verdict Literal), {server.model}, {server.n_parallel} slots, cache off")
    rows = []
    ways = (("before (main's request)", before), ("bound, no DRY", {"dry_multiplier": 0.0}), ("after (defaults)", {}))
    for label, options in ways:
        t = time.perf_counter()
        out = df.with_column("r", prompt(question, return_format=MovieReview, cache=False, **options)).to_pydict()
        secs = time.perf_counter() - t
        errors = [e for e in out["r_error"] if e is not None]
        valid = [r for r in out["r"] if r is not None]
        summarised = [r for r in valid if r["summary"].strip()]
        loops = sum("repeated itself" in e["message"] for e in errors)
        length = sum(e["kind"] == "length" for e in errors)
        mean_len = statistics.mean(len(r["summary"]) for r in valid) if valid else 0.0
        rows.append([label, f"{len(valid)}/{n}", f"{len(summarised)}/{n}", f"{100 * len(summarised) / n:.1f}%",
                     str(length), str(loops), f"{n / secs:.2f}", f"{mean_len:.0f}"])
        if errors:
            print(f"  {label}: first error: {errors[0]['kind']}: {errors[0]['message'][:200]}")
    print(table(["way", "validate", "with a summary", "valid %", "length errors", "'repeated itself'", "rows/s",
                 "summary chars (mean)"], rows, "lrrrrrrr"))


if __name__ == "__main__":
    main()
