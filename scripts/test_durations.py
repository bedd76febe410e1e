"""Write tests/durations.json, the seconds each test group took, from the JUnit XML of a full run.

The suite's scheduler (tests/conftest.py) hands out the longest groups first. Run the suite with
``--junitxml=run.xml``, then ``.venv/bin/python scripts/test_durations.py run.xml``. A stale file only
gives a worse order, never a failure.

Example:
    .venv/bin/python -m pytest -q -n 2 --dist loadgroup --junitxml=/tmp/run.xml
    .venv/bin/python scripts/test_durations.py /tmp/run.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from suite_order import DURATIONS, group_of  # noqa: E402


def test_file(classname: str) -> str | None:
    """The repository path of a JUnit ``classname`` ("tests.ray.test_x.TestY" -> "tests/ray/test_x.py")."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        candidate = "/".join(parts[:n]) + ".py"
        if (ROOT / candidate).is_file():
            return candidate
    return None


def group_seconds(xml_paths: list[str]) -> dict[str, float]:
    """The summed seconds of each group's test cases (setup, call and teardown, as JUnit counts them)."""
    seconds: dict[str, float] = defaultdict(float)
    for path in xml_paths:
        for case in ET.parse(path).iter("testcase"):
            where = test_file(case.get("classname", ""))
            if where is not None:
                seconds[group_of(where)] += float(case.get("time", 0.0))
    return dict(sorted(((g, round(s, 1)) for g, s in seconds.items()), key=lambda gs: -gs[1]))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    seconds = group_seconds(sys.argv[1:])
    DURATIONS.write_text(json.dumps(seconds, indent=1) + "\n")
    print(f"{DURATIONS}: {len(seconds)} groups, {sum(seconds.values()):.0f} s in all; longest: "
          + ", ".join(f"{g} {s:.0f} s" for g, s in list(seconds.items())[:5]))
