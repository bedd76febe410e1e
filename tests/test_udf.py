import asyncio
import threading
import time
import warnings

import pytest

import inferframe as ifr
from inferframe import DataType, col, lit


def test_func_row_sync_with_annotation_and_constants():
    @ifr.func
    def build(ctx: str, q: str, n: int) -> str:
        return f"{ctx}|{q}|{n}"

    df = ifr.from_pydict({"c": ["a", "b"], "q": ["x", "y"]})
    out = df.with_column("p", build(col("c"), col("q"), 50)).to_pydict()
    assert out["p"] == ["a|x|50", "b|y|50"]
    # Plain Python values call the function directly.
    assert build("a", "b", 1) == "a|b|1"


def test_func_return_dtype_and_struct():
    @ifr.func(return_dtype=DataType.struct({"len": DataType.int64(), "up": DataType.string()}))
    def info(s):
        return {"len": len(s), "up": s.upper()}

    out = ifr.from_pydict({"s": ["ab", "c"]}).select(info(col("s")).alias("i")).select(col("i").struct.get("len"))
    assert out.to_pydict() == {"len": [2, 1]}


def test_missing_return_type_is_a_plan_error():
    @ifr.func
    def nothing(s):
        return s

    with pytest.raises(ifr.ExpressionTypeError, match="no return type"):
        ifr.from_pydict({"s": ["a"]}).select(nothing(col("s")))


def test_wrong_return_value_names_udf_and_row():
    @ifr.func
    def bad(x: int) -> int:
        return "oops" if x == 3 else x

    df = ifr.from_pydict({"x": list(range(6))})
    with pytest.raises(ifr.UDFError, match=r"UDF 'bad' returned 'oops' \(str\) at row 3.*int64"):
        df.select(bad(col("x"))).to_pydict()


def test_udf_exception_names_row_and_input():
    @ifr.func
    def explode_on_7(x: int) -> int:
        if x == 7:
            raise ValueError("seven!")
        return x

    df = ifr.from_pydict({"x": list(range(20))})
    with pytest.raises(ifr.UDFError, match=r"'explode_on_7' failed on row 7 with input \(7\): ValueError: seven!"):
        df.select(explode_on_7(col("x"))).collect()


def test_batch_func_gets_series():
    seen = []

    @ifr.func.batch(return_dtype=DataType.int64(), batch_size=4)
    def double(xs: ifr.Series):
        seen.append(len(xs))
        return [v * 2 for v in xs.to_pylist()]

    out = ifr.from_pydict({"x": list(range(10))}).select(double(col("x"))).to_pydict()
    assert out["x"] == [v * 2 for v in range(10)]
    assert sorted(seen) == [2, 4, 4]


def test_order_is_preserved_with_threads():
    @ifr.func(max_concurrency=4)
    def slow_echo(x: int) -> int:
        time.sleep(0.001 * (x % 3))
        return x

    df = ifr.from_pydict({"x": list(range(3000))})
    assert df.select(slow_echo(col("x"))).to_pydict()["x"] == list(range(3000))


def test_cls_init_once_per_instance_and_reused():
    inits = []

    @ifr.cls
    class Counter:
        def __init__(self, start: int):
            inits.append(threading.get_ident())
            self.n = start

        def __call__(self, x: int) -> int:
            self.n += 1
            return self.n

    c = Counter(100)
    assert inits == []  # recording arguments builds nothing
    df = ifr.from_pydict({"x": list(range(2000))})
    out = df.select(c(col("x"))).to_pydict()["x"]
    assert len(inits) == 1
    assert sorted(out) == list(range(101, 2101))


def test_cls_max_concurrency_bounds_instances():
    inits = []
    lock = threading.Lock()

    @ifr.cls(max_concurrency=3)
    class Model:
        def __init__(self):
            with lock:
                inits.append(1)

        @ifr.method.batch(return_dtype=DataType.int64(), batch_size=10)
        def run(self, xs):
            time.sleep(0.005)
            return xs.to_pylist()

    df = ifr.from_pydict({"x": list(range(500))})
    assert df.select(Model().run(col("x"))).to_pydict()["x"] == list(range(500))
    assert 1 <= len(inits) <= 3


def test_method_with_options_and_batch_sizes():
    sizes = []

    @ifr.cls
    class Emb:
        def __init__(self, dim: int):
            self.dim = dim

        @ifr.method.batch(return_dtype=DataType.list(DataType.float32()), batch_size=16)
        def embed(self, texts: ifr.Series) -> list:
            sizes.append(len(texts))
            return [[float(len(t))] * self.dim for t in texts.to_pylist()]

    out = ifr.from_pydict({"t": ["a" * i for i in range(40)]}).select(Emb(3).embed(col("t")).alias("e")).to_pydict()
    assert out["e"][5] == [5.0, 5.0, 5.0]
    assert sorted(sizes) == [8, 16, 16]


def test_async_func_bounds_rows_in_flight_across_batches():
    state = {"now": 0, "max": 0}

    @ifr.func(max_concurrency=25)
    async def slow(x: int) -> int:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return x * 10

    df = ifr.from_pydict({"x": list(range(400))}).into_batches(7)
    out = df.select(slow(col("x"))).to_pydict()["x"]
    assert out == [x * 10 for x in range(400)]
    assert state["max"] == 25  # the bound is reached and never exceeded


def test_async_throughput_is_bound_by_in_flight_not_batches():
    @ifr.func(max_concurrency=200)
    async def sleepy(x: int) -> int:
        await asyncio.sleep(0.2)
        return x

    t = time.perf_counter()
    n = ifr.from_pydict({"x": list(range(1000))}).select(sleepy(col("x"))).count_rows()
    elapsed = time.perf_counter() - t
    assert n == 1000
    # 1000 rows / 200 in flight * 0.2 s = 1 s ideal; per-batch gathering would take far longer.
    assert elapsed < 5


def test_async_cls_client_built_in_init_uses_the_shared_loop():
    loops = []

    @ifr.cls
    class Client:
        def __init__(self):
            # Needs a running loop: fails with "no running event loop" if built outside it.
            self.loop = asyncio.get_running_loop()
            self.lock = asyncio.Lock()

        async def __call__(self, x: int) -> int:
            async with self.lock:
                loops.append(asyncio.get_running_loop())
            return x + 1

    df = ifr.from_pydict({"x": list(range(50))}).into_batches(5)
    assert df.select(Client()(col("x"))).to_pydict()["x"] == list(range(1, 51))
    assert len(set(map(id, loops))) == 1


def test_async_error_stops_promptly():
    @ifr.func(max_concurrency=10)
    async def fail_fast(x: int) -> int:
        if x == 5:
            raise RuntimeError("bad row")
        await asyncio.sleep(5)
        return x

    t = time.perf_counter()
    with pytest.raises(ifr.UDFError, match="failed on row 5"):
        ifr.from_pydict({"x": list(range(100))}).select(fail_fast(col("x"))).collect()
    assert time.perf_counter() - t < 3


def _udf_threads():
    # Process-wide service threads (the local model's launcher, a test simulator, the one driver service of a
    # SparkSession's lazy Spark DataFrames, which ends with the SparkContext) are not a run's threads.
    return [t for t in threading.enumerate() if t.name.startswith("inferframe")
            and t.name not in ("inferframe-simulator", "inferframe-llama-launcher")
            and not t.name.startswith("inferframe-spark-session")]


def test_closing_iteration_early_stops_every_stage():
    calls = []

    @ifr.func
    def record(x: int) -> int:
        calls.append(x)
        return x

    before = set(_udf_threads())  # service threads an earlier test left in this process are not this run's
    df = ifr.from_pydict({"x": list(range(100_000))}).into_batches(100).select(record(col("x")))
    it = df.iter_rows()
    for _ in range(10):
        next(it)
    it.close()
    time.sleep(0.3)
    assert [t for t in _udf_threads() if t not in before] == []
    assert len(calls) < 100_000


def test_keyboard_interrupt_stops_cleanly():
    # In a fresh interpreter, as a user's script: what earlier tests left in this process must not decide it.
    from udf_helpers import interrupted_job

    seconds, threads = interrupted_job("""
import asyncio
import inferframe as ifr
from inferframe import col

@ifr.func(max_concurrency=50)
async def forever(x: int) -> int:
    await asyncio.sleep(60)
    return x

df = ifr.from_pydict({"x": list(range(1000))}).select(forever(col("x")))
""", after=0.5)
    assert seconds < 10
    assert threads == "THREADS []"


def test_gpus_warns_without_gpu(monkeypatch):
    import inferframe.execution.instances as instances

    monkeypatch.setattr(instances, "_gpu_available", lambda: False)

    @ifr.cls(gpus=1)
    class G:
        def __init__(self):
            pass

        def __call__(self, x: int) -> int:
            return x

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ifr.from_pydict({"x": [1]}).select(G()(col("x"))).collect()
    assert any("gpus=1" in str(x.message) and "no GPU" in str(x.message) for x in w)


def test_use_process_runs_in_other_process_and_reuses_instance():
    import os

    from udf_helpers import PidTagger

    t = PidTagger("m")
    out = ifr.from_pydict({"x": list(range(50))}).into_batches(10).select(t(col("x")).alias("r")).to_pydict()["r"]
    pids = {r.split(":")[1] for r in out}
    assert len(pids) == 1 and str(os.getpid()) not in pids
    assert sorted(int(r.split(":")[2]) for r in out) == list(range(1, 51))  # one instance, 50 calls
    sizes = ifr.from_pydict({"x": list(range(20))}).select(t.sizes(col("x"))).to_pydict()["x"]
    assert sizes == [7] * 14 + [6] * 6


def test_use_process_crash_is_a_clear_error():
    from udf_helpers import PidTagger

    t = PidTagger("m")
    with pytest.raises(ifr.UDFError, match="died with exit code 17"):
        ifr.from_pydict({"x": list(range(10))}).select(t.crash(col("x"))).collect()


def test_apply():
    out = ifr.from_pydict({"s": ["a", "bcd"]}).select(col("s").apply(len, DataType.int64())).to_pydict()
    assert out == {"s": [1, 3]}


def test_udf_in_filter_and_nested():
    @ifr.func
    def inc(x: int) -> int:
        return x + 1

    df = ifr.from_pydict({"x": [1, 2, 3, 4]})
    assert df.where(inc(col("x")) > 2).to_pydict() == {"x": [2, 3, 4]}
    assert df.select(inc(inc(col("x")) * 2).alias("y")).to_pydict() == {"y": [5, 7, 9, 11]}


def test_failed_async_batches_leave_no_unretrieved_task_exception(caplog):
    """When every batch of an async batch UDF fails, the stopped job logs no 'Task exception was never retrieved'."""
    import gc

    @ifr.func.batch(return_dtype=DataType.int64(), batch_size=2, max_concurrency=4)
    async def down(x):
        await asyncio.sleep(0.05)
        raise ifr.ServiceError("the service is down")

    with caplog.at_level("ERROR", logger="asyncio"):
        with pytest.raises(ifr.ServiceError, match="the service is down"):
            ifr.from_pydict({"x": list(range(40))}).into_batches(2).select(down(col("x"))).collect()
        time.sleep(0.3)
        gc.collect()
    assert [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()] == []


def test_a_task_failing_after_its_caller_gave_up_is_not_logged_as_lost(caplog):
    """The shared loop retrieves the error of a task whose caller cancelled it: the caller already has the job's error."""
    import gc

    from inferframe.execution.context import EventLoopThread

    async def fails_on_cancel():
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    loop = EventLoopThread()
    try:
        with caplog.at_level("ERROR", logger="asyncio"):
            fut = loop.submit(fails_on_cancel())
            time.sleep(0.05)
            fut.cancel()
            time.sleep(0.2)
            del fut
            gc.collect()
            loop.call(gc.collect)
    finally:
        loop.close()
    assert [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()] == []
