"""The Ray runner: the same plan on a Ray cluster, through Ray Data.

``set_runner_ray()`` (or ``INFERFRAME_RUNNER=ray``) makes every DataFrame run here instead of in
this process; pipeline code does not change. Each job gets its coordinator (shared rate limits,
breaker, and the workers' counters, see ``runners.ray_limits``) and its state (key handles, rows) as
instances in two actors the driver starts once and keeps for its next jobs (``ray_limits.host``); the plan becomes a Ray
Data pipeline from the one physical plan (``plan.physical``, run by ``runners.ray_plan``); the driver streams the result blocks in order and shows
the whole cluster's counters in the progress line and ``last_run()``.

Example:
    >>> import inferframe as ifr
    >>> runner = set_runner_ray()            # doctest: +SKIP
    >>> ifr.from_pydict({"a": [1, 2]}).with_column("b", ifr.col("a") * 2).to_pydict()  # doctest: +SKIP
    {'a': [1, 2], 'b': [2, 4]}
    >>> _ = ifr.set_runner_native()          # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from types import MappingProxyType
import uuid
import weakref
from typing import Any, Iterator

import pyarrow as pa

from inferframe.ai.run import RunServices
from inferframe.errors import InferframeError, ServiceError, warn_user
from inferframe.io.arrow_stream import StreamSource
from inferframe.observe.stats import RunCounters
from inferframe.plan import logical as lp
from inferframe.plan.ai_nodes import is_ai_call
from inferframe.plan import physical as pp
from inferframe.plan.row_bound import rows_at_most
from inferframe.providers import secrets
from inferframe.runners import ray_plan as rp
from inferframe.runners.base import Runner
from inferframe.runners.local import LocalRunner, on_the_driver_anyway
from inferframe.runners.ray_job_state import ROW_FIELDS, JobState, JobStateLink


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the install has it
        raise ImportError("The Ray runner needs ray: pip install 'inferframe[ray]'.") from e
    return ray


# Spending counters (requests, tokens, cost, retries, 429s) are reported as they grow, every REPORT_SECONDS, so
# a worker that dies has its spending counted up to then (rows are counted per batch: ``ray_job_state``).
REPORT_SECONDS = 0.25


class RayRunServices(RunServices):
    """A Ray worker's services: the job's coordinator actor, and this worker's counters, reported to it."""

    def start_reporting(self, source: str, job_state: Any) -> None:
        self.source, self.job_state = source, job_state
        self._before: dict[str, dict] = {}
        self._seq, self._seq_lock = 0, threading.Lock()
        threading.Thread(target=self._report_loop, name="inferframe-ray-report", daemon=True).start()

    def _rows(self) -> dict[str, dict]:
        return {s["label"]: {k: s[k] for k in ROW_FIELDS} for s in self.counters.snapshot()}

    def batch_started(self) -> None:
        self._before = self._rows()
        if self.counters.trace is not None:  # the job is traced and this worker records (observe.otel_workers)
            self.counters.trace.task_started()

    def batch_done(self, key: str) -> None:
        """The batch ``key`` was delivered: record its rows (once, whatever the attempt) and the spending so far."""
        zero = dict.fromkeys(ROW_FIELDS, 0)
        delta = {label: {k: v - self._before.get(label, zero)[k] for k, v in rows.items()}
                 for label, rows in self._rows().items()}
        self.job_state.batch_rows(key, delta)  # one call per batch, before it is handed on
        self.report()
        if self.counters.trace is not None:
            self.counters.trace.task_done()

    def report(self) -> None:
        """Send this worker's spending counters (cumulative) to the coordinator, where the driver reads them."""
        with self._seq_lock:  # numbered as taken: the actor keeps the newest of reports that arrive out of order
            self._seq += 1
            seq, snaps = self._seq, [{**s, **dict.fromkeys(ROW_FIELDS, 0)} for s in self.counters.snapshot()]
        if snaps:
            self.coordinator.report_counters(self.source, snaps, seq)

    def _report_loop(self) -> None:
        last = None
        while True:
            time.sleep(REPORT_SECONDS)
            now = [(s["label"], s["requests"], s["input_tokens"], s["output_tokens"], s["retries"])
                   for s in self.counters.snapshot()]
            if now != last:
                last = now
                try:
                    self.report()
                except Exception:  # the coordinator is gone: the job is ending, or stops with its own message
                    return


class WorkerServices:
    """Picklable recipe for a worker's services: called once per actor (or task) in the worker."""

    def __init__(self, coordinator: Any, job_state: Any, tracing: Any = None) -> None:
        self.coordinator = coordinator
        self.job_state = job_state
        self.tracing = tracing  # the driver's job trace context (observe.otel_workers.WorkerTracing), or None

    def __call__(self) -> RayRunServices:
        ray = _ray()
        # Keys come from the job's secrets actor into this process's environment, never through the plan.
        for k, v in self.job_state.env().items():
            os.environ.setdefault(k, v)
        from inferframe.runners.ray_node_server import use_node_server

        use_node_server()  # the local model: one llama-server per node, not one per worker
        services = RayRunServices(self.coordinator, RunCounters(), None)
        source = f"{ray.get_runtime_context().get_worker_id()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        services.start_reporting(source, self.job_state)
        if self.tracing is not None:
            from inferframe.observe.otel_workers import worker_trace

            services.counters.trace = worker_trace(self.tracing, services.counters, source)
        return services


class _Idle:
    """An actor that does nothing (see ``_absorb_restart_warning``)."""

    def __init__(self, _arg: Any) -> None:
        pass


_RESTART_WARNING_ABSORBED = False


def _absorb_restart_warning(ray) -> None:
    """Keep Ray's "constructor arguments in the object store and max_restarts > 0" line off the terminal.

    Ray Data starts every actor-pool worker with object-store refs as constructor arguments and
    ``max_restarts=-1``, and the driver's core worker then logs at error level that a restart would fail
    if those refs were lost (ray-project/ray#53727). Ray Data holds them for the operator's whole life,
    so the line is nothing a user can act on. Ray logs it once per process: one throwaway actor, created
    while stderr points at /dev/null, uses that once, so no job prints it and every other log still shows.
    """
    global _RESTART_WARNING_ABSORBED
    if _RESTART_WARNING_ABSORBED:
        return
    _RESTART_WARNING_ABSORBED = True
    import sys

    ref = ray.put(None)
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        actor = ray.remote(num_cpus=0, max_restarts=1)(_Idle).remote(ref)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    ray.kill(actor, no_restart=True)


class RayRunner(Runner):
    """Run plans on a Ray cluster with Ray Data; results equal the local runner's, row for row.

    Parameters:
        address: the cluster to join ("auto", "ray://host:10001", ...); None joins a running local
            cluster or starts one. ``INFERFRAME_RAY_ADDRESS`` is read when None.
        init_options: more ``ray.init`` options when this runner starts Ray.
    """

    name = "ray"

    def __init__(self, address: str | None = None, **init_options: Any) -> None:
        self.address = address if address is not None else os.environ.get("INFERFRAME_RAY_ADDRESS") or None
        self.init_options = init_options

    # --- the cluster ---------------------------------------------------------------------------
    def connect(self):
        """Join the cluster (or start a local one) once; returns the ``ray`` module."""
        ray = _ray()
        if not ray.is_initialized():
            options = {"include_dashboard": False, "log_to_driver": False, **self.init_options}
            if self.address is not None:
                ray.init(address=self.address, **options)
            else:
                try:
                    ray.init(address="auto", **options)
                except (ConnectionError, RuntimeError):
                    ray.init(**options)
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True  # results in the plan's order, as locally
        ctx.enable_progress_bars = False  # the driver draws inferframe's own line
        ctx.raise_original_map_exception = True  # a worker's inferframe error reaches the driver as itself
        _absorb_restart_warning(ray)
        return ray

    def cluster_cpus(self) -> int:
        return int(self.connect().cluster_resources().get("CPU", 1))

    # --- running ------------------------------------------------------------------------------
    writes_in_workers = True

    def execute(self, op: pp.PhysicalOp, counters: RunCounters | None = None) -> Iterator[pa.RecordBatch]:
        if on_the_driver_anyway(op, lambda read: isinstance(read.source.source, StreamSource)):
            yield from LocalRunner().execute(op, counters)
            return
        ray = self.connect()
        _warn_node_local_cache(ray, op)
        with _Job(ray, counters) as job, _own_errors():
            ds = _Builder(job, self.cluster_cpus()).build_job(op)
            for table in ds.iter_batches(batch_format="pyarrow", batch_size=None):
                table = rp.cast_to(table, op.schema)
                yield from table.combine_chunks().to_batches()

    def write_parts(self, plan: lp.LogicalPlan, pending: Any, counters: RunCounters | None = None) -> list[list[str]]:
        """Each task writes its rows as part files under ``pending``'s temporary directory; the names, in order."""
        ray = self.connect()
        op = pp.plan_physical(plan)
        _warn_node_local_cache(ray, op)
        with _Job(ray, counters) as job, _own_errors():
            ds = _Builder(job, self.cluster_cpus()).build_job(op)
            ds = ds.map_batches(_conform_block, fn_kwargs={"schema": plan.schema}, batch_format="pyarrow")
            ds = ds.map_batches(rp.write_block, fn_kwargs={"pending": pending}, batch_format="pyarrow", batch_size=None)
            return [names for t in ds.iter_batches(batch_format="pyarrow", batch_size=None)
                    for names in t.column("names").to_pylist()]

    def to_dataset(self, plan: lp.LogicalPlan):
        """The plan as a Ray Dataset (for ``df.to_ray_dataset()``); AI calls in it report to no progress line."""
        job = _Job(self.connect(), poll=False)  # lives as long as the dataset: no job on the driver reads its counters
        job.__enter__()
        ds = _Builder(job, self.cluster_cpus()).build_job(pp.plan_physical(plan))
        job.end_with_its_plans()
        return ds.map_batches(_conform_block, fn_kwargs={"schema": plan.schema}, batch_format="pyarrow")


NODE_LOCAL_CACHE = (
    "this job runs on a Ray cluster of {nodes} nodes, and its AI calls cache answers in a SQLite file ({where}) "
    "that each node keeps for itself: a batch Ray runs again on another node, or the job run again from another "
    "machine, sends and pays for its requests again. Share one cache between the nodes: "
    "cache_url=\"postgresql://user:password@host:5432/db\" (or set_cache(url=...) / INFERFRAME_CACHE_URL)."
)


def _node_local_caches(op: pp.PhysicalOp) -> set[str]:
    """The cache directories of the plan's AI calls that read or write a SQLite file, not a shared store."""
    found: set[str] = set()
    nodes = [op.call] if isinstance(op, pp.UDFStage) else []
    predicate = getattr(op, "predicate", None)  # a filter's (physical operators are matched by what they hold)
    nodes += list(getattr(op, "exprs", ())) + ([predicate] if predicate is not None else [])
    for node in nodes:
        for n in node.walk():
            call = getattr(n.udf, "call", None) if is_ai_call(n) else None
            runtime = getattr(getattr(call, "config", None), "runtime", None)
            if runtime is not None and runtime.cache_store is None and runtime.cache_policy != "off":
                found.add(runtime.cache_dir or "the default cache directory")
    for i in op.inputs:
        found |= _node_local_caches(i)
    return found


def _warn_node_local_cache(ray, op: pp.PhysicalOp) -> None:
    """One warning per job when AI calls cache in SQLite and the cluster has more than one live node."""
    where = _node_local_caches(op)
    if not where:
        return
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    if nodes > 1:
        warn_user(NODE_LOCAL_CACHE.format(nodes=nodes, where=", ".join(sorted(where))), RuntimeWarning)


@contextlib.contextmanager
def _own_errors():
    """A job that failed in a worker raises the worker's inferframe error itself, as the local runner does."""
    try:
        yield
    except InferframeError:
        raise
    except Exception as e:
        seen, cause = set(), e
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            if isinstance(cause, InferframeError):
                raise cause from None
            cause = getattr(cause, "cause", None) or cause.__cause__
        raise


def _conform_block(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return rp.cast_to(table, schema)


class _Job:
    """One job's cluster state: its coordinator and its state (secrets, rows) in the driver's host actors;
    merges the workers' counters into the job's (``counters``; None: new ones)."""

    def __init__(self, ray, counters: RunCounters | None = None, poll: bool = True) -> None:
        self.ray = ray
        self.counters = counters if counters is not None else RunCounters()
        self.poll = poll

    def __enter__(self) -> "_Job":
        self._services = None
        self._stop = threading.Event()
        self._poller = None
        return self

    @property
    def services(self) -> "WorkerServices":
        """The workers' services: the job's state is made on the first UDF stage that needs it, so a job
        of reads, maps, sorts and joins alone asks nothing of the hosts (whose first start is two worker
        processes, seconds on a small node)."""
        if self._services is None:
            self._services = self._start()
            if self.poll:
                self._poller = threading.Thread(target=self._poll, name="inferframe-ray-counters", daemon=True)
                self._poller.start()
        return self._services

    def _start(self) -> "WorkerServices":
        from inferframe.runners.ray_limits import driver_coordinator, driver_host, forget_host

        ray = self.ray
        # The job's state lives as long as the driver, on its node: a worker node that leaves mid-job
        # (scaled down, lost) must not take it along and stop the job. Hard: Ray places an actor of
        # no resources anywhere under a soft affinity (seen with Ray 2.60).
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        job = uuid.uuid4().hex[:12]
        for attempt in (1, 2):  # the driver's hosts serve its jobs; one found dead is replaced once
            self.coordinator = driver_coordinator(job)
            self.state = JobStateLink(driver_host("state", JobState, scheduling_strategy=here)[0], job)
            try:
                self.coordinator.started()
                self.state.set_env(secrets.worker_env())
                break
            except Exception:  # ServiceError: dead or not answering; Ray's own error where it cannot submit at all
                self.coordinator.close()
                self.state.end()
                if attempt == 2:
                    raise
                forget_host("limits")
                forget_host("state")
        trace = self.counters.trace  # the driver's job trace (None: not traced): its context goes to the workers
        return WorkerServices(self.coordinator, self.state, trace.for_workers() if trace is not None else None)

    def end_with_its_plans(self) -> None:
        """For a dataset handed to the user: the datasets made from it hold the workers' services in their plans,
        so the job's state (keys, counters, limits) ends when the last of them is gone, not with the driver."""
        if self._services is not None:
            weakref.finalize(self._services, _end_quietly, self.coordinator, self.state)
            self._services = None  # the plans hold them now; this job object must not keep them alive

    def _merge(self) -> None:
        for source, snaps in self.coordinator.counter_reports().items():
            self.counters.merge(source, snaps)  # spending, per worker
        self.counters.merge("ray:rows", self.state.rows())  # rows, per delivered batch

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self._merge()
            except Exception:  # the progress line may lag; the final merge below tells
                pass

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._services is None:
            return
        if self._poller is not None:
            self._poller.join(timeout=5)
        try:
            self._merge()
        except Exception:
            if exc[0] is None:
                raise  # a failed job keeps its own error; the counters are best effort then
        finally:
            self.coordinator.close()
            self.state.end()


def _end_quietly(coordinator, state) -> None:
    """End a dataset's job in the driver's hosts; at the interpreter's exit Ray may be gone already."""
    try:
        coordinator.close()
        state.end()
    except Exception:  # noqa: BLE001 - the cluster ended first: its hosts, and the job's state, with it
        pass


class _Builder:
    """Physical operators -> a Ray Dataset: per-batch maps as tasks, UDF stages as tasks or actor pools,
    exchanges as Ray's shuffles, sort and join (``runners.ray_plan``)."""

    def __init__(self, job: _Job, cluster_cpus: int) -> None:
        self.job = job
        self.cpus = cluster_cpus
        self.read_rows: dict[pp.PhysicalOp, int] = {}  # sources already read on the driver: their rows

    def build(self, op: pp.PhysicalOp):
        return pp.dispatch(_RUN, op)(self, op)

    def read_table(self, op: pp.ReadTable):
        return rp.source_table(op.table)

    def read_files(self, op: pp.ReadFiles):
        ds, rows = rp.source_files(op.source)
        if rows is not None:
            self.read_rows[op] = rows
        return ds

    def map(self, op: pp.Map):
        return self.build(op.input).map_batches(rp.map_block, fn_kwargs={"op": op.alone()}, batch_format="pyarrow")

    def limit(self, op: pp.Limit):
        return self.build(op.input).limit(op.n)

    def rebatch(self, op: pp.Rebatch):
        return rp.into_batches(self.build(op.input), op.size)

    def union(self, op: pp.Union):
        parts = [self.build(i).map_batches(_conform_block, fn_kwargs={"schema": op.schema}, batch_format="pyarrow")
                 for i in op.inputs]
        return parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]

    def udf_stage(self, op: pp.UDFStage):
        ds = self.build(op.input)  # first: it reads the driver's sources, whose rows then bound the stage's
        return rp.udf_stage(ds, op, self.job.services, self.cpus, rows_at_most(op.input, self.read_rows.get))

    def build_job(self, op: pp.PhysicalOp):
        """The whole plan, each of its datasets with the job's shuffle (``ray_plan.shuffle_strategy``): Ray's
        sources copy the process's DataContext when made, so it is set while they are made, then put back."""
        import ray.data

        ctx = ray.data.DataContext.get_current()
        saved, ctx.shuffle_strategy = ctx.shuffle_strategy, rp.shuffle_strategy(op)
        try:
            return self.build(op)
        finally:
            ctx.shuffle_strategy = saved

    def exchange(self, op: pp.Exchange):
        inputs = [self.build(i) for i in op.inputs]  # first: a source read on the driver bounds a join's right side
        if op.kind == "join":
            return rp.join_any(*inputs, op.spec, self.cpus, rows_at_most(op.inputs[1], self.read_rows.get))
        return _EXCHANGES[op.kind](*inputs, op.spec, self.cpus)


# Each exchange on Ray's own shuffles, sort and join: (input datasets..., logical spec, cluster CPUs) -> dataset.
_EXCHANGES = MappingProxyType({
    "sort": lambda ds, node, cpus: rp.sort(ds, node),
    "distinct": rp.distinct,
    "aggregate": rp.aggregate,
    "repartition": rp.repartition,
    "nearest": lambda left, right, node, cpus: rp.nearest(left, right, node),
})

_RUN = MappingProxyType({
    pp.ReadTable: _Builder.read_table, pp.ReadFiles: _Builder.read_files, pp.Map: _Builder.map,
    pp.Limit: _Builder.limit, pp.Rebatch: _Builder.rebatch, pp.Union: _Builder.union,
    pp.UDFStage: _Builder.udf_stage, pp.Exchange: _Builder.exchange,
})
