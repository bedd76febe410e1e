"""What OpenTelemetry tracing costs a prompt() job (issue 47, item 7).

20,000 rows (``--rows``) at 0 ms latency against the project's simulator (in this parent process; each job
runs in a fresh child process, cache off, so every row is one request), in these modes, interleaved and
repeated (``--repeat``, fastest kept):

* ``off``: no provider configured: today's path (a job pays a ``sys.modules`` lookup);
* ``before`` (with ``--before SRC``): the same job on another checkout's ``src`` (the code before tracing);
* ``1%``: the SDK configured the standard way (``trace.set_tracer_provider``, a ``BatchSpanProcessor`` to an
  exporter that counts and drops, no metrics) and ``OTEL_TRACES_SAMPLER=
  parentbased_traceidratio`` with ``OTEL_TRACES_SAMPLER_ARG=0.01`` (traces only);
* ``100%``: the same with the default sampler: every request a span;
* ``1%+metrics``: ``1%`` and a ``MeterProvider`` with a reader: the GenAI histograms take three records per
  request (duration, input and output tokens), which no sampler thins.

Targets: ``off`` within noise of ``before``; ``1%`` keeps >= 95% of ``off``'s rows/s; ``100%`` prints its
cost per span: (its seconds - off's) / spans exported.

    .venv/bin/python bench/tracing_overhead.py
    git archive HEAD~3 src | tar -x -C /tmp/before && .venv/bin/python bench/tracing_overhead.py --before /tmp/before/src
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _util import emit_result, run_child, table  # noqa: E402

SRC = str(Path(__file__).resolve().parent.parent / "src")
RATIO = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01"}
MODES = {"off": {}, "1%": RATIO, "100%": {"OTEL_TRACES_SAMPLER": "parentbased_always_on"}, "1%+metrics": RATIO}


def child(mode: str, rows: int, base_url: str, concurrency: int) -> None:
    """One job in this fresh process; emits seconds, rows and the spans exported."""
    exported = None
    if mode != "off":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Counting(SpanExporter):
            """An exporter that counts the spans handed to it (the processor's queue and thread are real)."""

            def __init__(self) -> None:
                self.spans = 0

            def export(self, spans):
                self.spans += len(spans)
                return SpanExportResult.SUCCESS

        exported = Counting()
        provider = TracerProvider()  # the sampler from OTEL_TRACES_SAMPLER / _ARG
        provider.add_span_processor(BatchSpanProcessor(exported))
        trace.set_tracer_provider(provider)
        if mode.endswith("+metrics"):  # three histogram records per request: the SDK's cost, not sampled
            metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt

    df = ifr.from_pydict({"q": [f"question {i}" for i in range(rows)]})
    call = prompt(col("q"), provider="openai", base_url=base_url, api_key="sk-bench", model="gpt-5-mini",
                  cache="off", max_concurrency=concurrency)
    started, cpu = time.perf_counter(), time.process_time()
    out = df.with_column("a", call).to_arrow()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert out.column("a_error").null_count == rows, "a row failed"
    spans = None
    if exported is not None:
        from opentelemetry import trace

        trace.get_tracer_provider().force_flush()
        spans = exported.spans
    emit_result({"seconds": seconds, "rows": rows, "spans": spans, "cpu": cpu})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per mode, interleaved (fastest kept)")
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--before", help="another checkout's src directory: its job is the 'before' mode")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "BASE_URL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.rows, args.child[1], args.concurrency)
        return
    from inferframe.simulator import Simulator, SimulatorConfig

    modes = (["before"] if args.before else []) + list(MODES)
    best: dict[str, dict] = {}
    clean = {k: None for k in os.environ if k.startswith("OTEL_")}
    with Simulator(SimulatorConfig(latency_ms=0)) as sim:
        for _ in range(args.repeat):
            for mode in modes:
                env = {**clean, **MODES.get(mode, {}), "INFERFRAME_PROGRESS": "0",
                       "PYTHONPATH": args.before if mode == "before" else SRC}
                r = run_child([__file__, "--child", "off" if mode == "before" else mode, sim.base_url,
                               "--rows", str(args.rows), "--concurrency", str(args.concurrency)], env=env, timeout=600)
                if mode not in best or r["seconds"] < best[mode]["seconds"]:
                    best[mode] = r
    report(best, modes, args.rows, args.repeat)


def report(best: dict, modes: list, rows: int, repeat: int) -> None:
    """The table and the target lines: wall-clock rows/s, and the job's CPU per row (steadier on a busy machine)."""
    off = best["off"]
    lines = []
    for mode in modes:
        r = best[mode]
        extra = "-" if not r["spans"] else f"{(r['cpu'] - off['cpu']) / r['spans'] * 1e6:.1f}"
        lines.append([mode, f"{r['seconds']:.2f}", f"{r['rows'] / r['seconds']:,.0f}",
                      f"{off['seconds'] / r['seconds']:.1%}", f"{r['cpu'] / r['rows'] * 1e6:.0f}",
                      f"{off['cpu'] / r['cpu']:.1%}", "-" if r["spans"] is None else f"{r['spans']:,}", extra])
    print(f"\n{rows:,} rows at 0 ms, fastest of {repeat} interleaved runs per mode (a fresh process each); "
          "CPU: the client process's during the job")
    print(table(["mode", "seconds", "rows/s", "rows/s vs off", "CPU us/row", "CPU vs off", "spans exported",
                 "CPU us per span vs off"], lines))

    def ratio(mode: str) -> str:
        r = best[mode]
        return f"{off['seconds'] / r['seconds']:.1%} of off's rows/s ({off['cpu'] / r['cpu']:.1%} by CPU per row)"

    if "before" in best:
        b = best["before"]
        print(f"  target: tracing off within noise of before: {b['seconds'] / off['seconds']:.1%} of before's rows/s "
              f"({b['cpu'] / off['cpu']:.1%} by CPU per row)")
    one = best["1%"]
    kept = min(off["seconds"] / one["seconds"], off["cpu"] / one["cpu"])
    print(f"  target: 1% request sampling keeps >= 95% of off's rows/s: {ratio('1%')} ({'met' if kept >= 0.95 else 'NOT met'})")
    both = best["1%+metrics"]
    print(f"  1% and metrics: {ratio('1%+metrics')}; the metrics cost "
          f"{(both['cpu'] - one['cpu']) / both['rows'] * 1e6:.1f} us of CPU per request")
    full = best["100%"]
    print(f"  100% sampling: {ratio('100%')}; {full['spans']:,} spans, "
          f"{(full['cpu'] - off['cpu']) / full['spans'] * 1e6:.1f} us of CPU per span "
          f"({(full['seconds'] - off['seconds']) / full['spans'] * 1e6:.1f} us of wall time)")


if __name__ == "__main__":
    main()
