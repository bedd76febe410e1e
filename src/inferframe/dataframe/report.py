"""``report()``: write the HTML report of a run from the run history (one file that opens offline).

Example:
    >>> import os, tempfile
    >>> from inferframe.observe.history import RunHistory
    >>> d = tempfile.mkdtemp()
    >>> RunHistory(d).record({"run_id": "r1", "started": 1.0, "ended": 2.0, "fingerprint": "f", "rows": 3}, [{"q": "a"}])
    >>> path = report(path=os.path.join(d, "r1.html"), directory=d)
    >>> os.path.basename(path), "inferframe run r1" in open(path).read()
    ('r1.html', True)
"""

from __future__ import annotations

import os

from inferframe.errors import PlanError

EARLIER_RUNS = 10  # earlier runs of the same pipeline the report compares with


def report(run_id: str | None = None, path: str | None = None, *, directory: str | None = None) -> str:
    """Write the HTML report of a run (default: the newest) and return its path.

    The report is one self-contained HTML file (inline CSS and SVG, nothing fetched): totals, rows/s
    over time, latency histogram, tokens and cost, errors by kind, 429s and retries over time, each
    AI column's output against up to 10 earlier runs of the same pipeline (drift in red), the
    evaluation when one was stored, and the review sample.

    Parameters:
        run_id: the run to report (see ``runs()``); None: the newest.
        path: where to write (default: ``inferframe-report-<run_id>.html`` in the current directory).
        directory: the history's directory (default: ``set_history``'s, else the response cache's).

    Raises:
        PlanError: the history has no run, or no run with this id.

    Example:
        >>> import tempfile
        >>> report(directory=tempfile.mkdtemp())
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: report(): the run history ... has no run yet; ...
    """
    from inferframe.observe.history import RunHistory
    from inferframe.observe.report import render_report
    from inferframe.session import current

    history = RunHistory(current().history_dir(directory))
    if run_id is None:
        newest = history.runs(limit=1)
        if not newest:
            raise PlanError(f"report(): the run history {history.path} has no run yet; run a job with an AI call "
                            "first, or pass directory= where its runs.sqlite lives.")
        run = newest[0]
    else:
        found = [r for r in history.runs() if r["run_id"] == run_id]
        if not found:
            known = [r["run_id"] for r in history.runs(limit=5)]
            raise PlanError(f"report(): no run {run_id!r} in the run history {history.path}; the newest are "
                            f"{known or 'none'} (see inferframe.runs()).")
        run = found[0]
    earlier = [r for r in history.runs(run["fingerprint"]) if r["run_id"] != run["run_id"]
               and (r["started"] or 0) <= (run["started"] or 0)][:EARLIER_RUNS]
    page = render_report(run, earlier, history.sample(run["run_id"]))
    path = os.fspath(path or f"inferframe-report-{run['run_id']}.html")
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
