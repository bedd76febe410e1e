"""Progress bar and run report."""

from inferframe.observe.progress import TruncatedWarning, job_progress, last_run
from inferframe.observe.recorder import DriftWarning

__all__ = ["DriftWarning", "TruncatedWarning", "job_progress", "last_run"]
