"""Helpers for the benchmarks that run against the OpenAI-compatible simulator.

Used by ``bench/prompt_throughput.py`` and ``bench/rate_limit_efficiency.py`` only
(not part of the package). Kept separate from ``bench/_util.py`` so these scripts
do not depend on another benchmark's helpers.

* :func:`run_child`: run ``python <script> --child ...`` in a fresh interpreter and
  read back the one JSON line it emits with :func:`emit_result`.
* :class:`SimSampler`: poll the simulator's ``/_sim/stats`` in a thread, so the
  parent sees requests in flight and completed requests over time (the only
  clock both the server and the client agree on is the parent's).
* :class:`ProcCPU`: CPU seconds used by a process (the simulator) between two points.
* :func:`table`: a plain-text table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any, Optional

from _util import table  # one table printer for every benchmark

RESULT_PREFIX = "BENCH_RESULT "


def emit_result(result: dict) -> None:
    """Print the child's result as one machine-readable line for the parent."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_child(args: list[str], *, timeout: Optional[float] = None, prefix: Optional[list[str]] = None) -> dict:
    """Run ``[*prefix, python, *args]`` and return the dict it emitted.

    The child's other output is passed through (indented) so errors stay visible.
    ``prefix`` wraps the interpreter (e.g. ``py-spy record -o ... --``).
    """
    cmd = [*(prefix or []), sys.executable, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
        elif line.strip():
            print("    | " + line)
    err = [s for s in proc.stderr.strip().splitlines() if s.strip()]
    if proc.returncode != 0 or result is None:
        print("\n".join("    ! " + s for s in err[-40:]))
        raise RuntimeError(f"child {' '.join(cmd)} failed with exit code {proc.returncode}")
    for s in err[-5:]:  # warnings may matter; keep the last few visible
        print("    ! " + s)
    return result


def sim_admin(root_url: str, method: str, path: str, payload: Any = None, timeout: float = 10.0) -> Any:
    """Call an admin route of the simulator at ``root_url`` (no '/v1')."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(root_url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


class SimSampler:
    """Poll ``/_sim/stats`` every ``interval`` s; keep (t, in_flight, status-200 count, 429 count, total).

    ``t`` is ``time.monotonic()`` of this process. Polls that fail (server busy)
    are skipped. Call :meth:`stop` to end it.
    """

    def __init__(self, root_url: str, interval: float = 0.25) -> None:
        self.root_url = root_url
        self.interval = interval
        self.samples: list[tuple[float, int, int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-sampler", daemon=True)

    def start(self) -> "SimSampler":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                s = sim_admin(self.root_url, "GET", "/_sim/stats", timeout=5)
                bs = s.get("by_status", {})
                self.samples.append((time.monotonic(), int(s.get("in_flight", 0)), int(bs.get("200", 0)),
                                     int(bs.get("429", 0)), int(s.get("total_requests", 0))))
            except Exception:
                pass
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def mean_in_flight(self) -> float:
        """Mean of the sampled in-flight counts while requests were arriving (first to last busy sample)."""
        busy = [i for i, s in enumerate(self.samples) if s[1] > 0]
        if not busy:
            return 0.0
        window = self.samples[busy[0]: busy[-1] + 1]
        return sum(s[1] for s in window) / len(window)

    def count_at(self, t: float, field: int = 2) -> float:
        """Linear interpolation of a counter (2 = 200s, 3 = 429s, 4 = total) at monotonic time ``t``."""
        pts = self.samples
        if not pts:
            return 0.0
        if t <= pts[0][0]:
            return float(pts[0][field])
        for a, b in zip(pts, pts[1:]):
            if a[0] <= t <= b[0]:
                if b[0] == a[0]:
                    return float(b[field])
                return a[field] + (b[field] - a[field]) * (t - a[0]) / (b[0] - a[0])
        return float(pts[-1][field])


class ProcCPU:
    """CPU seconds (user + system) used by process ``pid`` since :meth:`start`."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._p = psutil.Process(pid)
        self._t0 = 0.0

    def _now(self) -> float:
        t = self._p.cpu_times()
        return t.user + t.system

    def start(self) -> None:
        self._t0 = self._now()

    def seconds(self) -> float:
        return self._now() - self._t0




def machine_line() -> str:
    """CPU count, load average and interpreter, for the header of a report."""
    try:
        la = os.getloadavg()
        load = f"load average {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}"
    except OSError:
        load = "load average n/a"
    return f"{os.cpu_count()} CPUs, {load}, Python {sys.version.split()[0]}"


def child_cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children (for the child's own report)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def now() -> float:
    return time.perf_counter()
