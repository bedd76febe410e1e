"""The README's test command runs each file's tests in one process (tests/conftest.py's scheduler).

xdist 3.8's own ``--dist loadgroup`` marks a group on ``item._nodeid``, which pytest 9.2 does not read:
every test went to whichever process was free, so a file's module fixtures (a README reader's cache, a
model server) were made in both processes and tests/ray started two Ray clusters on two cores.
"""

import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/test_read_once.py", "tests/test_provider_shim_unused.py", "tests/test_startup.py"]


def test_the_readme_command_keeps_a_files_tests_in_one_process():
    out = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
                          "--durations=0", *FILES], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:]
    where = collections.defaultdict(set)
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", out.stdout, re.M):
        where[nodeid.split("::")[0]].add(worker)
    assert set(where) == set(FILES), out.stdout[-3000:]
    assert all(len(workers) == 1 for workers in where.values()), dict(where)
