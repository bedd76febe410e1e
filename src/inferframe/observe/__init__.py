"""Progress bar and run report."""

from inferframe.observe.progress import TruncatedWarning, job_progress, last_run, set_progress
from inferframe.observe.recorder import DriftWarning, set_history

__all__ = ["DriftWarning", "TruncatedWarning", "job_progress", "last_run", "set_history", "set_progress"]
