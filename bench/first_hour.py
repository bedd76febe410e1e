"""Issue 31 item 1: a plain prompt on the embedded model, with today's default output cap and without one.

The prompt is the issue's: one review, "Summarise this review in five words.", max_retries=0,
temperature=0, no max_tokens. "capped" is what a user gets now (the local provider's default
cap, ``LocalProvider.default_max_tokens(None)``); "uncapped" sends the request as main at
065756e did, with no cap (llama-server's ``n_predict -1``, here ``extra_body={"max_tokens": -1}``),
under the same 120 s timeout. Both in one run, cache off.

    .venv/bin/python bench/first_hour.py
"""

from __future__ import annotations

import os
import time
import warnings

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt

TEXT = "The kettle arrived dented and late."


def run(label: str, **extra) -> None:
    df = ifr.from_pydict({"t": [TEXT]}).with_column("a", prompt(
        col("t"), system_message="Summarise this review in five words.", max_retries=0, temperature=0,
        usage_column=True, cache="off", timeout=120, **extra))
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = df.to_pylist()[0]
    took = time.perf_counter() - started
    usage, error = row["a_usage"] or {}, row["a_error"]
    print(f"{label:<10} {took:8.1f} s  output_tokens={usage.get('output_tokens')}  "
          f"finish={usage.get('finish_reason')}  error={error and error['kind']}  text={(row['a'] or '')[:60]!r}")


def main() -> None:
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}")
    ifr.from_pydict({"t": ["warm up"]}).with_column("a", prompt(col("t"), max_tokens=1, cache="off")).collect()
    run("capped")
    run("uncapped", extra_body={"max_tokens": -1})


if __name__ == "__main__":
    main()
