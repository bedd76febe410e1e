"""Module-level UDF classes so worker processes can import them by reference."""

import os

import inferframe as ifr


@ifr.cls(use_process=True)
class PidTagger:
    def __init__(self, tag: str):
        self.tag = tag
        self.calls = 0

    def __call__(self, x: int) -> str:
        self.calls += 1
        return f"{self.tag}:{os.getpid()}:{self.calls}"

    @ifr.method.batch(return_dtype=ifr.DataType.int64(), batch_size=7)
    def sizes(self, xs: ifr.Series):
        return [len(xs)] * len(xs)

    def crash(self, x: int) -> int:
        if x == 3:
            os._exit(17)
        return x


_INTERRUPTED_TAIL = """
import threading as _threading, time as _time, _thread
_threading.Timer({after}, _thread.interrupt_main).start()
_t = _time.perf_counter()
try:
    df.collect()
    print("NOT INTERRUPTED")
except KeyboardInterrupt:
    print(f"INTERRUPTED {{_time.perf_counter() - _t:.1f}}")
_time.sleep(0.3)
print("THREADS", [t.name for t in _threading.enumerate() if t.name.startswith("inferframe")
                  and t.name not in ("inferframe-simulator", "inferframe-llama-launcher")])
"""


def interrupted_job(setup: str, after: float) -> tuple[float, str]:
    """Run ``setup`` (which defines ``df``) in a fresh interpreter, Ctrl-C it ``after`` seconds into
    ``df.collect()``; (seconds until KeyboardInterrupt, the line listing inferframe threads left)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", setup + _INTERRUPTED_TAIL.format(after=after)],
                         capture_output=True, text=True, timeout=120)
    assert "INTERRUPTED" in out.stdout and "NOT INTERRUPTED" not in out.stdout, out.stdout + out.stderr
    threads = next(line for line in out.stdout.splitlines() if line.startswith("THREADS"))
    return float(out.stdout.split("INTERRUPTED ")[1].split()[0]), threads
