"""Every semantic operator has one shape (issue 43 item 1): a thin builder where the user calls it, its planner and
its steps under ``plan/semantic/``, one round-runner, one failure counter, and ``WholeTable`` with one mode.

Static checks over the source, as the architecture tests beside it are; each names what it found.
"""

import ast
import dataclasses
import pathlib

import pytest

import inferframe as ifr
from inferframe.plan import whole_table

SRC = pathlib.Path(ifr.__file__).parent
SEMANTIC = SRC / "plan" / "semantic"
# The builders of the semantic operators, where the user calls them (functions/; dataframe/semantic.py's methods).
BUILDERS = sorted((SRC / "functions").glob("_sem_*.py")) + sorted((SRC / "functions").glob("sem_join*.py"))
PLANNER_NAMES = {"quickselect_top", "order_by_wins", "choose_plan", "candidates_by_score", "swap_check", "SWAP_CHECKS",
                 "expected_calls", "pack", "reduce_groups", "UnionFind", "candidate_pairs", "cluster_ids"}


def _tree(path):
    return ast.parse(path.read_text(), str(path))


def _calls(path, name):
    """Lines where ``path`` calls ``name`` (a plain name or an attribute)."""
    return [n.lineno for n in ast.walk(_tree(path)) if isinstance(n, ast.Call)
            and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)]


def _names_used(path, name):
    return [n.lineno for n in ast.walk(_tree(path)) if isinstance(n, ast.Name) and n.id == name]


def _semantic_modules():
    return sorted(SEMANTIC.rglob("*.py")) + BUILDERS


def test_sem_join_lives_in_one_package_and_its_builder_in_functions():
    """Before: sem_join's batching, guard and steps were in functions/ (sem_join_batches, sem_join_guard,
    sem_join_steps) and its builder in dataframe/sem_join.py."""
    outside = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*sem_join*.py"))
    assert outside == ["functions/_sem_join_api.py", "functions/sem_join.py"], outside
    package = sorted(p.stem for p in (SEMANTIC / "join").glob("*.py"))
    assert package == ["__init__", "batches", "estimate", "guard", "names", "node", "plans"], package
    assert not (SEMANTIC / "join.py").exists() and not (SEMANTIC / "join_plans.py").exists()
    for path in BUILDERS:  # a builder builds the node; the planner's nodes (guard, batches) are built in plan/
        assert not _calls(path, "WholeTable") or path.name == "_sem_global.py", path
        assert not _calls(path, "record_operator") and not _calls(path, "last_run"), path


def test_the_builders_re_export_no_planner_name():
    """Before: functions/_sem_topk.py, _sem_dedup.py and _sem_agg.py re-exported their planners' functions."""
    import inferframe.functions._sem_agg as agg
    import inferframe.functions._sem_dedup as dedup
    import inferframe.functions._sem_topk as topk

    for module in (topk, dedup, agg):
        found = sorted(PLANNER_NAMES & set(vars(module)))
        assert not found, f"{module.__name__} re-exports {found}: import them from plan.semantic"
        defined = {n.name for n in _tree(pathlib.Path(module.__file__)).body if isinstance(n, ast.FunctionDef)}
        assert set(module.__all__) <= defined, (module.__name__, set(module.__all__) - defined)


def _rel(path):
    return str(path.relative_to(SRC)) if path.is_relative_to(SRC) else path.name


def round_runners(modules):
    """The modules that run a round: they read a job's last_run() or silence the drift warning."""
    return [_rel(p) for p in modules
            if _calls(p, "last_run") or (_names_used(p, "DriftWarning") and _calls(p, "simplefilter"))]


def failure_counters(modules):
    """The modules that warn of failed calls, and the classes that count them (a ``failed`` field)."""
    warners = [_rel(p) for p in modules if _names_used(p, "SemanticFailuresWarning")]
    counters = [f"{_rel(p)}:{n.name}" for p in modules for n in ast.walk(_tree(p))
                if isinstance(n, ast.ClassDef) and any(isinstance(s, ast.AnnAssign) and getattr(s.target, "id", "")
                                                        == "failed" for s in n.body)]
    return warners, counters


def test_one_round_runner():
    """Before: three: functions/_sem_global.py (ask_labels, ask_prompts, run_job), plan/semantic/rounds.py (ask) and
    sem_join's batches (_round). A module that runs a round reads its job's last_run() and silences the drift warning."""
    runners = round_runners(_semantic_modules())
    assert runners == ["plan/semantic/rounds.py"], runners
    defined = {n.name for n in _tree(SEMANTIC / "rounds.py").body if isinstance(n, ast.FunctionDef)}
    assert {"ask", "collect"} <= defined


def test_one_failure_counter_and_one_warning_of_failed_calls():
    """Before: plan/semantic/rounds.Calls with warn_failed, and sem_join_batches.Failures with its own warning."""
    warners, counters = failure_counters(_semantic_modules())
    assert warners == ["plan/semantic/rounds.py"], warners
    assert counters == ["plan/semantic/rounds.py:Calls"], counters


def test_whole_table_has_one_mode():
    """Before: a WholeTable held either a planner (op=) or a closure (compute=), and the Runtime computed the latter."""
    fields = [f.name for f in dataclasses.fields(whole_table.WholeTable)]
    assert fields == ["input", "out_schema", "op", "key"], fields
    assert not hasattr(whole_table.Runtime, "compute") and not hasattr(whole_table, "Compute")
    from inferframe.dataframe.plan_runtime import FrameRuntime

    assert not hasattr(FrameRuntime, "compute")


def test_the_checks_find_a_second_one(tmp_path):
    """The scans can fail: a builder that runs its own round, or counts and warns of its own failures, is found."""
    probe = tmp_path / "_sem_probe.py"
    probe.write_text("import warnings\nfrom inferframe.errors import SemanticFailuresWarning\n"
                     "from inferframe.observe.recorder import DriftWarning\n"
                     "class Tally:\n    failed: int = 0\n    def warn(self):\n        warn_user('x', SemanticFailuresWarning)\n"
                     "def round(job):\n    warnings.simplefilter('ignore', DriftWarning)\n    return last_run()\n")
    assert round_runners([probe]) == ["_sem_probe.py"]
    assert failure_counters([probe]) == (["_sem_probe.py"], ["_sem_probe.py:Tally"])
