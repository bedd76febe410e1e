"""The HTML run report: one self-contained, well-formed file with every panel, drift flagged, values escaped."""

import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.dataframe.report import report
from inferframe.errors import PlanError
from inferframe.functions import prompt
from inferframe.observe.history import RunHistory
from inferframe.observe.report import render_report
from inferframe.observe.stats import LATENCY_BOUNDS
from inferframe.simulator import Simulator, SimulatorConfig

PANELS = ["Totals", "Rows per second", "Latency", "429s and retries", "Errors by kind", "Tokens and cost",
          "Output distributions", "Review sample"]
VOID = {"meta", "br", "img", "input", "link", "hr", "area", "base", "col", "embed", "source", "track", "wbr"}


class Page(HTMLParser):
    """Checks that every opened element closes in order and collects headings, text and attributes."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack, self.problems, self.headings, self.attrs, self.text, self.tags = [], [], [], [], [], set()
        self._in = None
        self.feed(text)
        self.close()
        if self.stack:
            self.problems.append(f"never closed: {self.stack}")

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += attrs
        if tag not in VOID:
            self.stack.append(tag)
        if tag in ("h1", "h2"):
            self._in = []

    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += attrs

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()
        if tag in ("h1", "h2") and self._in is not None:
            self.headings.append("".join(self._in).strip())
            self._in = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in is not None:
            self._in.append(data)


def check_page(text: str) -> Page:
    page = Page(text)
    assert not page.problems, page.problems[:5]
    assert {"html", "head", "body", "main", "section", "svg"} <= page.tags
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    for name, value in page.attrs:  # nothing is fetched: no src/href to anywhere, no url() in styles
        assert name not in ("src", "href") or not (value or "").startswith(("http:", "https:", "//")), (name, value)
    assert "@import" not in text and "url(" not in text
    return page


def full_run(**over) -> dict:
    hist = [0] * len(LATENCY_BOUNDS)
    hist[7], hist[8], hist[10] = 40, 50, 10
    run = {
        "run_id": "20250101-120000-abc123", "started": 1_735_732_800.0, "ended": 1_735_732_810.0, "fingerprint": "fp1",
        "status": "ok", "rows": 100, "requests": 104, "input_tokens": 2000, "output_tokens": 300, "cost": 0.0123,
        "retries": 4, "rate_limited": 3, "errors": 2, "cache_hits": 5, "truncated": 1, "latency_p50_s": 0.1,
        "latency_p90_s": 0.178, "latency_p99_s": 0.316,
        "calls": [{"label": "prompt[gpt-5-mini]", "provider": "openai", "base_url": "http://127.0.0.1:1/v1",
                   "model": "gpt-5-mini", "endpoint": "chat", "prompt_version": "v2"}],
        "prompt_versions": ["v2"], "errors_by_kind": {"bad_request": 2}, "latency_hist": hist,
        "timeline": [[0.5, 20, 21, 1, 1, 0], [1.0, 45, 47, 2, 3, 1], [1.5, 80, 82, 3, 4, 2], [2.0, 100, 104, 3, 4, 2]],
        "distributions": {
            "label": {"rows": 100, "null_rate": 0.02, "error_rate": 0.02, "categories": {"pos": 45, "neg": 53}},
            "score": {"rows": 100, "null_rate": 0.0, "error_rate": 0.0,
                      "numbers": {"mean": 0.5, "std": 0.1, "min": 0.0, "max": 1.0, "p5": 0.1, "p25": 0.3, "p50": 0.5,
                                  "p75": 0.7, "p95": 0.9}},
        },
        "drift": [{"column": "label", "value": "pos", "before": 0.7, "after": 0.45, "sigmas": 5.1, "psi": 0.26,
                   "runs_before": 1}],
        "evaluation": {"prediction": "label", "truth": "gold", "kind": "label", "rows": 100, "missing": 0, "unlabelled": 0,
                       "accuracy": 0.81, "error_rate": 0.02, "null_rate": 0.02, "macro_f1": 0.8,
                       "per_class": {"neg": {"precision": 0.9, "recall": 0.7, "f1": 0.79, "support": 60},
                                     "pos": {"precision": 0.7, "recall": 0.95, "f1": 0.81, "support": 40}},
                       "confusion": {"labels": ["neg", "pos"], "counts": [[42, 16], [1, 38]], "null": [2, 1]}},
    }
    run.update(over)
    return run


EARLIER = [{"run_id": "older", "started": 1_735_700_000.0, "status": "ok", "rows": 100, "input_tokens": 1900,
            "output_tokens": 290, "cost": 0.011,
            "distributions": {"label": {"rows": 100, "null_rate": 0.0, "error_rate": 0.0, "categories": {"pos": 70, "neg": 30}},
                              "score": {"rows": 100, "numbers": {"mean": 0.4, "std": 0.1, "min": 0.0, "max": 1.0, "p5": 0.1,
                                                                 "p50": 0.4, "p95": 0.8}}}}]
SAMPLE = [{"q": "<script>alert('x')</script>", "label": "pos", "label_error": None, "_run_id": "r"},
          {"q": "long " * 200, "label": None, "label_error": {"kind": "bad_request", "message": "a & b"}, "_run_id": "r"},
          {"q": "plain", "<b>odd column</b>": 1, "_run_id": "r"}]


def test_a_full_run_renders_every_panel_in_well_formed_html():
    text = render_report(full_run(), EARLIER, SAMPLE)
    page = check_page(text)
    assert page.headings[0].startswith("inferframe run 20250101-120000-abc123")
    assert set(PANELS + ["Evaluation"]) <= set(page.headings), set(PANELS + ["Evaluation"]) - set(page.headings)
    assert "2025-01-01" in text  # the date in the title's line
    body = " ".join(page.text)
    for figure in ("2,000", "$0.0123", "openai:gpt-5-mini", "v2", "bad_request", "p50", "p90", "p99"):
        assert figure in body, figure


def test_drift_is_flagged_in_red_with_before_and_after():
    text = render_report(full_run(), EARLIER, [])
    assert 'class="alert"' in text and 'class="drift"' in text
    assert "Drift in label = &#x27;pos&#x27;: 70.0% before → 45.0% now" in text
    assert "fill:#dc2626" in text  # the flagged value's label in the chart
    # the earlier runs' pooled shares sit next to this run's
    assert "earlier runs" in text and "70.0%" in text and "45.9%" in text  # 45 of 98 non-null answers
    calm = render_report(full_run(drift=[]), EARLIER, [])
    assert 'class="drift"' not in calm and 'class="alert"' not in calm


def test_the_evaluation_panel_shows_accuracy_classes_and_confusion_only_when_there_is_one():
    text = render_report(full_run(), [], [])
    assert "81.0%" in text and "Per class" in text and "Confusion table" in text and "truth ↓ / predicted →" in text
    assert '<td class="num hit">42</td>' in text and '<td class="num miss">16</td>' in text
    without = Page(render_report(full_run(evaluation=None), [], []))
    assert "Evaluation" not in without.headings


def test_sample_values_and_names_are_escaped_and_long_values_truncated():
    text = render_report(full_run(), [], SAMPLE)
    assert "<script>" not in text and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "&lt;b&gt;odd column&lt;/b&gt;" in text and "<b>odd column</b>" not in text
    assert "a &amp; b" in text
    assert ">" + "long " * 32 + "…</span>" in text  # 160 characters shown; the whole value in the tooltip
    assert "_run_id" not in text  # the same for every row: not a column of the table


def test_a_bare_run_still_renders():
    text = render_report({"run_id": "x<y", "status": "failed"}, [], [])
    page = Page(text)  # no chart at all: Page checks the tags only
    assert not page.problems, page.problems
    assert "x&lt;y" in text and "failed" in page.headings[0] and "No earlier run of this pipeline" in text
    assert "No review sample" in text and "No answers were timed" in text


@pytest.fixture
def history_dir(tmp_path):
    ifr.set_history(directory=str(tmp_path / "history"), sample=0.2, max_sample=10)
    yield str(tmp_path / "history")
    ifr.set_history()


def test_the_report_of_a_real_job_against_the_simulator(history_dir, tmp_path, monkeypatch):
    def responder(body):
        return "pos" if int(body["messages"][-1]["content"].split()[-1]) % 3 else "neg"

    with Simulator(SimulatorConfig(responder=responder)) as sim:
        for start in (0, 100):
            df = ifr.from_pydict({"q": [f"<i>review</i> {i}" for i in range(start, start + 30)]}).with_column(
                "label", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="sk-report-secret",
                                model="gpt-5-mini", use_chat_completions=True))
            df.collect()
    monkeypatch.chdir(tmp_path)
    path = report(directory=history_dir)
    newest = RunHistory(history_dir).runs()[0]
    assert path == f"inferframe-report-{newest['run_id']}.html" and os.path.exists(tmp_path / path)
    text = open(tmp_path / path, encoding="utf-8").read()
    page = check_page(text)
    assert set(PANELS) <= set(page.headings) and "1 earlier run(s) of this pipeline" in text
    assert "gpt-5-mini" in text and "sk-report-secret" not in text
    assert "&lt;i&gt;review&lt;/i&gt;" in text and "<i>review" not in text  # the sample's inputs, escaped
    older = RunHistory(history_dir).runs()[1]["run_id"]
    text = open(report(older, str(tmp_path / "old.html"), directory=history_dir), encoding="utf-8").read()
    assert f"inferframe run {older}" in text and "0 earlier run(s)" in text  # the newer run is not "earlier"


def test_report_names_the_run_and_compares_with_earlier_runs_of_the_same_pipeline_only(tmp_path):
    h = RunHistory(tmp_path)
    for i, fp in enumerate(["a", "b", "a", "a"]):
        h.record({"run_id": f"r{i}", "started": float(i + 1), "ended": float(i + 2), "fingerprint": fp, "rows": 1}, [])
    text = open(report("r2", str(tmp_path / "new" / "r2.html"), directory=str(tmp_path)), encoding="utf-8").read()
    assert "inferframe run r2" in text and "1 earlier run(s)" in text  # r0 only: r1 is another pipeline, r3 is newer


def test_report_errors_clearly_for_an_empty_history_or_an_unknown_run(tmp_path):
    with pytest.raises(PlanError, match="has no run yet"):
        report(directory=str(tmp_path))
    RunHistory(tmp_path).record({"run_id": "r1", "started": 1.0, "fingerprint": "f"}, [])
    with pytest.raises(PlanError, match=r"no run 'nope'.*\['r1'\]"):
        report("nope", directory=str(tmp_path))
    assert not list(tmp_path.glob("*.html"))


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_report_without_console_errors(tmp_path):
    html_path = tmp_path / "report.html"
    html_path.write_text(render_report(full_run(), EARLIER, SAMPLE), encoding="utf-8")
    png = tmp_path / "report.png"
    proc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
                           f"--screenshot={png}", "--window-size=1280,3000", "--enable-logging=stderr", "--v=0",
                           f"file://{html_path}"], capture_output=True, text=True, timeout=120)
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert "Uncaught" not in log and "CONSOLE" not in log, log[-2000:]


# Measures, in the browser, how far each table's box scrolls past its visible width (the report itself has no script).
MEASURE = """<script>
const over = {};
for (const box of document.querySelectorAll("section .scroll")) {
  const title = box.closest("section").querySelector("h2").textContent;
  over[title] = Math.max(over[title] || 0, box.scrollWidth - box.clientWidth);
}
document.body.setAttribute("data-overflow", JSON.stringify(over));
</script></body>"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("width", [1280, 1000])
def test_the_tokens_and_cost_table_shows_every_header_whole(tmp_path, width):
    import json
    import re

    cached = dict(cached_tokens=1500, cache_saved=0.0042)
    earlier = [{**EARLIER[0], "cached_tokens": 1200, "cache_saved": 0.0031}]
    text = render_report(full_run(**cached), earlier, SAMPLE)
    assert "cache saved" in text and "per 1k rows" in text  # the widest form of the table
    html_path = tmp_path / "report.html"
    html_path.write_text(text.replace("</body>", MEASURE), encoding="utf-8")
    proc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
                           "--dump-dom", f"--window-size={width},3000", f"file://{html_path}"],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'data-overflow="([^"]*)"', proc.stdout)
    assert found, proc.stderr[-2000:]
    over = json.loads(found.group(1).replace("&quot;", '"'))
    assert over["Tokens and cost"] <= 0, f"the table is cut by {over['Tokens and cost']} px at a {width} px window"


def test_a_self_hosted_server_s_capacity_shows_in_last_run_and_the_report(history_dir, tmp_path):
    """Issue 46: the in-flight bound over time and why it moved, against a server of capacity 16 (a FIFO beyond)."""
    with Simulator(SimulatorConfig(capacity=16, latency_ms=100)) as sim:
        df = ifr.from_pydict({"q": [f"row {i}" for i in range(800)]}).with_column(
            "label", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="sk-x", model="gpt-5-mini",
                            use_chat_completions=True))
        df.collect()
        waited = sim.stats()["queued"]
    moves = ifr.last_run()[0]["concurrency"]
    assert moves[0][1:] == [64, "start"] and "capacity" in [why for _, _, why in moves], moves
    # 64 at first (each request waited out 3 others' 100 ms), then cut toward 16 (bench/self_hosted.py measures how close).
    assert moves[-1][1] < 48 and waited > 0, moves
    text = open(report(None, str(tmp_path / "r.html"), directory=history_dir), encoding="utf-8").read()
    assert "Requests in flight and their bound" in text and "capacity from" in text
