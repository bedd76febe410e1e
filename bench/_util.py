"""Shared helpers for the benchmark scripts: peak-RSS sampling, child processes, tables.

Not part of the package; imported by the scripts in this folder only.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"  # gitignored
RESULT_PREFIX = "BENCH_RESULT "
MIB = 1024 * 1024


class PeakRSS:
    """Sample this process's resident set size every ``interval`` seconds in a daemon thread.

    ``peak_mib`` is the larger of the sampled maximum and ``ru_maxrss`` (the kernel's
    high-water mark, which also catches spikes between samples).
    """

    def __init__(self, interval: float = 0.05) -> None:
        import psutil

        self._proc = psutil.Process()
        self.interval = interval
        self.sampled_peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self._proc.memory_info().rss
            if rss > self.sampled_peak:
                self.sampled_peak = rss
            self.samples += 1
            self._stop.wait(self.interval)

    def current_mib(self) -> float:
        return self._proc.memory_info().rss / MIB

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def sampled_peak_mib(self) -> float:
        return self.sampled_peak / MIB

    @staticmethod
    def ru_maxrss_mib() -> float:
        # Linux reports KiB, macOS bytes.
        v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return v / MIB if sys.platform == "darwin" else v / 1024

    @property
    def peak_mib(self) -> float:
        return max(self.sampled_peak_mib, self.ru_maxrss_mib())


def emit_result(result: dict) -> None:
    """Print the child's result as one machine-readable line for the parent."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_child(args: list[str], *, env: dict | None = None, timeout: float | None = None, cwd=None) -> dict:
    """Run ``python <args>`` in a fresh interpreter and return the dict it emitted.

    ``env`` changes the environment (a None value removes the variable). The child's other
    output is passed through (indented) so errors stay visible.
    """
    cmd = [sys.executable, *args]
    full_env = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            full_env.pop(k, None)
        else:
            full_env[k] = v
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd)
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
        elif line.strip():
            print("    | " + line)
    stderr = proc.stderr.strip()
    if proc.returncode != 0 or result is None:
        if stderr:
            print("\n".join("    ! " + s for s in stderr.splitlines()[-40:]))
        raise RuntimeError(f"child {' '.join(cmd)} failed with exit code {proc.returncode}")
    if stderr:
        # Warnings and progress bars: keep the last few lines visible, they may matter.
        for s in stderr.splitlines()[-5:]:
            print("    ! " + s)
    return result


def table(headers: list[str], rows: list[list], aligns: str | None = None) -> str:
    """A plain-text table; ``aligns`` is a string of 'l'/'r' per column (default: right)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    aligns = aligns or "r" * len(headers)

    def fmt(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, aligns))

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


def human_rows(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def parse_rows(text: str) -> int:
    """'10M', '250k', '1_000_000' -> int."""
    t = text.strip().lower().replace("_", "")
    mult = 1
    if t.endswith("m"):
        mult, t = 1_000_000, t[:-1]
    elif t.endswith("k"):
        mult, t = 1_000, t[:-1]
    return int(float(t) * mult)


def now() -> float:
    return time.perf_counter()


class InFlight:
    """Counts concurrent UDF calls (current and maximum), thread-safe.

    Kept in this importable module so that engines which pickle the UDF
    (Daft does) reference the one shared counter instead of copying it.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.max = 0
        self.calls = 0
        self.pids: set[int] = set()
        self.threads: set[int] = set()

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.calls += 1
            if self.now > self.max:
                self.max = self.now
            self.pids.add(os.getpid())
            self.threads.add(threading.get_ident())

    def exit(self) -> None:
        with self.lock:
            self.now -= 1

    def reset(self) -> None:
        with self.lock:
            self.now = self.max = self.calls = 0
            self.pids.clear()
            self.threads.clear()


IN_FLIGHT = InFlight()
