"""A live progress line for AI work, and the totals of the last run.

Shown on a terminal while a job with AI calls runs: rows done/total, rows/s,
in flight and what the other rows wait for (a rate-limit pause, a retry), tokens,
cost, the share of input the provider's prompt cache served and what it saved,
retries, 429s, errors and ETA. Quiet when stdout is not a terminal, with
``progress=False`` (a job's argument, or the session's ``set_progress``), or with INFERFRAME_PROGRESS=0.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from typing import Iterator

from inferframe.errors import LowInformationWarning, SemanticFailuresWarning, warn_user
from inferframe.observe.budget_note import warn_budget
from inferframe.observe.quality import FIX, FIX_EXAMPLES, guard_fields, message, same_answer
from inferframe.observe.stats import RunCounters, RunStats

# The totals of the most recent job that ended in this process, written once as each job ends (its own
# counters are per job): last_run() takes no argument and the Session sits above this layer.
_last: list[dict] = []


def last_run() -> list[dict]:
    """Totals of each AI call in the last job that had AI calls: rows, requests, tokens, cost, retries, 429s, errors.

    The last job is the one that ended most recently in this process (with jobs running at once in
    several threads, whichever finished last); each job's figures are its own calls only.

    ``cached_tokens`` is the part of ``input_tokens`` the provider's prompt cache served and
    ``cache_saved`` the dollars that saved against the full input rate.

    Example:
        >>> isinstance(last_run(), list)
        True
    """
    return [dict(d) for d in _last]


def publish_last(totals: list[dict]) -> None:
    """Make ``totals`` (one dict per AI call, as ``last_run()`` gives them) the last run's: for jobs that end
    outside a job of this process (a Spark action over AI columns, whose executors report as they go).

    Example:
        >>> publish_last([{"label": "prompt[m]", "requests": 2}])
        >>> last_run()[0]["requests"]
        2
    """
    global _last
    _last = [dict(d) for d in totals]


def guard_answers(runs: list[dict], warn: bool = True) -> None:
    """The quality guard at the end of a job: one LowInformationWarning if a call's answers were (nearly) all one label.

    Each run entry that counted its answers gets ``quality``: the measurement (None: the answers vary),
    so ``last_run()`` shows it; ``warn=False`` records it only.

    Example:
        >>> import warnings
        >>> runs = [{"label": "sem_filter[score m]", "answers": {"yes": 20}, "answers_raw": {}}]
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     guard_answers(runs)
        >>> runs[0]["quality"]["summary"], w[0].category.__name__
        ('20/20 yes', 'LowInformationWarning')
    """
    fired = []
    for r in runs:
        if not r.get("answers"):
            continue
        m = same_answer(r["answers"], raw=r.get("answers_raw"))
        r["quality"] = None if m is None else m.as_dict()
        if m is not None:
            fired.append((r["label"], m))
    guard_fields(runs, warn)  # structured answers: a field constant over the rows, numbers out of range
    if fired and warn:
        # Examples are a fix where the call shows them to the model: classify_text (its calls count answers, as
        # sem_filter's do, whose examples= only choose a cascade's thresholds).
        warn_user("; ".join(message(label, [m], fix=FIX if label.startswith("sem_filter") else FIX_EXAMPLES)
                            for label, m in fired), LowInformationWarning)


def warn_semantic_failures(runs: list[dict]) -> None:
    """One SemanticFailuresWarning for a sem_filter whose rows failed: they are dropped from the result unless kept.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     warn_semantic_failures([{"label": "sem_filter[score m]", "errors": 2, "rows_done": 10}])
        >>> print(w[0].message)
        2 of 10 rows failed in sem_filter[score m] (a failed row is not kept; error_column=True keeps it with its error). on_error='raise' stops at the first failure.
    """
    # Rows DataFrame.sem_filter keeps with their error (ai/sem_filter.py's FAILED_KEPT) are data, not dropped rows.
    failed = [r for r in runs if r.get("errors") and str(r.get("label", "")).startswith("sem_filter")
              and not (r.get("stage_rows") or {}).get("failed, kept with their error")]
    if failed:
        what = "; ".join(f"{r['errors']} of {r['rows_done']} rows failed in {r['label']}" for r in failed)
        warn_user(f"{what} (a failed row is not kept; error_column=True keeps it with its error). "
                  "on_error='raise' stops at the first failure.", SemanticFailuresWarning)


def record_operator(label: str, calls: dict) -> None:
    """``last_run()`` becomes one entry for an operator that ran as several jobs (sem_topk's rounds, say): their sums.

    Parameters:
        label: the operator, as ``explain()`` names it.
        calls: its counts: ``calls``, ``failed``, ``requests``, ``cache_hits``, ``input_tokens``,
            ``output_tokens``, ``cost_usd`` (missing ones are 0); ``quality``: the quality guard's
            measurements (``observe.quality``), shown as they are.

    Example:
        >>> record_operator("SemTopK k=1", {"calls": 3, "requests": 3, "input_tokens": 90})
        >>> [(r["label"], r["rows_done"], r["requests"], r["input_tokens"]) for r in last_run()]
        [('SemTopK k=1', 3, 3, 90)]
    """
    global _last
    n = calls.get("calls", 0)
    _last = [RunStats(label=label, rows_total=n, rows_done=n, requests=calls.get("requests", 0),
                      errors=calls.get("failed", 0), cache_hits=calls.get("cache_hits", 0),
                      input_tokens=calls.get("input_tokens", 0), output_tokens=calls.get("output_tokens", 0),
                      cost=calls.get("cost_usd", 0.0)).as_dict()]
    if "quality" in calls:
        _last[0]["quality"] = calls["quality"]


def in_notebook() -> bool:
    """Running in a Jupyter kernel (where the progress is a live rich display and a run ends with an HTML summary)."""
    try:
        from IPython import get_ipython  # type: ignore

        shell = get_ipython()
        return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"
    except Exception:
        return False


def _should_show(explicit: bool | None) -> bool:
    if explicit is not None:
        return explicit
    if os.environ.get("INFERFRAME_PROGRESS", "").lower() in ("0", "false", "no"):
        return False
    return sys.stdout.isatty() or in_notebook()


def summary_html(runs: list[dict]) -> str:
    """A finished job's totals as an HTML table (shown under the cell in a notebook).

    Example:
        >>> "<td>12</td>" in summary_html([{"label": "prompt[m]", "rows_done": 12, "requests": 3, "cost": 0.5}])
        True
    """
    import html

    cols = [("label", "call"), ("rows_done", "rows"), ("requests", "requests"), ("cache_hits", "cache hits"),
            ("input_tokens", "tokens in"), ("cached_tokens", "of which cached"), ("output_tokens", "tokens out"),
            ("cost", "cost $"), ("cache_saved", "cache saved $"), ("retries", "retries"),
            ("rate_limited", "429s"), ("errors", "errors"), ("truncated", "truncated"), ("latency_p50_s", "p50 s"),
            ("elapsed_s", "seconds")]
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(k)))}</td>" for k, _ in cols) + "</tr>" for r in runs)
    return f"<table class='inferframe-run'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.4f}".rstrip("0").rstrip(".") if v else "0"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _fmt_tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def prompt_cache_note(input_tokens: int, cached_tokens: int, saved: float) -> str:
    """What the provider's prompt cache did: the share of input it served and the dollars saved ("" when none).

    Example:
        >>> prompt_cache_note(10_000, 6_100, 0.42)
        '61% of input cached, saved $0.4200'
        >>> prompt_cache_note(10_000, 20, 0.0), prompt_cache_note(10_000, 9_996, 0.0), prompt_cache_note(10_000, 0, 0.0)
        ('<1% of input cached', '99% of input cached', '')
    """
    if not cached_tokens or not input_tokens:
        return ""
    percent = cached_tokens * 100 // input_tokens  # rounded down: "100%" only when every input token was cached
    note = f"{percent}% of input cached" if percent else "<1% of input cached"
    return note + (f", saved ${saved:.4f}" if saved > 0 else "")


def render_line(stats: RunStats, total: int | None, width: int = 24) -> str:
    """One status line for one AI call.

    Example:
        >>> s = RunStats(label="prompt[gpt-5-mini]", rows_done=10, input_tokens=20_000, output_tokens=50, cost=0.0021)
        >>> s.add_usage(0, 0, 0.0, cached_tokens=12_288, cache_saved=0.0027648)
        >>> render_line(s, 10).split(" · ")[3:6]
        ['20.1k tok', '$0.0021', '61% of input cached, saved $0.0028']
    """
    elapsed = max(1e-9, time.monotonic() - stats.started)
    done = stats.rows_done
    rate = done / elapsed
    if total:
        frac = min(1.0, done / total)
        bar = "━" * int(frac * width) + "╺" + " " * (width - int(frac * width) - 1)
        eta = (total - done) / rate if rate > 0 else None
        eta_s = time.strftime("%H:%M:%S", time.gmtime(eta)) if eta is not None else "--:--:--"
        head = f"{stats.label} {bar} {done}/{total} rows"
    else:
        eta_s = "--:--:--"
        head = f"{stats.label} {done} rows"
    parts = [head, f"{rate:.1f} rows/s", *waiting_notes(stats), *cascade_notes(stats),
             f"{_fmt_tokens(stats.input_tokens + stats.output_tokens)} tok", f"${stats.cost:.4f}"]
    cache_note = prompt_cache_note(stats.input_tokens, stats.cached_tokens, stats.cache_saved)
    if cache_note:
        parts.append(cache_note)
    parts += [f"{stats.retries} retries", f"{stats.rate_limited}×429", f"{stats.errors} errors"]
    if stats.cache_hits:
        parts.append(f"{stats.cache_hits} cached")
    if stats.truncated:
        parts.append(f"{stats.truncated} truncated")
    if stats.not_run:
        parts.append(f"{stats.not_run} not run (budget)")
    parts.append(f"ETA {eta_s}")
    return " · ".join(parts)


def cascade_notes(stats: RunStats) -> list[str]:
    """What a cascade's stages answered, and the dollars it saved against its last stage alone.

    Example:
        >>> s = RunStats(label="cascade", stage_rows={"head": 75, "score": 25}, cascade_saved=0.012)
        >>> cascade_notes(s)
        ['answered by head 75 (75%), score 25 (25%)', 'saved $0.0120 vs score alone']
    """
    total = sum(stats.stage_rows.values())
    if not total:
        return []
    shares = ", ".join(f"{stage} {n} ({n / total:.0%})" for stage, n in stats.stage_rows.items())
    notes = [f"answered by {shares}"]
    if stats.cascade_saved > 0:
        notes.append(f"saved ${stats.cascade_saved:.4f} vs {list(stats.stage_rows)[-1]} alone")
    return notes


def waiting_notes(stats: RunStats) -> list[str]:
    """What the rows of a call are doing: in flight, and what the others wait for ("0 in flight" alone reads as a hang).

    Example:
        >>> waiting_notes(RunStats(in_flight=40, retrying=3))
        ['40 in flight', 'retrying 3 rows']
        >>> s = RunStats(retrying=1); s.pause_for(0.5)
        >>> waiting_notes(s)
        ['paused 0.5 s: rate limit', 'retrying 1 row']
        >>> waiting_notes(RunStats())
        ['0 in flight']
        >>> waiting_notes(RunStats(in_flight=250, concurrency=[[0.0, 64, "start"], [3.1, 256, "capacity"]]))
        ["250 in flight (bound by the server's capacity, 256)"]
    """
    notes = []
    paused = stats.paused_for
    if paused > 0:
        notes.append(f"paused {paused:.1f} s: rate limit")
    if stats.retrying:
        notes.append(f"retrying {stats.retrying} row{'s' if stats.retrying != 1 else ''}")
    if stats.in_flight or not notes:
        cap = stats.capacity_bound
        notes.insert(0, f"{stats.in_flight} in flight" + (f" (bound by the server's capacity, {cap})" if cap else ""))
    return notes


@contextlib.contextmanager
def job_progress(total: int | None, show: bool | None = None,
                 counters: RunCounters | None = None) -> Iterator[RunCounters]:
    """Track the AI calls of one job; draw a live line while it runs when ``show`` allows.

    Parameters:
        total: rows the job will produce (None: unknown; no bar, no ETA).
        show: True or False; None: on terminals and in notebooks unless ``INFERFRAME_PROGRESS=0``
            (the DataFrame passes its job's ``progress=``, else the session's ``set_progress``).
        counters: the job's counters, which the runner's services carry to its AI calls (None: new ones).

    The context gives the job's counters; when it ends their totals become ``last_run()``.

    Example:
        >>> with job_progress(2, show=False) as counters:
        ...     s = RunStats(label="prompt[m]", rows_done=2); counters.add(s)
        >>> [(r["label"], r["rows_done"]) for r in last_run()]
        [('prompt[m]', 2)]
    """
    counters = counters if counters is not None else RunCounters()
    stop = threading.Event()
    thread = None
    if _should_show(show):
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        console = Console(file=sys.stdout, force_jupyter=in_notebook() or None)

        def lines() -> Text:
            return Text("\n".join(render_line(s, total) for s in counters.runs()))

        def draw() -> None:
            with Live(lines(), console=console, refresh_per_second=4, transient=False) as live:
                while not stop.wait(0.25):
                    live.update(lines())
                live.update(lines())

        thread = threading.Thread(target=draw, name="inferframe-progress", daemon=True)
        thread.start()
    finished = False
    try:
        yield counters
        finished = True
    finally:
        stop.set()
        if thread is not None:
            thread.join(timeout=2)
        totals = [s.as_dict() for s in counters.runs()]
        global _last
        _last = totals
        warn_truncated(totals, stopped=not finished)
        # A job that raised (on_error="raise", a service failure) says so itself: no warnings on top.
        guard_answers(totals, warn=finished)
        if finished:
            warn_semantic_failures(totals)
            warn_budget(totals)  # on_error="raise" raised BudgetExceededError instead
        if totals and in_notebook():
            from IPython.display import HTML, display  # type: ignore

            display(HTML(summary_html(totals)))


def warn_truncated(runs: list[dict], stopped: bool = False) -> None:
    """One warning at the end of a job whose answers were cut at max_tokens: how many, and what to raise.

    The count is of the answers the job handed on (``returned``): a job stopped early (Ctrl-C, a
    breaker) counts the answers it handed on before it stopped, as ``stopped=True`` says.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     warn_truncated([{"label": "prompt[m]", "truncated": 3, "returned": 10, "rows_done": 12}])
        >>> print(w[0].message)
        3 of 10 answers of prompt[m] were cut off at max_tokens (their text is kept; <name>_usage.finish_reason is 'length'). Raise max_tokens (max_output_tokens on /responses) for whole answers.
    """
    cut = [r for r in runs if r.get("truncated")]
    if not cut:
        return
    before = " answered before the job stopped" if stopped else ""
    what = "; ".join(f"{r['truncated']} of {r.get('returned', r.get('rows_done'))} answers of {r['label']}{before}"
                     for r in cut)
    warn_user(f"{what} were cut off at max_tokens (their text is kept; <name>_usage.finish_reason is 'length'). "
              "Raise max_tokens (max_output_tokens on /responses) for whole answers.", TruncatedWarning)


class TruncatedWarning(UserWarning):
    """Answers were cut at max_tokens; their text is kept."""
