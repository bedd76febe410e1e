"""SQL planning's DuckDB connections: one database per parse and per plan look (before) vs one kept (now).

``ifr.sql`` parses the query and prints rewritten pieces back through DuckDB (``json_serialize_sql``,
``json_deserialize_sql``), and looks at DuckDB's plan for the columns each DataFrame's scan reads. Each
of those asks used to open a new in-memory database (12 ms) for a call of 0.35 ms; now they share one
(``sql/tree.py``, closed before every fork). This runs the SQL corpus (tests/sql_corpus: 50+ queries in
the shapes of the vendors' AI SQL docs, against the project's simulator, cache off) both ways, in one
process, alternating, and prints the seconds per pass and the ratio.

    .venv/bin/python bench/sql_planning.py [--passes 2]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the corpus and its simulator's responder
os.environ.setdefault("INFERFRAME_PROGRESS", "0")

tree = importlib.import_module("inferframe.sql.tree")  # (inferframe.sql is also the name of the function sql())


class _DatabaseEach:
    """The planner's parser as it was: a new DuckDB database for every call, closed at once."""

    @contextlib.contextmanager
    def cursor(self):
        import duckdb

        con = duckdb.connect()
        try:
            yield con
        finally:
            con.close()


@contextlib.contextmanager
def database_each():
    """Swap the planner's one database for a database per call, and put it back."""
    kept = tree._PARSER  # every parse and plan look goes through planning_cursor(), which asks it
    tree._PARSER = _DatabaseEach()
    try:
        yield
    finally:
        tree._PARSER = kept


def one_pass(queries, sim, frames) -> tuple[float, int]:
    from sql_corpus.corpus import run

    started = time.perf_counter()
    sent = sum(run(q, sim, frames)[1] for q in queries)
    return time.perf_counter() - started, sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=2, help="passes of the corpus each way, alternating")
    args = parser.parse_args()
    from sql_corpus.corpus import queries, simulated, tables

    qs, frames = queries(), tables()
    times: dict[str, list[float]] = {"a database per call": [], "one database": []}
    with simulated() as sim:
        one_pass(qs[:3], sim, frames)  # imports and the simulator's first answers, in neither figure
        for _ in range(args.passes):
            with database_each():
                seconds, sent_before = one_pass(qs, sim, frames)
            times["a database per call"].append(seconds)
            seconds, sent_now = one_pass(qs, sim, frames)
            times["one database"].append(seconds)
            assert sent_before == sent_now, (sent_before, sent_now)  # the same plans, the same requests
    print(f"SQL corpus: {len(qs)} queries, {sent_now} requests a pass to the simulator (cache off), "
          f"{args.passes} passes each way, alternating")
    for name, seconds in times.items():
        print(f"  {name:20s} {', '.join(f'{s:.2f} s' for s in seconds)}  (best {min(seconds):.2f} s, "
              f"{min(seconds) / len(qs) * 1000:.1f} ms a query)")
    ratio = min(times["a database per call"]) / min(times["one database"])
    print(f"  one database is {ratio:.2f}x faster over the whole corpus (planning and running)")


if __name__ == "__main__":
    main()
