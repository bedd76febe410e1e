"""Model classes end to end (seed 002): instance lifecycle, batch sizes, worker processes, crashes.

Instances record their ``__init__`` in a file (one line each), so the count holds
for thread instances and for ``use_process=True`` instances in other processes alike.
"""

import os
import signal
import sys
import time
import warnings
from pathlib import Path

import psutil
import pytest

import inferframe as ifr
from inferframe import DataType, col

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _record_init(path: str, start: float) -> None:
    # O_APPEND writes of one short line are atomic, so threads and processes can share the file.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, f"{os.getpid()} {start} {time.time()}\n".encode())
    finally:
        os.close(fd)


def _inits(path) -> list[tuple[int, float, float]]:
    p = Path(path)
    if not p.exists():
        return []
    return [(int(a), float(b), float(c)) for a, b, c in (line.split() for line in p.read_text().splitlines())]


def _make_model(use_process: bool, max_concurrency: int | None = None, batch_size: int = 16, init_sleep: float = 0.0):
    """A model class that logs each ``__init__`` and tags rows with its pid and batch size."""

    @ifr.cls(use_process=use_process, max_concurrency=max_concurrency)
    class Model:
        def __init__(self, log: str, scale: int):
            start = time.time()
            time.sleep(init_sleep)
            self.scale = scale
            _record_init(log, start)

        @ifr.method.batch(return_dtype=DataType.struct({
            "y": DataType.int64(), "size": DataType.int64(), "pid": DataType.int64(),
        }), batch_size=batch_size)
        def run(self, xs: ifr.Series):
            time.sleep(0.01)  # long enough that concurrent batches need several instances
            pid = os.getpid()
            return [{"y": x * self.scale, "size": len(xs), "pid": pid} for x in xs.to_pylist()]

    return Model


@pytest.mark.parametrize("use_process", [False, True], ids=["thread", "process"])
def test_one_init_per_instance_and_exact_batch_sizes(tmp_path, use_process):
    log = str(tmp_path / "inits.log")
    Model = _make_model(use_process, max_concurrency=3, batch_size=16)
    m = Model(log, 3)
    assert _inits(log) == []  # recording the arguments builds nothing
    # Upstream batches of 7 rows must be re-cut into batches of exactly 16 (the last one smaller).
    df = ifr.from_pydict({"x": list(range(1000))}).into_batches(7)
    out = df.select(m.run(col("x")).alias("r")).to_pydict()["r"]
    assert [r["y"] for r in out] == [x * 3 for x in range(1000)]
    assert [r["size"] for r in out] == [16] * 992 + [8] * 8
    inits = _inits(log)
    pids_used = {r["pid"] for r in out}
    assert 1 <= len(inits) <= 3  # max_concurrency=3 caps the instances
    if use_process:
        # Each instance is its own process, built once: one __init__ per pid that ran batches.
        assert os.getpid() not in pids_used
        assert sorted(p for p, _, _ in inits) == sorted(pids_used)
    else:
        assert pids_used == {os.getpid()}


def test_max_concurrency_starts_worker_processes_in_parallel(tmp_path):
    log = str(tmp_path / "inits.log")
    Model = _make_model(True, max_concurrency=2, batch_size=5, init_sleep=1.0)
    out = ifr.from_pydict({"x": list(range(100))}).select(Model(log, 1).run(col("x")).alias("r")).to_pydict()["r"]
    assert [r["y"] for r in out] == list(range(100))
    inits = _inits(log)
    assert len(inits) == 2
    # Slow model loads overlap instead of queueing one after another behind a lock.
    (_, s1, e1), (_, s2, e2) = inits
    assert max(s1, s2) < min(e1, e2), inits


def test_use_process_instance_survives_many_batches(tmp_path):
    log = str(tmp_path / "inits.log")
    Model = _make_model(True, max_concurrency=1, batch_size=4)
    n = 1000  # 250 batches through one worker process
    out = ifr.from_pydict({"x": list(range(n))}).select(Model(log, 2).run(col("x")).alias("r")).to_pydict()["r"]
    assert [r["y"] for r in out] == [2 * x for x in range(n)]
    assert [r["size"] for r in out] == [4] * n
    pids = {r["pid"] for r in out}
    assert len(pids) == 1 and pids != {os.getpid()}
    assert [p for p, _, _ in _inits(log)] == list(pids)
    # The run is over: its worker process has exited.
    _wait_gone(pids.pop())


def _wait_gone(pid: int, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return
        time.sleep(0.05)
    raise AssertionError(f"worker process {pid} is still running")


@ifr.cls(use_process=True, max_concurrency=2)
class Crasher:
    """Dies in one of three ways on the row ``x == 7`` (batches of 5, so mid-way through rows 5..9)."""

    def __init__(self, how: str, pidfile: str):
        self.how = how
        self.pidfile = pidfile

    @ifr.method.batch(return_dtype=DataType.int64(), batch_size=5)
    def score(self, xs: ifr.Series):
        _record_init(self.pidfile, 0.0)  # the pids of the workers, to check none is left behind
        values = xs.to_pylist()
        if 0 in values and self.how == "stuck":
            time.sleep(120)  # the other instance is busy for far longer than the test may take
        if 7 in values:
            time.sleep(0.3)
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(23)
        return values


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how, expected", [
    ("exit", r"exit code 23\b"),
    ("kill", r"exit code -9 \(killed by SIGKILL\)"),
    ("stuck", r"exit code 23\b"),
])
def test_worker_crash_is_a_prompt_clear_error(tmp_path, how, expected):
    pidfile = str(tmp_path / "pids.log")
    df = ifr.from_pydict({"x": list(range(40))}).select(Crasher(how, pidfile).score(col("x")))
    t = time.perf_counter()
    with pytest.raises(ifr.UDFError, match=expected) as e:
        df.collect()
    elapsed = time.perf_counter() - t
    msg = str(e.value)
    assert "Crasher.score" in msg and "rows 5..9" in msg, msg
    # The error comes as soon as the worker dies, even while another instance is mid-batch.
    assert elapsed < 10, elapsed
    for pid in {p for p, _, _ in _inits(pidfile)}:
        _wait_gone(pid)


@ifr.cls(use_process=True)
class BadInit:
    def __init__(self, how: str):
        if how == "raise":
            raise RuntimeError("weights file is missing")
        if how == "exit":
            os._exit(3)

    def __call__(self, x: int) -> int:
        return x


@pytest.mark.timeout(60)
def test_init_failure_names_the_class():
    df = ifr.from_pydict({"x": [1, 2, 3]})
    with pytest.raises(ifr.UDFError, match=r"BadInit\.__init__ failed(.|\n)*RuntimeError: weights file is missing"):
        df.select(BadInit("raise")(col("x"))).collect()
    with pytest.raises(ifr.UDFError, match=r"BadInit.*exit code 3 during BadInit\.__init__"):
        df.select(BadInit("exit")(col("x"))).collect()

    @ifr.cls
    class InThread:
        def __init__(self):
            raise ValueError("no such model")

        def __call__(self, x: int) -> int:
            return x

    with pytest.raises(ifr.UDFError, match=r"InThread\.__init__ failed: ValueError: no such model"):
        df.select(InThread()(col("x"))).collect()


@pytest.mark.timeout(60)
def test_stopping_early_ends_the_worker_process(tmp_path):
    log = str(tmp_path / "inits.log")

    @ifr.cls(use_process=True)
    class Slow:
        def __init__(self, log: str):
            _record_init(log, 0.0)

        @ifr.method.batch(return_dtype=DataType.int64(), batch_size=10)
        def run(self, xs: ifr.Series):
            if 50 in xs.to_pylist():
                time.sleep(60)  # still busy when the reader stops
            return xs.to_pylist()

    it = ifr.from_pydict({"x": list(range(1000))}).select(Slow(log).run(col("x"))).iter_rows()
    assert [next(it)["x"] for _ in range(5)] == [0, 1, 2, 3, 4]
    time.sleep(0.5)
    t = time.perf_counter()
    it.close()
    assert time.perf_counter() - t < 10
    [(pid, _, _)] = _inits(log)
    _wait_gone(pid)


def test_batch_method_in_process_gets_typed_named_series():
    @ifr.cls(use_process=True)
    class Inspect:
        def __init__(self):
            pass

        @ifr.method.batch(return_dtype=DataType.string())
        def describe(self, xs: ifr.Series):
            return [f"{xs.name()}:{xs.datatype()}"] * len(xs)

    import pyarrow as pa

    df = ifr.from_arrow(pa.table({"f": pa.array([1.5, None, 2.5], pa.float32())}))
    out = df.select(Inspect().describe(col("f"))).to_pydict()["f"]
    # Same as in a thread: the column keeps its name and its float32 type across the process boundary.
    assert out == [f"f:{DataType.float32()}"] * 3


def test_process_method_returns_nested_struct():
    """The seed's transcriber shape: a row method returning a struct with a list of structs."""

    @ifr.cls(use_process=True)
    class Transcriber:
        def __init__(self, words_per_segment: int = 2):
            self.k = words_per_segment

        @ifr.method(return_dtype=DataType.struct({
            "transcript": DataType.string(),
            "segments": DataType.list(DataType.struct({
                "start": DataType.float64(), "end": DataType.float64(), "text": DataType.string(),
            })),
        }))
        def transcribe(self, audio: str):
            words = audio.split()
            segs = [{"start": float(i), "end": float(i + self.k), "text": " ".join(words[i:i + self.k])}
                    for i in range(0, len(words), self.k)]
            return {"transcript": " ".join(s["text"] for s in segs), "segments": segs}

    df = ifr.from_pydict({"path": ["a b c", "d"]})
    out = df.with_column("result", Transcriber().transcribe(col("path"))).to_pydict()["result"]
    assert out[0]["transcript"] == "a b c"
    assert out[0]["segments"] == [{"start": 0.0, "end": 2.0, "text": "a b"}, {"start": 2.0, "end": 4.0, "text": "c"}]
    assert out[1]["segments"] == [{"start": 0.0, "end": 2.0, "text": "d"}]


@ifr.cls(use_process=True, max_concurrency=4, gpus=1)
class DeviceReport:
    def __init__(self):
        pass

    @ifr.method.batch(return_dtype=DataType.string(), batch_size=5)
    def device(self, xs: ifr.Series):
        time.sleep(0.05)
        return [f"{os.getpid()}={os.environ.get('CUDA_VISIBLE_DEVICES')}"] * len(xs)


def test_gpus_pin_each_process_instance_to_its_own_devices(monkeypatch):
    # The devices this run may use; each instance process sees only the ones it was given.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "no GPU" on machines without one
        out = ifr.from_pydict({"x": list(range(200))}).select(DeviceReport().device(col("x"))).to_pydict()["x"]
    by_pid = dict(r.split("=") for r in out)
    assert len(by_pid) >= 2
    assert set(by_pid.values()) <= {"4", "5", "6", "7"}
    assert len(set(by_pid.values())) == len(by_pid)  # no two instances share a GPU


@pytest.fixture(scope="module")
def text_embedder():
    # Kept on sys.path while the tests run: worker processes import the module by name too.
    sys.path.insert(0, str(EXAMPLES))
    try:
        import text_embedder

        yield text_embedder
    finally:
        sys.path.remove(str(EXAMPLES))


@pytest.mark.timeout(240)
def test_seed_text_embedder_in_worker_process(text_embedder):
    import numpy as np
    import pyarrow as pa

    docs = [f"Document {i} is about {['cats', 'finance', 'rockets', 'cooking'][i % 4]}" for i in range(200)]
    df = ifr.from_pydict({"document": docs})
    embedder = text_embedder.ProcessTextEmbedder()
    table = df.select(embedder.embed(df["document"]).alias("embedding")).to_arrow()
    assert table.schema.field("embedding").type == pa.list_(pa.float32())
    vecs = np.array(table.column("embedding").to_pylist(), dtype=np.float32)
    assert vecs.shape == (200, 384)
    assert np.isfinite(vecs).all()
    # Same model, same text, same vector as encoding here in the test process.
    direct = text_embedder.load_model().encode(docs[:8], convert_to_numpy=True)
    np.testing.assert_allclose(vecs[:8], direct, atol=1e-5)
    sims = vecs @ vecs.T / np.outer(np.linalg.norm(vecs, axis=1), np.linalg.norm(vecs, axis=1))
    assert sims[0, 4] > sims[0, 1]  # rows 0 and 4 are both about cats, row 1 about finance
