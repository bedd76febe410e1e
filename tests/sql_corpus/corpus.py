"""The SQL corpus: queries in the shapes of the vendors' AI SQL docs, each with its answer and the requests it sends.

``queries.sql`` holds the queries, each after ``-- name:``, ``-- shape:`` (the vendor doc shape it
follows), ``-- tags:`` (the issue's shapes it belongs to: ``cte``, ``subquery``, ``ai_aggregate``, ``topk``:
what the Ray and Spark tests select) and ``-- requests:`` (how many requests it must send to the simulator: the rows the plan
needs, counted by hand from ``reviews.csv``). A write (``COPY (...) TO``, ``CREATE TABLE ... AS``) has a
``-- then:`` query that reads what it wrote, and that is its answer; ``{dir}`` in either is a fresh
temporary directory, so a written file never lands in the working directory. ``answers.json`` holds each query's answer, recorded once
from a run and read by a person (``python tests/sql_corpus/corpus.py --record`` rewrites it).
``run(name, sim)`` runs one query over the bundled tables and returns its answer and requests;
``simulated()`` is the simulator every SQL test and the recorder set up, and ``on_runner`` runs the tagged
queries on a cluster runner against the local answers.

Example:
    >>> [q.name for q in queries()][:2]
    ['classify_with_cheap_where', 'query_model_first']
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Query:
    name: str
    shape: str
    requests: int
    sql: str
    then: str | None = None  # a write's read-back query: its answer
    tags: tuple[str, ...] = ()


def queries() -> list[Query]:
    """The corpus's queries, in file order."""
    out = []
    for block in (HERE / "queries.sql").read_text().split("-- name: ")[1:]:
        lines = block.strip().splitlines()
        head = {line[3:].split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines[1:] if line.startswith("-- ")}
        sql = " ".join(line for line in lines[1:] if not line.startswith("-- ")).strip().rstrip(";")
        tags = tuple(t.strip() for t in head.get("tags", "").split(",") if t.strip())
        out.append(Query(lines[0].strip(), head["shape"], int(head["requests"]), sql, head.get("then"), tags))
    return out


def tables() -> dict:
    """The bundled tables as DataFrames: reviews (20 rows) and products (5 rows)."""
    import inferframe as ifr

    return {name: ifr.from_arrow(pacsv.read_csv(HERE / f"{name}.csv")) for name in ("reviews", "products")}


def answers() -> dict:
    return json.loads((HERE / "answers.json").read_text())


def tagged(*tags: str) -> list[Query]:
    """The queries with one of ``tags`` (``cte``, ``subquery``, ``ai_aggregate``), in file order.

    Example:
        >>> [q.name for q in tagged("ai_aggregate")][:2]
        ['cte_with_ai_aggregate', 'ai_agg_per_group']
    """
    return [q for q in queries() if set(tags) & set(q.tags)]


# The "done": its CTE, subquery and aggregate queries also pass on Ray and Spark; and the top-k plan, whose
# one call per distinct input must hold when the rows are split among workers.
ON_CLUSTERS = ("cte", "subquery", "ai_aggregate", "topk")


@contextlib.contextmanager
def simulated() -> Iterator[Any]:
    """The corpus's simulator, set as a user sets a provider (``ifr.set_provider``), with the cache off so that each
    query's requests are its own; the provider and cache policy are put back after."""
    import inferframe as ifr
    from inferframe.session import reset_provider
    from inferframe.simulator import Simulator, SimulatorConfig
    from sql_corpus.responder import respond

    with Simulator(SimulatorConfig(responder=respond)) as sim:
        ifr.set_provider("openai", base_url=sim.base_url, api_key="sk-corpus")
        ifr.set_cache("off")
        try:
            yield sim
        finally:
            reset_provider()
            ifr.set_cache("read_write")


def on_runner(runner: Any, sim: Any) -> list[str]:
    """Every ``ON_CLUSTERS`` query on ``runner`` (set by ``ifr.set_runner_ray()`` or ``set_runner_spark``): a line
    for each that differs from the local runner (empty: none). Each must give the answer and send the requests
    answers.json and queries.sql hold (test_sql_corpus checks them on the local runner), through the shared limits
    and cache, and run at least one job on the runner. All run in one call, on one cluster and simulator: the
    failure lists every query that differs, which a test per query would name no better."""
    import inferframe as ifr

    jobs, frames, wrong = [], tables(), []
    execute = runner.execute
    runner.execute = lambda *a, **kw: (jobs.append(1), execute(*a, **kw))[1]  # counts the jobs the runner runs
    try:
        for query in tagged(*ON_CLUSTERS):
            before = len(jobs)
            out, sent = run(query, sim, frames)
            if out != answers()[query.name] or sent != query.requests or len(jobs) == before:
                wrong.append(f"{query.name}: {sent} requests (local: {query.requests}), {len(jobs) - before} jobs, "
                             f"answer {out} (local: {answers()[query.name]})")
    finally:
        runner.execute = execute
        ifr.set_runner_native()
    return wrong


def run(query: Query, sim, frames: dict) -> tuple[dict, int]:
    """The query's answer (a dict of columns) and the requests the simulator answered for it."""
    import inferframe as ifr

    before = sim.stats()["total_requests"]
    with tempfile.TemporaryDirectory() as directory:
        out = ifr.sql(query.sql.replace("{dir}", directory), **frames).to_pydict()
        if query.then is not None:
            out = ifr.sql(query.then.replace("{dir}", directory), **frames).to_pydict()
    return out, sim.stats()["total_requests"] - before


def main() -> None:
    """``--record``: run every query on the local runner and write answers.json; print requests against the file's."""
    import os

    sys.path.insert(0, str(HERE.parent))
    os.environ.setdefault("INFERFRAME_PROGRESS", "0")
    recorded, frames = {}, tables()
    with simulated() as sim:
        for q in queries():
            try:
                out, sent = run(q, sim, frames)
            except Exception as e:  # noqa: BLE001 - the report names it
                print(f"{q.name}: ERROR {type(e).__name__}: {str(e)[:300]}")
                continue
            recorded[q.name] = out
            mark = "" if sent == q.requests else f"   <-- file says {q.requests}"
            print(f"{q.name}: {sent} requests{mark}  {json.dumps(out)[:150]}")
    if "--record" in sys.argv:
        lines = [f" {json.dumps(name)}: {json.dumps(out)}" for name, out in recorded.items()]
        (HERE / "answers.json").write_text("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    main()
