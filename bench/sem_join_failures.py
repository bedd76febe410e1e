"""issue 31 item 4 on the embedded model: a batched sem_join whose answers were cut off, and the plans two phrasings get.

1. people x companies (10 x 10), "{bio:left} describes a person who would work at {description:right}":
   the plan chosen, the model calls, how many failed (and of which kind), the pairs kept, how many
   are the planted match (each person has one company), the warnings, the wall time.
2. 40 x 40 IMDB sentences, "{text:left} and {text:right} express the same sentiment about the film":
   the plan explain() shows (no model call; k=10 is given so that a blocking plan runs no sample).

Usage:
    .venv/bin/python bench/sem_join_failures.py            # the embedded Gemma 3 270M (cache off)
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
import warnings
from pathlib import Path

import inferframe as ifr
from inferframe.observe import last_run

ROOT = Path(__file__).resolve().parent.parent

PEOPLE = [
    ("Ana", "A nurse with ten years on a hospital ward, caring for patients after surgery."),
    ("Ben", "A pastry chef who bakes bread and cakes before dawn every day."),
    ("Chloe", "A software engineer who writes backend services in Python and Go."),
    ("Dev", "A long-haul truck driver who moves freight across the country."),
    ("Eva", "A primary school teacher who teaches reading and maths to young children."),
    ("Finn", "A pilot who flies passenger jets on international routes."),
    ("Gina", "An accountant who prepares tax returns and audits company books."),
    ("Hugo", "A farmer who grows wheat and raises dairy cows."),
    ("Iris", "A journalist who reports on politics for a daily newspaper."),
    ("Jon", "An electrician who wires new houses and repairs power lines."),
]
COMPANIES = [
    ("St Mary's", "A city hospital with surgical wards and an emergency department."),
    ("Crumb & Co", "A bakery selling fresh bread, pastries and cakes."),
    ("Cloudly", "A software company building cloud services for developers."),
    ("RoadFreight", "A logistics firm that moves goods by truck across the country."),
    ("Oak Primary", "A primary school for children aged five to eleven."),
    ("SkyWays", "An airline flying passengers to fifty international destinations."),
    ("Ledger LLP", "An accounting firm offering tax, audit and bookkeeping services."),
    ("Green Acres", "A family farm producing wheat and milk."),
    ("The Daily Post", "A national daily newspaper covering politics and business."),
    ("Sparks Ltd", "An electrical contractor wiring homes and maintaining power lines."),
]


def main() -> None:
    people = ifr.from_pydict({"name": [p[0] for p in PEOPLE], "bio": [p[1] for p in PEOPLE]})
    companies = ifr.from_pydict({"company": [c[0] for c in COMPANIES], "description": [c[1] for c in COMPANIES]})
    gold = {(p[0], c[0]) for p, c in zip(PEOPLE, COMPANIES)}
    j = people.sem_join(companies, "{bio:left} describes a person who would work at {description:right}",
                        model="gemma-3-270m", cache="off")
    line = _semjoin_line(j)
    print("1. people x companies 10 x 10")
    print("  ", line)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out = j.to_pydict()
            stopped = None
        except Exception as e:  # the job stopping is a result here: print it
            out, stopped = {"name": [], "company": []}, f"{type(e).__name__}: {e}"
    wall = time.perf_counter() - t0
    found = set(zip(out["name"], out["company"]))
    for r in last_run():
        print(f"   last_run: {r['label']} calls={r['rows_done']} errors={r['errors']} requests={r['requests']}")
    print(f"   pairs kept={len(found)} correct={len(found & gold)} of {len(gold)} planted; wall {wall:.1f} s")
    for w in seen:
        if "inferframe" in w.category.__module__:
            print(f"   {w.category.__name__}: {str(w.message)[:300]}")
    if stopped:
        print(f"   stopped: {stopped[:300]}")
    reviews = ifr.read_csv(str(ROOT / "examples/data/classify/imdb_heldout.csv")).limit(40).collect()
    line = _semjoin_line(reviews.sem_join(reviews, "{text:left} and {text:right} express the same sentiment about the film",
                                          model="gemma-3-270m", k=10))  # k: a blocking plan runs no sample to explain
    print("2. reviews 40 x 40, 'express the same sentiment about the film'")
    print("  ", line)


def _semjoin_line(df) -> str:
    with contextlib.redirect_stdout(io.StringIO()):  # explain() prints the whole plan too
        text = df.explain(show_all=False)
    return next(l for l in text.splitlines() if "SemJoin" in l).strip()


if __name__ == "__main__":
    sys.exit(main())
