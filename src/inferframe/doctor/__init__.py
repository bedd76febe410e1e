"""Check an installation: what works, what does not, and the fix for each (``inferframe doctor``).

The checks and the table are in ``doctor.run``; a check's row is ``doctor.check.Check``; Ray and Java
for Spark are checked in ``doctor.cluster``, a Spark master's executors (``--spark``) in ``doctor.spark``.

Example:
    >>> exit_code([Check("x", "fail", "broken", "fix it", needed=False)])
    0
"""

from inferframe.doctor.check import Check, exit_code
from inferframe.doctor.run import check_all, check_cache, check_server, check_spark, check_store, main

__all__ = ["Check", "check_all", "check_cache", "check_server", "check_spark", "check_store", "exit_code", "main"]
