"""The HTML report of one run: a single self-contained file (inline CSS and SVG, no script, no fetch).

Panels: totals, rows/s over time, latency histogram, tokens and cost (with the input the provider's
prompt cache served and what it saved), errors by kind, 429s and
retries over time, each AI column's output against the earlier runs of the same pipeline (drift in
red), an alert where a column's answers were (nearly) all one value (the quality guard), the
evaluation when one was stored, and the review sample. Every value from the data is escaped.

Example:
    >>> run = {"run_id": "r1", "started": 0.0, "ended": 2.0, "rows": 3, "requests": 3,
    ...        "distributions": {"label": {"rows": 3, "categories": {"pos": 2, "neg": 1}}}}
    >>> page = render_report(run, [], [{"q": "<script>x</script>", "label": "pos"}])
    >>> page.startswith("<!DOCTYPE html>"), "&lt;script&gt;" in page, "<script>" in page
    (True, True, False)
"""

from __future__ import annotations

import datetime
import html
import json
import math
from typing import Any, Sequence

from inferframe.observe.history import shares
from inferframe.observe.quality import FIX, Measurement, same_answer
from inferframe.observe.report_style import CSS
from inferframe.observe.stats import LATENCY_BOUNDS

BLUE, GREY, RED, ORANGE = "#2563eb", "#a3aab8", "#dc2626", "#ea8c00"
NUM = ' class="num"'
W = 520  # width of every chart's viewBox (it scales to the card)



def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(x: float | int | None) -> str:
    """A short figure: 1,234 / 12.3k / 0.056 (None: a dash)."""
    if x is None:
        return "–"
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.3g}M"
    if a >= 1e5:
        return f"{x / 1e3:.3g}k"
    return f"{x:,.0f}" if a >= 100 or float(x).is_integer() else f"{x:.3g}"


def _secs(s: float | None) -> str:
    if s is None:
        return "–"
    if s < 1:
        return f"{s * 1000:.3g} ms"
    if s < 120:
        return f"{s:.3g} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60)} min" if s >= 3600 else f"{int(s // 60)} min {int(s % 60)} s"


def _cost(x: float | None) -> str:
    return "–" if x is None else f"${x:,.2f}" if x >= 1 else f"${x:.4f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _ticks(hi: float, n: int = 4) -> list[float]:
    """Round axis ticks from 0 to at least ``hi``."""
    hi = hi if hi > 0 else 1.0
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [step * i for i in range(int(math.ceil(hi / step - 1e-9)) + 1)]


def _svg(h: float) -> str:
    return f'<svg viewBox="0 0 {W} {h:.0f}" width="{W}" height="{h:.0f}" role="img">'


def _legend(series: Sequence[tuple[str, str]]) -> str:
    return '<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{_e(n)}</span>' for n, c in series) + "</div>"


# --- charts ----------------------------------------------------------------------------------------

def line_chart(series: list[tuple[str, str, list[tuple[float, float]]]], x_label: str = "seconds", y_fmt=_num) -> str:
    """Lines ``(name, colour, [(x, y), ...])`` over shared axes starting at zero."""
    h, left, right, top, bottom = 190, 46, 12, 10, 32
    xs = [x for _, _, pts in series for x, _ in pts] or [1.0]
    ys = [y for _, _, pts in series for _, y in pts] or [1.0]
    xt, yt = _ticks(max(xs)), _ticks(max(ys))
    sx = lambda x: left + (W - left - right) * x / xt[-1]  # noqa: E731
    sy = lambda y: h - bottom - (h - top - bottom) * y / yt[-1]  # noqa: E731
    out = [_svg(h)]
    for y in yt:
        out.append(f'<line x1="{left}" x2="{W - right}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#eceef2"/>'
                   f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{_e(y_fmt(y))}</text>')
    for x in xt:
        out.append(f'<text x="{sx(x):.1f}" y="{h - bottom + 15}" text-anchor="middle">{_e(_num(x))}</text>')
    out.append(f'<text x="{W - right}" y="{h - 3}" text-anchor="end">{_e(x_label)}</text>')
    for _, colour, pts in series:
        if pts:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" stroke-linejoin="round"/>')
            if len(pts) == 1:
                out.append(f'<circle cx="{sx(pts[0][0]):.1f}" cy="{sy(pts[0][1]):.1f}" r="3" fill="{colour}"/>')
    out.append("</svg>")
    return "".join(out) + _legend([(n, c) for n, c, _ in series])


def bar_chart(rows: list[tuple[str, list[float], bool]], series: list[tuple[str, str]], fmt=_num) -> str:
    """Horizontal grouped bars: ``(label, [value per series], flagged)``; a flagged row is drawn in red."""
    bar, gap = 11, 9
    label_w = min(200, 16 + 7.2 * max((len(r[0][:28]) for r in rows), default=4))
    span = W - label_w - 62
    top = max((v for _, vals, _ in rows for v in vals), default=0) or 1
    h = len(rows) * (len(series) * (bar + 2) + gap) + 4
    out, y = [_svg(h)], 4
    for label, values, flagged in rows:
        short = label if len(label) <= 28 else label[:27] + "…"
        mid = y + len(series) * (bar + 2) / 2 + 3
        colour = ' style="fill:#dc2626;font-weight:600"' if flagged else ""
        out.append(f'<text x="{label_w - 8}" y="{mid:.1f}" text-anchor="end"{colour}><title>{_e(label)}</title>{_e(short)}</text>')
        for (name, c), v in zip(series, values):
            c = RED if flagged and c == BLUE else c
            wd = max(span * v / top, 1 if v else 0)
            out.append(f'<rect x="{label_w}" y="{y}" width="{wd:.1f}" height="{bar}" rx="2" fill="{c}"/>'
                       f'<text x="{label_w + wd + 5:.1f}" y="{y + bar - 2}">{_e(fmt(v))}</text>')
            y += bar + 2
        y += gap
    out.append("</svg>")
    return "".join(out) + (_legend(series) if len(series) > 1 else "")


def histogram(counts: list[int], bounds: Sequence[float], markers: list[tuple[str, float | None]]) -> str:
    """Vertical bars per latency bucket (upper ``bounds`` in seconds), dashed lines at the ``markers``."""
    used = [i for i, c in enumerate(counts) if c]
    if not used:
        return '<p class="note">No answers were timed.</p>'
    lo, hi = max(used[0] - 1, 0), min(used[-1] + 2, len(counts))
    h, left, bottom, top = 200, 46, 34, 44
    n = hi - lo
    bw = (W - left - 28) / n
    yt = _ticks(max(counts[lo:hi]))
    sy = lambda y: h - bottom - (h - top - bottom) * y / yt[-1]  # noqa: E731
    out = [_svg(h)]
    for y in yt:
        out.append(f'<line x1="{left}" x2="{W - 28}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#eceef2"/>'
                   f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{_e(_num(y))}</text>')
    every = max(1, math.ceil(n / 8))
    for k, i in enumerate(range(lo, hi)):
        x = left + k * bw
        out.append(f'<rect x="{x + 1:.1f}" y="{sy(counts[i]):.1f}" width="{bw - 2:.1f}" height="{sy(0) - sy(counts[i]):.1f}" '
                   f'fill="{BLUE}" rx="1"><title>≤ {_e(_secs(bounds[i]) if bounds[i] != math.inf else "more")}: '
                   f'{counts[i]:,}</title></rect>')
        if k % every == 0 or i == hi - 1:
            label = _secs(bounds[i]) if bounds[i] != math.inf else "more"
            out.append(f'<text x="{x + bw - 1:.1f}" y="{h - bottom + 14}" text-anchor="middle">{_e(label)}</text>')
    out.append(f'<text x="{W - 10}" y="{h - 3}" text-anchor="end">answer time (upper bound of each bucket)</text>')
    for j, (name, value) in enumerate(markers):
        if value is None:
            continue
        i = min(range(len(bounds)), key=lambda b: abs(bounds[b] - value) if bounds[b] != math.inf else math.inf)
        x = left + (min(max(i, lo), hi - 1) - lo + 1) * bw
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{8 + 12 * j}" y2="{h - bottom}" stroke="{ORANGE}" stroke-dasharray="4 3"/>'
                   f'<text x="{x - 3:.1f}" y="{16 + 12 * j}" text-anchor="end" style="fill:{ORANGE}">{_e(name)}</text>')
    out.append("</svg>")
    return "".join(out)


# --- panels ----------------------------------------------------------------------------------------

def _tiles(items: list[tuple[str, str] | tuple[str, str, bool]]) -> str:
    return '<div class="tiles">' + "".join(
        f'<div class="tile{" bad" if len(t) > 2 and t[2] else ""}"><b>{_e(t[1])}</b><span>{_e(t[0])}</span></div>'
        for t in items) + "</div>"


def _section(title: str, body: str, wide: bool = False) -> str:
    cls = ' class="wide"' if wide else ""
    return f"<section{cls}><h2>{_e(title)}</h2>{body}</section>"


def _table(head: list[str], rows: list[list[str]], num_from: int | None = 1, classes: list[list[str]] | None = None) -> str:
    """A table of already-escaped cells; columns from ``num_from`` on (None: none) are right-aligned numbers."""
    num_from = len(head) if num_from is None else num_from
    th = "".join(f"<th{NUM if i >= num_from else ''}>{h}</th>" for i, h in enumerate(head))
    body = []
    for r, row in enumerate(rows):
        cells = []
        for i, cell in enumerate(row):
            cls = " ".join(c for c in ("num" if i >= num_from else "", classes[r][i] if classes else "") if c)
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{cell}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _totals(run: dict) -> str:
    g = lambda k: run.get(k) or 0  # noqa: E731
    duration = (run["ended"] - run["started"]) if run.get("ended") and run.get("started") else None
    rate = g("rows") / duration if duration else None
    calls = run.get("calls") or []
    models = sorted({f"{c.get('provider')}:{c.get('model')}" for c in calls})
    versions = [v for v in run.get("prompt_versions") or [] if v]
    cached = [("input from prompt cache", f"{_num(g('cached_tokens'))} ({_pct(g('cached_tokens') / g('input_tokens'))})"),
              ("prompt cache saved", _cost(g("cache_saved")))] if g("cached_tokens") and g("input_tokens") else []
    tiles = _tiles([("rows", _num(g("rows"))), ("requests", _num(g("requests"))), ("input tokens", _num(g("input_tokens"))),
                    ("output tokens", _num(g("output_tokens"))), ("cost", _cost(run.get("cost"))), *cached,
                    ("cache hits", _num(g("cache_hits"))), ("retries", _num(g("retries")), g("retries") > 0),
                    ("429s", _num(g("rate_limited")), g("rate_limited") > 0), ("errors", _num(g("errors")), g("errors") > 0),
                    ("truncated", _num(g("truncated")), g("truncated") > 0), ("duration", _secs(duration)),
                    ("rows/s", _num(rate)), ("latency p50", _secs(run.get("latency_p50_s"))),
                    ("latency p99", _secs(run.get("latency_p99_s")))])
    lines: dict[str, int] = {}
    for c in calls:
        line = (f"{_e(c.get('label') or '')}: {_e(c.get('provider'))} · <b>{_e(c.get('model'))}</b> · "
                f"{_e(c.get('endpoint') or '')}{' · prompt ' + _e(c['prompt_version']) if c.get('prompt_version') else ''}"
                f"{' · ' + _e(c['base_url']) if c.get('base_url') else ''}")
        lines[line] = lines.get(line, 0) + 1
    items = "".join(f"<li>{line}{f' (× {n} calls)' if n > 1 else ''}</li>" for line, n in lines.items())
    meta = (f'<p class="note">Models: {_e(", ".join(models) or "–")} · prompt versions: '
            f'{_e(", ".join(versions) or "unversioned")}</p>') + (f'<ul class="calls">{items}</ul>' if items else "")
    return _section("Totals", tiles + meta, wide=True)


def _clock(tl: list) -> tuple[float, str]:
    """The time axis of a timeline: (seconds per unit, unit)."""
    return (60.0, "minutes") if tl and tl[-1][0] > 300 else (1.0, "seconds")


def _throughput(run: dict) -> str:
    tl = run.get("timeline") or []
    (unit, label), duration = _clock(tl), (tl[-1][0] if tl else 0) or 1
    window = max(1.0, duration / 30)  # rows/s over a trailing window: rows finish in batches, samples are 0.5 s apart
    marks, pts = [(0.0, 0)] + [(p[0], p[1]) for p in tl], []
    for i, (t, done) in enumerate(marks[1:], 1):
        t0, d0 = next((m for m in reversed(marks[:i]) if m[0] <= t - window), marks[0])
        if t - t0 > 0 and (not pts or t - pts[-1][0] * unit >= 0.1):  # the last sample is a few ms after the one before
            pts.append((t / unit, (done - d0) / (t - t0)))
    if len(pts) < 2:
        body = f'<p class="note">The run was too short for a curve: {_e(_num(run.get("rows") or 0))} rows.</p>'
    else:
        body = (f'<p class="note">{_num(tl[-1][1] / duration)} rows/s on average · peak {_num(max(y for _, y in pts))} rows/s '
                f'(over {_secs(window)})</p>' + line_chart([("rows/s", BLUE, pts)], label))
    return _section("Rows per second", body)


def _bound(run: dict) -> str:
    """Requests in flight and their bound over the run, and why the bound moved (issue 46); none in older runs."""
    tl = [p for p in run.get("timeline") or [] if len(p) > 8]
    if not tl:
        return ""
    unit, label = _clock(tl)
    moves = " · ".join(f"{_e(p[8])} from {_secs(p[0])}" for a, p in zip([None] + tl, tl) if a is None or a[8] != p[8])
    series = [(n, c, [(p[0] / unit, p[i]) for p in tl]) for n, c, i in (("bound", ORANGE, 7), ("in flight", BLUE, 6))]
    return _section("Requests in flight and their bound", f'<p class="note">Why the bound moved (start, limits, latency, '
                    f'capacity, 429, faults, cap): {moves}</p>' + line_chart(series, label))


def _latency(run: dict) -> str:
    marks = [(f"p{q}", run.get(f"latency_p{q}_s")) for q in (50, 90, 99)]
    head = '<p class="note">' + " · ".join(f"{n} {_e(_secs(v))}" for n, v in marks) + "</p>"
    return _section("Latency", head + histogram(run.get("latency_hist") or [], LATENCY_BOUNDS, marks))


def _tokens(run: dict, earlier: list[dict]) -> str:
    history = list(reversed(earlier[:5])) + [run]
    name = lambda r: "this run" if r is run else _date(r.get("started"), short=True)  # noqa: E731
    per_k = lambda r: _cost((r.get("cost") or 0) * 1000 / r["rows"] if r.get("rows") else None)  # noqa: E731
    if any(r.get("cached_tokens") for r in history):  # the provider's prompt cache served part of the input
        table = _table(["run", "rows", "tokens in", "of which cached", "tokens out", "cost", "cache saved", "per 1k rows"],
                       [[_e(name(r)), _num(r.get("rows") or 0), _num(r.get("input_tokens") or 0),
                         _num(r.get("cached_tokens") or 0), _num(r.get("output_tokens") or 0), _cost(r.get("cost")),
                         _cost(r.get("cache_saved") or 0.0), per_k(r)] for r in history])
    else:
        table = _table(["run", "rows", "tokens in", "tokens out", "cost", "per 1k rows"],
                       [[_e(name(r)), _num(r.get("rows") or 0), _num(r.get("input_tokens") or 0),
                         _num(r.get("output_tokens") or 0), _cost(r.get("cost")), per_k(r)] for r in history])
    bars = bar_chart([(name(r), [r.get("input_tokens") or 0, r.get("output_tokens") or 0], False) for r in history],
                     [("input", BLUE), ("output", GREY)])
    head = "this run and up to 5 earlier runs of the pipeline" if earlier else "no earlier run of this pipeline"
    # The table keeps its whole width: beside the chart where both fit, else below it (a grid cell cut it off).
    return _section("Tokens and cost", f'<p class="note">Tokens per run ({head}).</p><div class="pair">'
                    f'<div>{bars}</div><div class="whole">{table}</div></div>', wide=True)


def _errors(run: dict) -> str:
    kinds = run.get("errors_by_kind") or {}
    if not kinds:
        body = f'<p class="note">No row failed ({_e(_num(run.get("errors") or 0))} errors counted).</p>'
    else:
        rows = run.get("rows") or 0
        share = f" in {_num(rows)} rows" if rows else ""
        body = (f'<p class="note">{_num(sum(kinds.values()))} failed value(s){share}; each is null with an error record '
                'in its <code>&lt;column&gt;_error</code> column.</p>' +
                bar_chart([(k, [v], False) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])], [("rows", RED)]))
    return _section("Errors by kind", body)


def _retries(run: dict) -> str:
    tl = run.get("timeline") or []
    if not tl:
        return _section("429s and retries", '<p class="note">No timeline was recorded.</p>')
    unit, label = _clock(tl)
    series = [(name, c, [(0.0, 0.0)] + [(p[0] / unit, p[i]) for p in tl]) for name, c, i in
              (("429s", ORANGE, 3), ("retries", BLUE, 4), ("errors", RED, 5))]
    return _section("429s and retries", '<p class="note">Cumulative counts over the run.</p>' + line_chart(series, label))


def _drift_line(m: dict) -> str:
    return (f'<p class="drift">Drift in {_e(m.get("column"))} = {_e(repr(m.get("value")))}: {_pct(m.get("before"))} before '
            f'→ {_pct(m.get("after"))} now ({(m.get("sigmas") or 0):.1f}σ, PSI {(m.get("psi") or 0):.2f}, against '
            f'{_e(m.get("runs_before"))} earlier run(s))</p>')


def _column(column: str, d: dict, olds: list[dict], drifts: list[dict]) -> str:
    """One AI column's output: shares of its values (or its numbers) against the earlier runs."""
    line = f'{_e(_num(d.get("rows")))} rows · {_pct(d.get("null_rate"))} null · {_pct(d.get("error_rate"))} errors'
    if olds:
        mean = lambda k: sum(o.get(k) or 0 for o in olds) / len(olds)  # noqa: E731
        line += f' (earlier: {_pct(mean("null_rate"))} null, {_pct(mean("error_rate"))} errors)'
    parts = [f'<h3>{_e(column)}</h3><p class="note">{line}</p>']
    if d.get("categories"):
        pooled: dict[str, int] = {}
        for o in olds:
            for k, v in (o.get("categories") or {}).items():
                pooled[k] = pooled.get(k, 0) + v
        now, was = shares(d["categories"]), shares(pooled)
        flagged = {m["value"] for m in drifts}
        keys = sorted(set(now) | set(was), key=lambda k: (-now.get(k, 0), k))[:20]
        series = [("earlier runs", GREY), ("this run", BLUE)] if olds else [("this run", BLUE)]
        parts.append(bar_chart([(k, ([was.get(k, 0)] if olds else []) + [now.get(k, 0)], k in flagged) for k in keys],
                               series, fmt=_pct))
    for key, title in (("numbers", "Values"), ("length", "Text length (characters)")):
        stats = d.get(key)
        if stats:
            prev = [o[key] for o in olds if o.get(key)]
            head = ["statistic", "this run"] + (["earlier runs (mean)"] if prev else [])
            rows = [[_e(s), _e(_num(stats.get(s)))] + ([_e(_num(sum(o.get(s) or 0 for o in prev) / len(prev)))] if prev else [])
                    for s in ("mean", "std", "min", "p5", "p50", "p95", "max")]
            parts.append(f'<p class="note">{title}</p>' + _table(head, rows))
    if not d.get("categories") and not d.get("numbers") and not d.get("length"):
        parts.append('<p class="note">A struct: see its fields.</p>' if "." not in column else "")
    return '<div>' + "".join(parts + [_drift_line(m) for m in drifts]) + "</div>"


def earlier_runs(earlier: list[dict]) -> str:
    """The earlier runs of the pipeline, counted as the header and the distributions both say it.

    Only finished runs (``ok``) are compared with; the others are named by their status.

    Example:
        >>> earlier_runs([{"status": "ok"}, {"status": "interrupted"}])
        '2 earlier run(s) of this pipeline (1 interrupted)'
        >>> earlier_runs([])
        '0 earlier run(s) of this pipeline'
    """
    other: dict[str, int] = {}
    for r in earlier:
        status = r.get("status") or "ok"
        if status != "ok":
            other[status] = other.get(status, 0) + 1
    said = f"{len(earlier)} earlier run(s) of this pipeline"
    return said + (f" ({', '.join(f'{n} {s}' for s, n in sorted(other.items()))})" if other else "")


def _distributions(run: dict, earlier: list[dict]) -> str:
    dists, drifts = run.get("distributions") or {}, run.get("drift") or []
    before = [r.get("distributions") or {} for r in earlier if (r.get("status") or "ok") == "ok"]
    if before:
        intro = ('<p class="note">Shares of each value, this run against the pooled earlier runs of the same pipeline'
                 f' that finished ({len(before)} of {len(earlier)} run(s)); values that drifted are red.</p>')
    elif earlier:
        intro = (f'<p class="note">No earlier run of this pipeline finished ({_e(earlier_runs(earlier))}): none to '
                 'compare with.</p>')
    else:
        intro = '<p class="note">No earlier run of this pipeline to compare with.</p>'
    if not dists:
        intro += '<p class="note">No AI column output was recorded.</p>'
    blocks = [_column(c, d, [b[c] for b in before if c in b], [m for m in drifts if m.get("column") == c])
              for c, d in dists.items()]
    known = set(dists)
    blocks += [_drift_line(m) for m in drifts if m.get("column") not in known]
    return _section("Output distributions", intro + '<div class="grid">' + "".join(blocks) + "</div>", wide=True)


def _evaluation(ev: dict) -> str:
    items = [("accuracy", _pct(ev.get("accuracy")))]
    items += [(k.replace("_", " "), _pct(ev[k]) if k == "exact_match" else f"{ev[k]:.3g}")
              for k in ("macro_f1", "exact_match", "mae", "rmse") if ev.get(k) is not None]
    items += [("rows", _num(ev.get("rows"))), ("missing", _num(ev.get("missing"))), ("unlabelled", _num(ev.get("unlabelled"))),
              ("null rate", _pct(ev.get("null_rate"))), ("error rate", _pct(ev.get("error_rate")))]
    parts = [f'<p class="note">{_e(ev.get("prediction"))} against {_e(ev.get("truth"))} ({_e(ev.get("kind"))})</p>', _tiles(items)]
    if ev.get("per_class"):
        rows = [[_e(k), f"{v.get('precision', 0):.3f}", f"{v.get('recall', 0):.3f}", f"{v.get('f1', 0):.3f}",
                 _e(_num(v.get("support")))] for k, v in ev["per_class"].items()]
        parts.append("<h3>Per class</h3>" + _table(["class", "precision", "recall", "F1", "support"], rows))
    conf = ev.get("confusion")
    if conf and conf.get("labels"):
        labels, counts, nulls = conf["labels"], conf.get("counts") or [], conf.get("null") or []
        head = ["truth ↓ / predicted →"] + [_e(v) for v in labels] + ["(null)"]
        rows, classes = [], []
        for i, truth in enumerate(labels):
            row = counts[i] if i < len(counts) else []
            rows.append([_e(truth)] + [_e(_num(c)) for c in row] + [_e(_num(nulls[i] if i < len(nulls) else 0))])
            classes.append([""] + ["hit" if j == i else ("miss" if c else "") for j, c in enumerate(row)] +
                           ["miss" if i < len(nulls) and nulls[i] else ""])
        parts.append("<h3>Confusion table</h3>" + _table(head, rows, classes=classes))
    if ev.get("field_agreement"):
        parts.append("<h3>Field agreement</h3>" + _table(["field", "agreement"], [[_e(k), _pct(v)] for k, v in ev["field_agreement"].items()]))
    return _section("Evaluation", "".join(parts), wide=True)


def _cell(value: Any, limit: int = 160) -> str:
    if value is None:
        return '<span class="null">null</span>'
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    if len(text) <= limit:
        return _e(text)
    return f'<span title="{_e(text[:2000])}">{_e(text[:limit])}…</span>'


def _sample(sample: list[dict]) -> str:
    if not sample:
        return _section("Review sample", '<p class="note">No review sample was kept for this run.</p>', wide=True)
    cols: list[str] = []
    for row in sample:
        cols += [k for k in row if k not in cols and k != "_run_id"]
    rows = [[_e(i + 1)] + [_cell(r.get(c)) for c in cols] for i, r in enumerate(sample)]
    body = f'<p class="note">{len(sample)} row(s), every k-th row of the job.</p>' + _table(["#"] + [_e(c) for c in cols], rows, None)
    return _section("Review sample", body, wide=True)


def _date(ts: float | None, short: bool = False) -> str:
    if not ts:
        return "–"
    t = datetime.datetime.fromtimestamp(ts).astimezone()
    return t.strftime("%m-%d %H:%M:%S") if short else t.strftime("%Y-%m-%d %H:%M:%S %Z")


def low_information(run: dict) -> list[tuple[str, Measurement]]:
    """The AI columns whose recorded answers were (nearly) all one value (the quality guard's ``same_answer``).

    Example:
        >>> run = {"distributions": {"ok": {"rows": 20, "categories": {"true": 20}},
        ...                          "label": {"rows": 20, "categories": {"pos": 12, "neg": 8}}}}
        >>> [(c, m.summary) for c, m in low_information(run)]
        [('ok', '20/20 true')]
    """
    out = []
    for column, d in (run.get("distributions") or {}).items():
        m = same_answer(d.get("categories") or {})
        if m is not None:
            out.append((column, m))
    return out


def render_report(run: dict, earlier: list[dict], sample: list[dict]) -> str:
    """The HTML report of ``run`` against ``earlier`` runs of the same pipeline (newest first), with its review ``sample``."""
    status = run.get("status") or "ok"
    drifts = run.get("drift") or []
    alert = ""
    if drifts:
        alert = '<div class="alert"><b>Drift:</b> ' + "; ".join(
            f'{_e(m.get("column"))} = {_e(repr(m.get("value")))} {_pct(m.get("before"))} → {_pct(m.get("after"))}'
            for m in drifts) + "</div>"
    low = low_information(run)
    if low:
        alert += ('<div class="alert"><b>Answers that carry little information:</b> ' + "; ".join(
            f"{_e(c)}: {_e(m.summary)}" for c, m in low) + f". {_e(FIX[0].upper() + FIX[1:])}.</div>")
    panels = [_totals(run), '<div class="grid">', _throughput(run), _latency(run), _retries(run), _errors(run), _bound(run), "</div>",
              _tokens(run, earlier), _distributions(run, earlier)]
    if run.get("evaluation"):
        panels.append(_evaluation(run["evaluation"]))
    panels.append(_sample(sample))
    title = f"inferframe run {run.get('run_id')}"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>"
            f'<h1>{_e(title)}<span class="badge{" failed" if status != "ok" else ""}">{_e(status)}</span></h1>'
            f'<div class="sub">{_e(_date(run.get("started")))} · pipeline {_e(run.get("fingerprint") or "–")} · '
            f'{_e(earlier_runs(earlier))}</div>{alert}{"".join(panels)}</main></body></html>\n')
