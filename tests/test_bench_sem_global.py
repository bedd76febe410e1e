"""bench/sem_global.py on the simulator at tiny sizes: the table prints a row per operator and plan, and
sem_topk asks fewer questions than the naive all-pairs plan (parsed from the printed table)."""

import importlib.util
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "sem_global.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_sem_global", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sem_global_bench_sim_prints_the_table_and_topk_beats_the_naive_plan(capsys):
    bench = load_bench()
    bench.main(["--backend", "sim", "--topk-rows", "40", "--topk-positives", "6", "-k", "5",
                "--dedup-entities", "6", "--dedup-k", "3", "--agg-groups", "2"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["backend", "operator", "plan", "rows"]
    rows = {}
    for line in lines[2:]:
        m = re.match(r"sim\s+(\S+)\s+(.+?)\s{2,}(\d+)\s{2,}(.+?)\s{2,}(\d+)", line)
        if m:
            rows[(m.group(1), m.group(2))] = int(m.group(5))
    assert {op for op, _ in rows} == {"sem_topk", "sem_cluster_by", "sem_dedup", "sem_agg"}
    assert rows[("sem_topk", "naive all pairs")] == 40 * 39 // 2
    assert 0 < rows[("sem_topk", "quickselect")] < rows[("sem_topk", "naive all pairs")]
    assert rows[("sem_cluster_by", "naive all pairs")] == 12 * 11 // 2
    assert "rows kept = clusters above" in out
    assert re.search(r"sim: sem_topk target .*: (PASS|FAIL) \(calls \d+/780", out)
