"""Progress bar and run report."""

from inferframe.observe.progress import TruncatedWarning, job_progress, last_run, set_progress

__all__ = ["TruncatedWarning", "job_progress", "last_run", "set_progress"]
