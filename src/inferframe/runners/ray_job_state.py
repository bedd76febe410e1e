"""A Ray job's state for its workers (the key handles, the rows of each delivered batch), in the driver's host.

The state of every job of a driver lives in one ``JobScopes`` actor (``ray_limits.host``) on the driver's
node, a job's own instance of ``JobState`` in it: the host starts with the driver's first job and serves the
next ones, so a job spawns no process for it. ``JobStateLink`` is what travels to the workers: the host's
handle and the job's id.

Example (the state's logic in-process; in a job it lives in the host actor):
    >>> state = JobState()
    >>> state.batch_rows("b1", {"prompt[m]": {"rows_done": 2}}); state.batch_rows("b1", {"prompt[m]": {"rows_done": 2}})
    >>> state.rows()[0]["rows_done"]   # a batch run again counts once
    2
"""

from __future__ import annotations

from typing import Any

from inferframe.errors import ServiceError

# Counters of rows are counted per batch, keyed by the batch's content: a batch that Ray runs again
# (after a worker died, or to rebuild a lost block) counts its rows once. The others (requests,
# tokens, cost, retries, 429s) are money spent: reported as they grow, so a worker that dies has its
# spending counted up to then.
ROW_FIELDS = ("rows_done", "errors", "not_run", "cache_hits", "deduped", "truncated", "returned")
STATE_TIMEOUT_S = 30.0


class JobState:
    """A job's state for its workers: the key handles (in memory only) and the rows of each delivered batch."""

    def __init__(self) -> None:
        self._env: dict = {}
        self._batches: dict[str, dict] = {}

    def set_env(self, env: dict) -> None:
        # A call, not a constructor argument: Ray keeps an actor's constructor arguments to restart it.
        self._env = dict(env)

    def env(self) -> dict:
        return dict(self._env)

    def batch_rows(self, key: str, rows: dict) -> None:
        self._batches[key] = rows  # a batch run again replaces its first count

    def rows(self) -> list[dict]:
        """Row counters per call label, summed over the delivered batches."""
        out: dict[str, dict] = {}
        for batch in self._batches.values():
            for label, fields in batch.items():
                total = out.setdefault(label, {"label": label, **dict.fromkeys(ROW_FIELDS, 0)})
                for k, v in fields.items():
                    total[k] += v
        return list(out.values())


def state_call(ref: Any) -> Any:
    """The answer of a call to the job's state, or one clear error: never a hang."""
    import ray

    try:
        return ray.get(ref, timeout=STATE_TIMEOUT_S)
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as e:
        raise ServiceError(f"The job's state actor (key handles and row counts) is gone or does not answer "
                           f"({type(e).__name__}); the job stops. Run it again: answers already paid for are in "
                           f"the cache.") from None


class JobStateLink:
    """A job's ``JobState`` in the driver's host actor: picklable (the host's handle and the job's id)."""

    def __init__(self, handle: Any, job: str) -> None:
        self.handle, self.job = handle, job

    def _call(self, method: str, *args) -> Any:
        return state_call(self.handle.call.remote(self.job, method, *args))

    def set_env(self, env: dict) -> None:
        self._call("set_env", env)

    def env(self) -> dict:
        return self._call("env")

    def batch_rows(self, key: str, rows: dict) -> None:
        self._call("batch_rows", key, rows)

    def rows(self) -> list[dict]:
        return self._call("rows")

    def end(self) -> None:
        """Drop the job's state (the driver, when the job ends); the host stays for the next job."""
        try:
            self.handle.end.remote(self.job)
        except Exception:  # the host is gone: so is the state
            pass
