"""The cost of building multimodal requests: image bytes -> request bodies, alone and in the full pipeline.

Input: --images PNGs of 640x480 (default 1,000): a colour gradient, a few flat discs and Gaussian
noise (sigma 4), about 0.5 MB each, written once to bench/out/imgs/ and reused (regenerated only
when missing). Every measurement runs in a fresh Python subprocess, one after the other:

  (a) build only   ``build_body(config, ["Describe:", png_bytes], ["text", "image"])`` per row on bytes
                   already in memory (no I/O). The config is the AICallConfig inside a real
                   ``prompt([lit("Describe:"), col("img")], provider="openai", model="gpt-5-mini")``
                   expression (Responses API, what (b) sends) with its MediaOptions replaced:
                     pass-through   max_image_size=None                   (no decode, no re-encode)
                     png 512        max_image_size=512                    (decode, resize, PNG encode)
                     jpeg 512       max_image_size=512, image_format=jpeg (decode, resize, JPEG encode)
                     jpeg full      max_image_size=None, image_format=jpeg (decode, JPEG encode)
                   and "png 512, 2 threads": png 512 with build_body mapped over a 2-thread pool, to
                   show what moving the encode off the event loop onto threads could give.
  (b) pipeline     ``from_glob_path("bench/out/imgs/*.png") -> decode_image(download(col("path"))) ->
                   prompt([lit("Describe:"), col("img")], provider="openai", base_url=<simulator>,
                   api_key="k", model="gpt-5-mini", max_image_size=M) -> to_arrow()`` against
                   ``Simulator.spawn(SimulatorConfig())`` (its own process, 0 ms latency), for
                   M = 512 (the brief's pipeline) and M = None (pass-through: what the engine
                   costs without the re-encode). A 16-image warm-up query (images not in the timed
                   set) runs first; then the simulator's counters are reset.
  (c) retries      as (b) with M = 512 and the text part ``format("Describe {}:", col("path"))`` (every
                   row's body differs), after ``configure(fail_rules=[{"match": "Describe",
                   "status": 500, "times": 2}])``: each distinct body fails twice, then succeeds.
                   ``inferframe.media.parts.normalize`` (what prompt() uses to encode an image) is
                   wrapped with a counter in that process, and so is ``inferframe.media.normalize``
                   (what decode_image() uses). Expected: 1.00 encode per row, 3.00 requests per row.
                   The wrapper also records the thread each encode runs on.

MB/s counts the source PNG bytes of the rows processed; "cores busy" is CPU seconds / wall seconds
of the measuring process (and of the simulator process). The response cache is off in every child
(INFERFRAME_CACHE=off), so no answer comes from an earlier run.

Usage:
    .venv/bin/python bench/multimodal_requests.py                     # 1,000 images
    .venv/bin/python bench/multimodal_requests.py --images 200 --retry-rows 100
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from _util import run_child as _run_child  # one child-process runner for every benchmark
from _util import table  # one table printer for every benchmark

ROOT = Path(__file__).resolve().parent.parent
IMG_DIR = ROOT / "bench" / "out" / "imgs"
GLOB = "bench/out/imgs/*.png"
RESULT_PREFIX = "BENCH_RESULT "
WIDTH, HEIGHT, NOISE_SIGMA = 640, 480, 4.0
WARMUP = 16
MODEL = "gpt-5-mini"
MB = 1e6

BUILD_CONFIGS = {  # name: (max_image_size, image_format, threads)
    "pass-through": (None, None, 1),
    "png 512": (512, None, 1),
    "png 512, 2 threads": (512, None, 2),
    "jpeg 512": (512, "jpeg", 1),
    "jpeg full": (None, "jpeg", 1),
}


def loadavg() -> str:
    a = os.getloadavg()
    return f"{a[0]:.2f} {a[1]:.2f} {a[2]:.2f}"




def emit(result: dict) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def run_child(args: list[str], env: dict[str, str], timeout: float = 900) -> dict:
    return _run_child([__file__, *args], env=env, timeout=timeout, cwd=ROOT)


# --------------------------------------------------------------------------- images


def image_paths() -> list[Path]:
    return sorted(IMG_DIR.glob("*.png"))


def _make_image(i: int) -> bytes:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(i)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    ang = rng.uniform(0, 2 * np.pi)
    t = (x / WIDTH) * np.cos(ang) + (y / HEIGHT) * np.sin(ang)
    t = (t - t.min()) / (t.max() - t.min())
    c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    img = c0[None, None, :] * (1 - t[..., None]) + c1[None, None, :] * t[..., None]
    for _ in range(5):
        cx, cy, r = rng.uniform(0, WIDTH), rng.uniform(0, HEIGHT), rng.uniform(20, 120)
        img[((x - cx) ** 2 + (y - cy) ** 2) < r * r] = rng.uniform(0, 255, 3)
    img += rng.normal(0, NOISE_SIGMA, img.shape)
    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def _write_images(indices: list[int]) -> None:
    for i in indices:
        path = IMG_DIR / f"img_{i:05d}.png"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(_make_image(i))
        os.replace(tmp, path)


def ensure_images(n: int) -> float:
    """Write the missing images (both cores); return seconds spent (0 when all were there)."""
    IMG_DIR.mkdir(parents=True, exist_ok=True)
    have = {p.name for p in image_paths()}
    missing = [i for i in range(n) if f"img_{i:05d}.png" not in have]
    extra = [p for p in image_paths() if int(p.stem.split("_")[1]) >= n]
    for p in extra:  # a previous run with more images: keep the glob at exactly n files
        p.unlink()
    if not missing:
        return 0.0
    print(f"  generating {len(missing)} PNGs {WIDTH}x{HEIGHT} into {IMG_DIR.relative_to(ROOT)}/ ...", flush=True)
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.perf_counter()
    workers = max(1, os.cpu_count() or 1)
    chunks = [missing[k::workers] for k in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_write_images, chunks))
    return time.perf_counter() - t0


# --------------------------------------------------------------------------- children


def _prompt_config(max_size, fmt):
    """The AICallConfig of a real prompt() expression, as (b) builds it, with these media options."""
    import dataclasses

    from inferframe import col, lit
    from inferframe.functions import prompt
    from inferframe.providers.openai_format import MediaOptions

    expr = prompt([lit("Describe:"), col("img")], provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k",
                  model=MODEL)
    config = expr._node.child.args[0].udf.owner.args[0]
    return dataclasses.replace(config, media=MediaOptions(max_image_size=max_size, image_format=fmt))


def child_build(rows: int, max_size, fmt, threads: int = 1) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from inferframe.ai.requests import build_body

    config = _prompt_config(max_size, fmt)
    datas = [p.read_bytes() for p in image_paths()[:rows]]
    build_body(config, ["Describe:", datas[-1]], ["text", "image"])  # imports (Pillow) outside the timing

    def one(d: bytes) -> int:
        return len(build_body(config, ["Describe:", d], ["text", "image"])["input"][0]["content"][1]["image_url"])

    c0, t0 = cpu_s(), time.perf_counter()
    if threads == 1:
        url_chars = sum(one(d) for d in datas)
    else:  # what a thread pool around build_body would give (Pillow releases the GIL while coding)
        with ThreadPoolExecutor(threads) as pool:
            url_chars = sum(pool.map(one, datas))
    elapsed = time.perf_counter() - t0
    emit({"rows": len(datas), "elapsed": elapsed, "cpu": cpu_s() - c0, "in_bytes": sum(map(len, datas)),
          "url_chars": url_chars, "api": config.endpoint})


def _counting(module, name: str, threads: set | None = None) -> list[int]:
    import threading

    counter = [0]
    orig = getattr(module, name)

    def wrapped(*args, **kwargs):
        counter[0] += 1
        if threads is not None:
            threads.add(threading.current_thread().name)
        return orig(*args, **kwargs)

    setattr(module, name, wrapped)
    return counter


def child_pipeline(rows: int, max_size, retry: bool) -> None:
    import psutil

    import inferframe as ifr
    import inferframe.media
    import inferframe.media.parts
    from inferframe import col, lit
    from inferframe.functions import decode_image, download, format, prompt
    from inferframe.observe import last_run
    from inferframe.simulator import Simulator, SimulatorConfig

    import threading

    encode_threads: set[str] = set()
    encodes = _counting(inferframe.media.parts, "normalize", encode_threads)  # prompt() -> image_part -> normalize
    decodes = _counting(inferframe.media, "normalize")                        # decode_image() -> normalize
    # Which thread runs the engine's event loop: the one that runs the AI client's __call__.
    from inferframe.ai.prompt import PromptOperator as AIClient

    loop_threads: set[str] = set()
    orig_call = AIClient.__call__

    async def traced_call(self, *columns):
        loop_threads.add(threading.current_thread().name)
        return await orig_call(self, *columns)

    AIClient.__call__ = traced_call

    paths = image_paths()
    timed, warm = paths[:rows], paths[-WARMUP:]
    overlap = set(timed) & set(warm)

    def pipeline(df):
        text = format("Describe {}:", col("path")) if retry else lit("Describe:")
        return (df.with_column("img", decode_image(download(col("path"))))
                  .with_column("desc", prompt([text, col("img")], provider="openai", base_url=proc.base_url,
                                              api_key="k", model=MODEL, max_image_size=max_size)))

    proc = Simulator.spawn(SimulatorConfig())
    try:
        sim_cpu = psutil.Process(proc.pid)
        pipeline(ifr.from_pydict({"path": [str(p.relative_to(ROOT)) for p in warm]})).to_arrow(progress=False)
        if retry:
            proc.configure(fail_rules=[{"match": "Describe", "status": 500, "times": 2}])
        proc.reset()
        encodes[0] = decodes[0] = 0
        st0 = sim_cpu.cpu_times()
        c0, t0 = cpu_s(), time.perf_counter()
        df = ifr.from_glob_path(GLOB)
        if rows < len(paths):
            df = df.limit(rows)
        out = pipeline(df).to_arrow(progress=False)
        elapsed = time.perf_counter() - t0
        cpu = cpu_s() - c0
        st1 = sim_cpu.cpu_times()
        stats = proc.stats()
    finally:
        proc.close()
    got = out.column("path").to_pylist()
    in_bytes = sum(os.path.getsize(ROOT / p) for p in got)
    ok_rows = out.column("desc_error").null_count
    run = [r for r in last_run() if "prompt" in str(r.get("label", "")) or r.get("requests")]
    run = max(run, key=lambda r: r.get("requests") or 0) if run else {}
    emit({
        "rows": out.num_rows, "elapsed": elapsed, "cpu": cpu, "sim_cpu": (st1.user + st1.system) - (st0.user + st0.system),
        "in_bytes": in_bytes, "errors": out.num_rows - ok_rows, "answers": out.column("desc").null_count,
        "encodes": encodes[0], "decodes": decodes[0], "sim_requests": stats["total_requests"],
        "sim_by_status": stats["by_status"], "sim_distinct": stats["distinct_requests"],
        "sim_max_per_body": stats["max_requests_per_hash"], "sim_max_in_flight": stats["max_in_flight"],
        "run_requests": run.get("requests"), "run_retries": run.get("retries"), "run_errors": run.get("errors"),
        "warm_overlap": len(overlap), "encode_threads": sorted(encode_threads), "loop_threads": sorted(loop_threads),
    })


# --------------------------------------------------------------------------- parent


def _opt(v: str):
    return None if v in ("None", "none", "") else v


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=1000, help="PNGs in bench/out/imgs/ (generated once)")
    p.add_argument("--build-rows", type=int, default=None, help="rows for (a); default: all images")
    p.add_argument("--pipeline-rows", type=int, default=None, help="rows for (b); default: all images")
    p.add_argument("--retry-rows", type=int, default=200, help="rows for (c)")
    p.add_argument("--child", choices=["build", "pipeline"])
    p.add_argument("--rows", type=int)
    p.add_argument("--max-size", default="None")
    p.add_argument("--format", default="None")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--retry", action="store_true")
    a = p.parse_args()
    if a.child == "build":
        ms = _opt(a.max_size)
        return child_build(a.rows, int(ms) if ms else None, _opt(a.format), a.threads)
    if a.child == "pipeline":
        ms = _opt(a.max_size)
        return child_pipeline(a.rows, int(ms) if ms else None, a.retry)

    started = time.perf_counter()
    print(f"multimodal_requests.py: {a.images} PNG images {WIDTH}x{HEIGHT}, simulator at 0 ms latency")
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average at start: {loadavg()}")
    gen_s = ensure_images(a.images)
    paths = image_paths()
    sizes = [p.stat().st_size for p in paths]
    if len(paths) < WARMUP * 2:
        sys.exit(f"need at least {WARMUP * 2} images")
    print(f"  images: {len(paths)} files, {sum(sizes) / MB:.0f} MB, mean {sum(sizes) / len(sizes) / 1024:.0f} KiB"
          + (f" (generated in {gen_s:.0f} s)" if gen_s else " (reused)"))
    env = {"INFERFRAME_CACHE": "off", "INFERFRAME_CACHE_DIR": tempfile.mkdtemp(prefix="inferframe-bench-cache-"),
           "INFERFRAME_PROGRESS": "0"}
    n_build = min(a.build_rows or len(paths), len(paths))
    n_pipe = min(a.pipeline_rows or len(paths), len(paths))
    n_retry = min(a.retry_rows, len(paths) - WARMUP)

    build = {}
    for name, (ms, fmt, threads) in BUILD_CONFIGS.items():
        print(f"  (a) build_body, {name} ...", flush=True)
        build[name] = run_child(["--child", "build", "--rows", str(n_build), "--max-size", str(ms), "--format", str(fmt),
                                 "--threads", str(threads)], env)
    pipe = {}
    for ms in (512, None):
        print(f"  (b) pipeline, max_image_size={ms} ...", flush=True)
        pipe[ms] = run_child(["--child", "pipeline", "--rows", str(n_pipe), "--max-size", str(ms)], env)
    print("  (c) pipeline with 2 failures per body, max_image_size=512 ...", flush=True)
    retry = run_child(["--child", "pipeline", "--rows", str(n_retry), "--max-size", "512", "--retry"], env)

    print()
    print("(a) building request bodies only (build_body, one row at a time, bytes in memory; Responses API)")
    base = build["pass-through"]
    rows = []
    for name, r in build.items():
        ms, fmt, threads = BUILD_CONFIGS[name]
        rps = r["rows"] / r["elapsed"]
        rows.append([name, ms, fmt or "keep (png)", threads, r["rows"], f"{r['elapsed']:.2f}", f"{rps:,.1f}",
                     f"{r['in_bytes'] / MB / r['elapsed']:,.1f}", f"{r['cpu'] / r['elapsed']:.2f}",
                     f"{1000 * r['elapsed'] / r['rows']:.2f}",
                     f"{r['url_chars'] / r['rows'] / 1024:.0f}",
                     f"{(base['rows'] / base['elapsed']) / rps:,.0f}x"])
    print(table(["config", "max_image_size", "image_format", "threads", "rows", "time s", "rows/s", "MB/s in",
                 "cores busy", "ms/row",
                 "data URL KiB/row", "slower than pass-through"], rows))

    print()
    print("(b) full pipeline: glob -> download -> decode_image -> prompt(image) -> simulator (own process)")
    rows = []
    for ms, r in pipe.items():
        rps = r["rows"] / r["elapsed"]
        b = build["png 512" if ms == 512 else "pass-through"]
        brps = b["rows"] / b["elapsed"]
        rows.append([f"max_image_size={ms}", r["rows"], f"{r['elapsed']:.2f}", f"{rps:,.1f}",
                     f"{r['in_bytes'] / MB / r['elapsed']:,.1f}", f"{brps:,.1f}", f"{rps / brps:.2f}",
                     f"{r['cpu'] / r['elapsed']:.2f}", f"{r['sim_cpu'] / r['elapsed']:.2f}", r["sim_max_in_flight"], r["errors"],
                     f"{r['encodes'] / r['rows']:.2f}", r["sim_requests"]])
    print(table(["pipeline", "rows", "time s", "rows/s", "MB/s in", "build-only rows/s", "pipeline/build",
                 "client cores busy", "sim cores busy", "sim max in flight", "row errors", "encodes/row", "requests"], rows))

    print()
    print('(c) retries: fail_rules=[{"match": "Describe", "status": 500, "times": 2}], max_image_size=512, '
          'text = format("Describe {}:", col("path"))')
    r = retry
    n = r["rows"]
    s500 = r["sim_by_status"].get("500", 0)
    s200 = r["sim_by_status"].get("200", 0)
    rows = [[n, f"{r['elapsed']:.2f}", f"{n / r['elapsed']:,.1f}", f"{r['in_bytes'] / MB / r['elapsed']:,.1f}",
             f"{r['encodes'] / n:.2f}", f"{r['decodes'] / n:.2f}", f"{r['sim_requests'] / n:.2f}", f"{s500 / n:.2f}",
             f"{s200 / n:.2f}", f"{r['sim_distinct']}", r["sim_max_per_body"], r["errors"]]]
    print(table(["rows", "time s", "rows/s", "MB/s in", "encodes/row (prompt)", "decode_image calls/row",
                 "requests/row", "500s/row", "200s/row", "distinct bodies", "max req/body", "row errors"], rows))
    ok_enc = abs(r["encodes"] / n - 1.0) < 1e-9
    ok_req = abs(r["sim_requests"] / n - 3.0) < 1e-9
    print(f"expected 1.00 encode/row: {'OK' if ok_enc else 'NOT MET'}; expected 3.00 requests/row: "
          f"{'OK' if ok_req else 'NOT MET'}; inferframe counted {r['run_requests']} requests, "
          f"{r['run_retries']} retries, {r['run_errors']} row errors")

    print(f"threads that ran prompt()'s image encodes: {r['encode_threads']}; thread running the AI client "
          f"(the engine's event loop): {r['loop_threads']}")

    print()
    png, jpg, png2 = build["png 512"], build["jpeg 512"], build["png 512, 2 threads"]
    print(f"png 512 with 2 threads: {(png2['rows'] / png2['elapsed']) / (png['rows'] / png['elapsed']):.2f}x the rows/s of one thread")
    print(f"ratios: png 512 build is {(base['rows'] / base['elapsed']) / (png['rows'] / png['elapsed']):,.0f}x slower "
          f"than pass-through and {(jpg['rows'] / jpg['elapsed']) / (png['rows'] / png['elapsed']):.1f}x slower than jpeg 512; "
          f"pipeline(512) reaches {100 * (pipe[512]['rows'] / pipe[512]['elapsed']) / (png['rows'] / png['elapsed']):.0f}% "
          f"of build-only(png 512) rows/s; pipeline(None) {(pipe[None]['rows'] / pipe[None]['elapsed']):,.1f} rows/s")
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
