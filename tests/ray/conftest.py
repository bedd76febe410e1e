"""One local Ray cluster for the whole test session: 2 CPUs and 2 logical GPUs (placement is tested
without hardware). Every test in tests/ray is marked ``ray``: ``pytest -m ray`` runs them alone.
"""

import os

import pytest
from group_scope import until_group_ends

import ray  # noqa: E402  (installed by scripts/install.sh: the "ray" extra)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/ray/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session")
def ray_cluster():
    """A local cluster started once (num_cpus=2, num_gpus=2); shut down after the last test of tests/ray."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if not ray.is_initialized():
        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, namespace="inferframe-tests",
                 runtime_env={"env_vars": {"INFERFRAME_PROGRESS": "0"}})
    until_group_ends(ray.shutdown)
    yield ray
    ray.shutdown()
