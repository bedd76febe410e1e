"""The session: the one settings object of this process's jobs, resolved into the plan when it is built.

``set_provider``, ``set_prices`` and ``set_cache`` change the driver's session. Every AI function
reads the session when its expression is built and bakes what it needs into the call's config
(provider, URL and options; the model's price; the cache policy and an absolute cache directory),
so the plan means the same in any process: a worker never reads another process's globals. Keys
never enter the session or the plan: ``set_provider(api_key=...)`` keeps the key in
``inferframe.providers.secrets`` and the session holds only its handle.

The driver's own settings live here too, read where a job starts and never by a worker: the run
history (``set_history``; ``history_dir`` is the one place its directory is worked out), the
progress line (``set_progress``) and the runner (``inferframe.runners.set_runner_native`` /
``set_runner_ray`` store it here; ``get_runner`` reads it). One result lives here too, not a setting:
the newest run this process stored in its run history (``last_recorded``, which ``evaluate()``
attaches its scores to), written by ``remember_run`` as each recorded job ends.

Example:
    >>> import inferframe as ifr
    >>> ifr.set_prices({"my-model": (0.5, 1.5)})
    >>> current().price_of("my-model")
    (0.5, 1.5)
    >>> ifr.set_cache("off"); current().cache_settings()[0].value
    'off'
    >>> ifr.set_cache(None)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from inferframe.errors import PlanError
from inferframe.providers import secrets
from inferframe.providers.registry import REGISTRY
from inferframe.providers.spec import ProviderSpec
from inferframe.runtime.cache import CachePolicy, default_cache_dir
from inferframe.runtime.store.url import is_store_url
from inferframe.runtime.pricing import Price, check_price, price_of


def _history_env() -> bool:
    return os.environ.get("INFERFRAME_HISTORY", "1").lower() not in ("0", "false", "no")


@dataclasses.dataclass(frozen=True)
class HistorySettings:
    """What every job with AI calls records in the run history (see ``set_history``).

    Parameters:
        enabled: record runs at all (default: on unless ``INFERFRAME_HISTORY=0`` when the session starts).
        sample: share of rows kept for review.
        max_sample: at most this many review rows per run.
        directory: where ``runs.sqlite`` lives (None: the job's cache directory).

    Example:
        >>> HistorySettings(sample=0.05).max_sample
        1000
    """

    enabled: bool = dataclasses.field(default_factory=_history_env)
    sample: float = 0.01
    max_sample: int = 1000
    directory: str | None = None


@dataclasses.dataclass(frozen=True)
class Session:
    """Settings of this process's jobs (immutable: each setter makes a new one).

    Parameters:
        provider: the default provider (``set_provider``); None: picked per call.
        prices: user prices as ((model, (input, output[, cached_input])), ...) dollars per million tokens.
        cache_policy: the default cache policy (None: ``INFERFRAME_CACHE`` or "read_write").
        cache_dir: the cache directory (None: ``INFERFRAME_CACHE_DIR`` or the XDG cache dir).
        cache_store: the secret handle of a PostgreSQL store's URL (``set_cache(url=...)``; None:
            ``INFERFRAME_CACHE_URL``, else the SQLite file in the cache directory).
        history: what the run history records (``set_history``).
        progress: show the progress line (``set_progress``): True, False, or None (on terminals and notebooks).
        runner: the ``inferframe.runners.Runner`` that runs DataFrames (None: chosen from ``INFERFRAME_RUNNER``
            by ``get_runner`` at the first job).
        tracing: OpenTelemetry (``set_tracing``): None records into the global providers when set; a
            ``TracingSetting`` turns it off or names providers.
        last_recorded: (run_id, history directory) of the newest run this process stored (None: none yet),
            which ``evaluate()`` attaches to; not a setting: ``remember_run`` writes it as a recorded job ends.
    """

    provider: ProviderSpec | None = None
    prices: tuple = ()
    cache_policy: CachePolicy | None = None
    cache_dir: str | None = None
    cache_store: str | None = None
    history: HistorySettings = dataclasses.field(default_factory=HistorySettings)
    progress: bool | None = None
    runner: Any = None
    last_recorded: tuple[str, str] | None = None
    tracing: "TracingSetting | None" = None

    def price_of(self, model: str | None) -> Price | None:
        """The model's price, (input, output) or (input, output, cached_input): this session's, else the built-in table."""
        return price_of(model, dict(self.prices))

    def cache_settings(self, policy: Any = None, directory: Any = None) -> tuple[CachePolicy, str]:
        """(policy, absolute directory) for one call: its options, else this session, else the environment."""
        if policy is None:
            policy = self.cache_policy or os.environ.get("INFERFRAME_CACHE") or CachePolicy.READ_WRITE
        directory = directory if directory is not None else self.cache_dir
        path = Path(directory).expanduser() if directory is not None else default_cache_dir()
        return CachePolicy(policy), str(path.absolute())

    def cache_store_of(self, url: Any = None) -> str | None:
        """The secret handle of one call's cache store: its ``cache_url``, else this session's, else
        ``INFERFRAME_CACHE_URL``; None: the SQLite file in the cache directory.

        Example:
            >>> ref = Session().cache_store_of("postgresql://me:pw@db:5432/cache")
            >>> ref.startswith("s") and "pw" not in ref, Session().cache_store_of() is None
            (True, True)
        """
        if url is not None:
            return secrets.put_store(_store_url(url, "cache_url="))
        if self.cache_store is not None:
            return self.cache_store
        env = os.environ.get("INFERFRAME_CACHE_URL")
        return secrets.put_store(_store_url(env, "INFERFRAME_CACHE_URL")) if env else None

    def history_dir(self, directory: Any = None, cache_dir: Any = None) -> str:
        """Where the run history lives: ``directory``, else ``set_history``'s, else ``cache_dir`` (a job's
        first AI call's cache directory), else this session's cache directory.

        Example:
            >>> Session(history=HistorySettings(directory="/tmp/h")).history_dir()
            '/tmp/h'
            >>> Session(cache_dir="/tmp/c").history_dir()
            '/tmp/c'
        """
        chosen = directory or self.history.directory or cache_dir
        return str(chosen) if chosen else self.cache_settings()[1]


_lock = threading.Lock()
_current = Session()


def current() -> Session:
    """This process's session."""
    return _current


@contextlib.contextmanager
def using(session: Session) -> Iterator[Session]:
    """``session`` as this process's while an expression is built from another process's settings (a Spark SQL
    function in an executor builds its call under the driver's settings at ``register``), then the old one.

    Example:
        >>> with using(Session(cache_dir="/tmp/x")):
        ...     current().cache_dir
        '/tmp/x'
    """
    global _current
    with _lock:
        before, _current = _current, session
    try:
        yield session
    finally:
        with _lock:
            _current = before


def _replace(**changes: Any) -> None:
    global _current
    with _lock:
        _current = dataclasses.replace(_current, **changes)


def set_provider(name: str, *, base_url: str | None = None, api_key: str | None = None, **options: Any) -> None:
    """Make ``name`` the default provider for AI functions, optionally with its URL and key.

    The key stays in this process's memory (and reaches worker processes through their
    environment); plans and pickles hold only an opaque handle.

    Example:
        >>> set_provider("openai", base_url="http://127.0.0.1:8000/v1", api_key="sk-...")
        >>> current().provider.base_url
        'http://127.0.0.1:8000/v1'
        >>> reset_provider()
    """
    REGISTRY.get(name)
    ref = secrets.put(api_key) if api_key is not None else None
    _replace(provider=ProviderSpec(name, base_url, tuple(sorted(options.items())), ref))


def reset_provider() -> None:
    """Forget the default provider and every key held in memory."""
    secrets.forget()
    _replace(provider=None)


def set_prices(prices: dict[str, Price]) -> None:
    """Set or override prices in dollars per million tokens: ``{"my-model": (input, output)}``, or
    ``(input, output, cached_input)`` where the provider bills prompt-cache hits at their own rate.

    Without a cached rate, cached input tokens cost the input rate. Every price is checked before
    any is set.

    Example:
        >>> set_prices({"my-model": (0.5, 1.5), "my-cached-model": (1.0, 4.0, 0.1)})
        >>> current().price_of("my-cached-model")
        (1.0, 4.0, 0.1)
        >>> set_prices({"bad": (1.0, 2.0, 3.0, 4.0)})
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: set_prices(): bad: a price is (input, output) or (input, output, cached_input) dollars per million tokens, each >= 0; got (1.0, 2.0, 3.0, 4.0).
    """
    if not isinstance(prices, dict):
        raise PlanError(f"set_prices(): give a dict of model -> (input, output[, cached_input]), got {prices!r}.")
    checked = {model: check_price(price, f"set_prices(): {model}") for model, price in prices.items()}
    _replace(prices=tuple(sorted({**dict(current().prices), **checked}.items())))


def _store_url(url: Any, where: str) -> str:
    """``url`` if it is a PostgreSQL URL; else a PlanError that never repeats it (it may hold a password)."""
    if not is_store_url(url):
        scheme = url.split("://", 1)[0] if isinstance(url, str) and "://" in url else type(url).__name__
        raise PlanError(f"{where} takes a PostgreSQL URL, postgresql://user:password@host:5432/db; got a "
                        f"{scheme!s} value (not shown: it may hold a password). For a local cache, use cache_dir.")
    return url


def cache_url_of(ref: str | None) -> str | None:
    """The URL behind a cache store handle (``RuntimeConfig.cache_store``); None for none.

    Read in the process that runs the job: the driver's memory, or the environment a runner gave
    its worker (``secrets.worker_env``). A handle this process cannot resolve is a PlanError that
    names the fix and never the URL.

    Example:
        >>> cache_url_of(secrets.put_store("postgresql://me:pw@db/cache")), cache_url_of(None)
        ('postgresql://me:pw@db/cache', None)
    """
    if not ref:
        return None
    url = secrets.get(ref)
    if not url:
        raise PlanError("the cache store's URL is not known in this process: it reaches worker processes through "
                        "their environment (INFERFRAME_SECRET_*); set INFERFRAME_CACHE_URL there, or start the "
                        "workers from the process that called set_cache(url=...).")
    return url


def set_cache(policy: str | None = None, directory: str | os.PathLike | None = None, *, url: str | None = None) -> None:
    """Set the default cache policy, directory and store for every AI call built afterwards in this process.

    Parameters:
        policy: "read_write" (default), "read_only", "refresh" or "off"; None keeps the env/default.
        directory: where the cache lives; None keeps INFERFRAME_CACHE_DIR or the XDG cache dir.
        url: a PostgreSQL store every node shares, ``postgresql://user:password@host:5432/db``
            (None keeps INFERFRAME_CACHE_URL). It is a secret like an API key: plans and pickles
            hold only a handle. ``directory`` still holds the run history.

    Example:
        >>> set_cache("off")
        >>> set_cache(None)
        >>> set_cache(url="mysql://me:pw@db/cache")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: set_cache(url=) takes a PostgreSQL URL, postgresql://user:password@host:5432/db; got a mysql value (not shown: it may hold a password). For a local cache, use cache_dir.
    """
    store = secrets.put_store(_store_url(url, "set_cache(url=)")) if url is not None else None
    if policy is not None:
        try:
            policy = CachePolicy(policy)
        except ValueError:
            raise PlanError(f"set_cache(): policy must be one of {', '.join(p.value for p in CachePolicy)}, "
                            f"got {policy!r}.") from None
    _replace(cache_policy=policy, cache_dir=str(directory) if directory is not None else None, cache_store=store)


def set_history(enabled: bool = True, *, sample: float = 0.01, max_sample: int = 1000,
                directory: str | os.PathLike | None = None) -> None:
    """Choose what each job with AI calls records in the run history.

    Parameters:
        enabled: record runs at all (also ``INFERFRAME_HISTORY=0``).
        sample: share of rows kept for review (0 turns the sample off): every (1/sample)-th row, so
            the same data in the same order gives the same sample.
        max_sample: at most this many rows per run.
        directory: where ``runs.sqlite`` lives (default: next to the response cache).

    Example:
        >>> set_history(sample=0.05, max_sample=200)
        >>> current().history.sample, current().history.max_sample
        (0.05, 200)
        >>> set_history()
    """
    if not 0 <= sample <= 1:
        raise PlanError(f"sample is a share of rows between 0 and 1, got {sample!r}; e.g. set_history(sample=0.05).")
    _replace(history=HistorySettings(enabled, sample, max_sample, str(directory) if directory is not None else None))


def set_progress(enabled: bool | None) -> None:
    """Turn the progress line on or off for every job (None: automatic, on terminals and in notebooks).

    A job's own ``progress=`` argument wins; ``INFERFRAME_PROGRESS=0`` turns it off where this is None.

    Example:
        >>> set_progress(False); current().progress
        False
        >>> set_progress(None)
    """
    _replace(progress=enabled)


@dataclasses.dataclass(frozen=True)
class TracingSetting:
    """``set_tracing``'s choice: off, or the tracer and meter providers jobs record into (None: the global ones).

    The providers stay in this process: a pickled session (a Spark executor's) carries only ``enabled`` and
    ``worker_setup`` (a picklable function each Ray worker or Spark Python worker runs once: ``set_tracing``).
    """

    enabled: bool = True
    providers: tuple | None = None
    worker_setup: Any = None

    def __reduce__(self):
        return (TracingSetting, (self.enabled, None, self.worker_setup))


def set_tracing(enabled: bool | None = None, *, tracer_provider: Any = None, meter_provider: Any = None,
                worker_setup: Any = None) -> None:
    """Turn OpenTelemetry traces and metrics of jobs off, back to automatic, or into providers of your own.

    Not needed for tracing: a job records spans and metrics whenever a tracer or meter provider is set the
    standard way (``trace.set_tracer_provider(...)`` in code, or ``opentelemetry-instrument`` with the
    ``OTEL_*`` variables), and pays only a dictionary lookup otherwise.

    Parameters:
        enabled: False: no job records anything, whatever providers are set; None (default) or True:
            automatic (the global providers, or the ones given here).
        tracer_provider / meter_provider: an ``opentelemetry`` TracerProvider / MeterProvider to record into
            instead of the global ones (a test's, or a second pipeline's).
        worker_setup: a picklable function of no arguments that configures the OpenTelemetry SDK in a Ray
            worker or Spark Python worker (``trace.set_tracer_provider(...)``, or
            ``opentelemetry.instrumentation.auto_instrumentation.initialize`` to read the worker's ``OTEL_*``
            variables). The runner ships it with the job and runs it once per worker process that has no
            provider yet; a worker already configured (started under ``opentelemetry-instrument``) needs none.

    Example:
        >>> set_tracing(False); current().tracing.enabled
        False
        >>> set_tracing(); current().tracing is None
        True
    """
    if enabled is False:
        _replace(tracing=TracingSetting(False))
    elif tracer_provider is not None or meter_provider is not None or worker_setup is not None:
        chosen = (tracer_provider, meter_provider) if tracer_provider is not None or meter_provider is not None else None
        _replace(tracing=TracingSetting(True, chosen, worker_setup))
    else:
        _replace(tracing=None)


def set_runner(runner: Any) -> None:
    """Make ``runner`` (an ``inferframe.runners.Runner``) run every DataFrame from now on.

    ``inferframe.runners.set_runner_native`` and ``set_runner_ray`` build the runner and store it here.

    Example:
        >>> set_runner(None); current().runner is None
        True
    """
    _replace(runner=runner)


def remember_run(run_id: str, directory: str) -> None:
    """Make ``run_id`` (stored in the run history at ``directory``) the newest run of this process.

    Example:
        >>> before = current().last_recorded
        >>> remember_run("20250101-000000-abcdef", "/tmp/h")
        >>> current().last_recorded
        ('20250101-000000-abcdef', '/tmp/h')
        >>> _replace(last_recorded=before)
    """
    _replace(last_recorded=(run_id, str(directory)))
