"""What every AI operator shares: a provider, a runtime on the job's shared limits, and counters.

Example:
    >>> from inferframe.providers.interface import MockProvider, Outcome
    >>> from inferframe.providers.spec import ProviderSpec
    >>> from inferframe.runtime.config import RuntimeConfig
    >>> from inferframe.ai.config import AICallConfig
    >>> op = AIOperator(AICallConfig("chat", ProviderSpec("lm_studio"), "m", None, (), RuntimeConfig(cache_policy="off"), 1, "p"),
    ...                 provider=MockProvider(lambda r: Outcome(value="x")))
    >>> op.stats.label
    'p'
"""

from __future__ import annotations

from inferframe.ai.config import AICallConfig
from inferframe.ai.run import RunServices, services_or_default
from inferframe.observe.stats import RunStats
from inferframe.providers.interface import Transport
from inferframe.runtime import InferenceRuntime
from inferframe.session import cache_url_of


class AIOperator:
    """Built once per run on the shared event loop, from a config resolved at plan time.

    Parameters:
        config: the call.
        services: the run's coordinator and counters (None: local ones).
        provider: a live provider to use instead of building one from ``config.provider`` (tests).
    """

    def __init__(self, config: AICallConfig, services: RunServices | None = None, provider: Transport | None = None) -> None:
        services = services_or_default(services)
        self.config = config
        self.provider = provider or config.provider.connect()
        self.stats = RunStats(label=config.label)
        services.counters.add(self.stats)
        # Calls to the same endpoint and model in one job share one rate limit, in-flight bound and
        # breaker, as the server's limits are per key and model; the first call's settings win.
        limits = services.coordinator.limits(config.limits_key, config.runtime,
                                             config.provider.key_fingerprint())
        self.runtime = InferenceRuntime(self.provider, config.runtime, model=config.model, stats=self.stats,
                                        limits=limits, store_url=cache_url_of(config.runtime.cache_store))
        job_trace = services.counters.trace  # None unless the job records OpenTelemetry (observe.otel)
        if job_trace is not None:
            job_trace.stage(config.label, config.endpoint, self.provider, config.model).watch(self.runtime)

    @classmethod
    def for_run(cls, services: RunServices | None, config: AICallConfig) -> "AIOperator":
        """Build for one run (the executor calls this with the run's services)."""
        return cls(config, services)

    async def aclose(self) -> None:
        await self.runtime.aclose()
