"""The SQL corpus: queries in the shapes of the vendors' AI SQL docs, each with its answer and the requests it sends.

``queries.sql`` holds the queries, each after ``-- name:``, ``-- shape:`` (the vendor doc shape it
follows) and ``-- requests:`` (how many requests it must send to the simulator: the rows the plan
needs, counted by hand from ``reviews.csv``). A write (``COPY (...) TO``, ``CREATE TABLE ... AS``) has a
``-- then:`` query that reads what it wrote, and that is its answer; ``{dir}`` in either is a fresh
temporary directory, so a written file never lands in the working directory. ``answers.json`` holds each query's answer, recorded once
from a run and read by a person (``python tests/sql_corpus/corpus.py --record`` rewrites it).
``run(name, sim)`` runs one query over the bundled tables and returns its answer and requests.

Example:
    >>> [q.name for q in queries()][:2]
    ['classify_with_cheap_where', 'query_model_first']
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow.csv as pacsv

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Query:
    name: str
    shape: str
    requests: int
    sql: str
    then: str | None = None  # a write's read-back query: its answer


def queries() -> list[Query]:
    """The corpus's queries, in file order."""
    out = []
    for block in (HERE / "queries.sql").read_text().split("-- name: ")[1:]:
        lines = block.strip().splitlines()
        head = {line[3:].split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines[1:] if line.startswith("-- ")}
        sql = " ".join(line for line in lines[1:] if not line.startswith("-- ")).strip().rstrip(";")
        out.append(Query(lines[0].strip(), head["shape"], int(head["requests"]), sql, head.get("then")))
    return out


def tables() -> dict:
    """The bundled tables as DataFrames: reviews (20 rows) and products (5 rows)."""
    import inferframe as ifr

    return {name: ifr.from_arrow(pacsv.read_csv(HERE / f"{name}.csv")) for name in ("reviews", "products")}


def answers() -> dict:
    return json.loads((HERE / "answers.json").read_text())


def shaped(*prefixes: str) -> list[Query]:
    """The queries whose names start with one of ``prefixes`` (``cte_``, ``subquery_``, ...)."""
    return [q for q in queries() if q.name.startswith(prefixes)]


# One CTE, one subquery with its outer WHERE and LIMIT pushed, two AI aggregates: what the Ray and Spark tests run (each
# query there costs 20-40 s of jobs on 2 cores; the whole NESTED_AND_AGGREGATES set passed on Ray once, in 505 s).
ON_CLUSTERS = ("cte_classify_count", "subquery_where_limit_pushed", "two_ai_aggregates")
NESTED_AND_AGGREGATES = ("cte_", "two_ctes", "subquery_", "in_subquery", "scalar_subquery", "ai_agg", "two_ai",
                         "summarize_all")


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

    import inferframe as ifr
    from inferframe.simulator import Simulator, SimulatorConfig

    sys.path.insert(0, str(HERE.parent))
    from sql_corpus.responder import respond

    os.environ.setdefault("INFERFRAME_PROGRESS", "0")
    recorded, frames = {}, tables()
    with Simulator(SimulatorConfig(responder=respond)) as sim:
        ifr.set_provider("openai", base_url=sim.base_url, api_key="sk-corpus")
        ifr.set_cache("off")
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
