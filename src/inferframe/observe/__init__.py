"""Progress bar and run report."""

from inferframe.observe.progress import job_progress, last_run, set_progress

__all__ = ["job_progress", "last_run", "set_progress"]
