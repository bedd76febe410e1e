"""README's "How it works" operator table names files that exist (issue 43 item 7).

The table maps each operator to its builder, plan node and planner, and steps; it went stale when sem_join
moved into ``plan/semantic/join/`` (it named ``node.py``, ``guard.py`` ... with no package). Every cell
names each file by its whole path under ``src/inferframe/`` (``tests/...`` from the repository root).
"""

import pathlib
import re

import inferframe as ifr

SRC = pathlib.Path(ifr.__file__).parent
REPO = SRC.parents[1]
OPERATORS = ("prompt", "classify_text", "embed_text", "sem_filter", "sem_topk", "sem_rank", "sem_agg", "sem_dedup",
             "sem_cluster_by", "sem_join", "sem_sim_join", "nearest")


def operator_table(readme: str) -> str:
    start = readme.index("| operator | builder (what the user calls) |")
    return readme[start:].split("\n\n")[0]


def missing_paths(table: str) -> list[str]:
    """The file and folder paths in ``table`` (``a/b.py``, ``a/``, ``b.py``) that do not exist."""
    bad = []
    for path in re.findall(r"`([\w./]+(?:\.py|/))`", table):
        where = REPO if path.startswith("tests/") else SRC
        if not (where / path).exists():
            bad.append(path)
    return bad


def test_every_path_in_the_operator_table_exists():
    table = operator_table((REPO / "README.md").read_text(encoding="utf-8"))
    assert missing_paths(table) == []
    rows = [re.findall(r"`(\w+)`", line.split("|")[1]) for line in table.splitlines()[2:]]
    assert set(OPERATORS) <= {name for row in rows for name in row}


def test_a_path_given_without_its_folder_is_missing():
    assert missing_paths("| `sem_join` | `functions/_sem_join_api.py` | `node.py`, `plan/semantic/join/` |") == [
        "node.py"]
