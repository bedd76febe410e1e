"""The HTML run report, checked in a real browser: render it from real runs and take a screenshot.

Runs a small two-column prompt job three times against the project's simulator (rate limited, so
there are 429s; a few rows fail on purpose; the third run's label shares move, so there is drift),
evaluates the newest run against a truth column, writes the report with ``report()`` and opens it in
headless Chromium (Debian: ``apt-get install -y chromium``). Fails when Chromium logs a console
error or no PNG is written; the report must also fetch nothing (no http(s) resource, no script).

    .venv/bin/python bench/report_screenshot.py                  # bench/out/report.html and report.png
    .venv/bin/python bench/report_screenshot.py --rows 100 --height 4000
    .venv/bin/python bench/report_screenshot.py --reuse       # render the same history again (no jobs)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import inferframe as ifr
from inferframe import col
from inferframe.dataframe.report import report
from inferframe.functions import prompt
from inferframe.simulator import FailRule, Simulator, SimulatorConfig

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
SHARE = {"pos": 0.7}  # share of 'pos' answers; the third run moves it


def respond(body: dict):
    text = body["messages"][-1]["content"]
    if not text.startswith("Classify"):
        return None  # the simulator's echo answer (free text)
    n = int(re.search(r"#(\d+)", text).group(1))
    return "pos" if n % 100 < SHARE["pos"] * 100 else "neg" if n % 7 else "neutral"


def job(sim: Simulator, start: int, rows: int):
    qs = [f"review #{j}: " + ("<script>alert(1)</script> " if j % 37 == 0 else "") + ("BAD-INPUT " if j % 41 == 0 else "")
          + "the product " + ("works well" if j % 3 else "broke after a week, " * (j % 5 + 1)) for j in range(start, start + rows)]
    common = dict(provider="openai", base_url=sim.base_url, api_key="k", model="gpt-5-mini", use_chat_completions=True)
    return (ifr.from_pydict({"q": qs})
            .with_column("label", prompt(ifr.functions.format("Classify: {}", col("q")), **common))
            .with_column("summary", prompt(col("q"), **common)))


def chromium_screenshot(html_path: str, png_path: str, width: int, height: int) -> list[str]:
    """Screenshot ``html_path``; returns the console errors Chromium logged."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        sys.exit("chromium is not installed (Debian: apt-get install -y chromium)")
    if os.path.exists(png_path):
        os.remove(png_path)
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                               f"--screenshot={png_path}", f"--window-size={width},{height}", "--hide-scrollbars",
                               "--enable-logging=stderr", "--v=0", "file://" + os.path.abspath(html_path)],
                              capture_output=True, text=True, timeout=120)
    log = proc.stdout + proc.stderr
    errors = [line for line in log.splitlines() if re.search(r"Uncaught|ERROR:.*CONSOLE|Failed to load resource", line)]
    if proc.returncode != 0 or not os.path.exists(png_path):
        sys.exit(f"chromium failed (rc {proc.returncode}):\n{log[-3000:]}")
    return errors


def run_jobs(history: str, rows: int) -> None:
    """Three runs of one pipeline (the third drifts), then an evaluation stored with the newest."""
    shutil.rmtree(history, ignore_errors=True)
    ifr.set_history(directory=history, sample=0.05, max_sample=40)
    ifr.set_cache(directory=os.path.join(history, "cache"))
    cfg = SimulatorConfig(responder=respond, latency_dist="lognormal", latency_ms=60, latency_sigma=0.6, rpm=2400,
                          ratelimit_burst_s=1, p_500=0.02, seed=7,
                          fail_rules=[FailRule(match="BAD-INPUT", status=400, message="invalid input"),
                                      FailRule(match="week", status=429, times=1)])  # some rows: one 429, then an answer
    t0 = time.time()
    with Simulator(cfg) as sim, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, start in enumerate((0, rows * 3 // 4, rows * 3 // 2)):  # overlapping rows: cache hits
            SHARE["pos"] = 0.45 if i == 2 else 0.7
            out = job(sim, start, rows).collect()
            print(f"run {i + 1}: {out.count_rows()} rows in {time.time() - t0:.1f} s", flush=True)
    drift = [str(w.message) for w in caught if issubclass(w.category, ifr.DriftWarning)]
    print(f"{len(drift)} drift warning(s)" + (": " + drift[0] if drift else ""))
    # The truth: the 70% rule the first runs followed, so the drifted third run scores below 1.
    truth = out.select("q", "label").to_pylist()
    for r in truth:
        n = int(re.search(r"#(\d+)", r["q"]).group(1))
        r["gold"] = "pos" if n % 100 < 70 else "neg" if n % 7 else "neutral"
    print(f"evaluation: accuracy {ifr.evaluate(ifr.from_pylist(truth), 'label', 'gold').accuracy:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=3600)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--reuse", action="store_true", help="render the history of the last call again (no jobs)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    history = os.path.join(args.out, "report-history")
    if not args.reuse:
        run_jobs(history, args.rows)
    html_path = report(path=os.path.join(args.out, "report.html"), directory=history)
    page = open(html_path, encoding="utf-8").read()
    bad = re.findall(r"<script|(?:src|href)=\"?https?://|url\(https?://|@import", page)
    if bad:
        sys.exit(f"the report loads something from outside or runs a script: {bad[:5]}")
    png = os.path.join(args.out, "report.png")
    errors = chromium_screenshot(html_path, png, args.width, args.height)
    print(f"report: {html_path} ({len(page) / 1024:.0f} KiB); screenshot: {png} ({os.path.getsize(png) / 1024:.0f} KiB)")
    if errors:
        sys.exit("console errors:\n" + "\n".join(errors))
    print("no console errors")


if __name__ == "__main__":
    main()
