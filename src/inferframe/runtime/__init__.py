"""The async inference runtime: admission, rate limits, retries, breaker, cache, usage.

It sees neutral records only (Request, Outcome, LimitHints from the provider interface); no
Arrow, no DataFrames, no provider's wire format.
"""

from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.coordinator import Coordinator, LocalCoordinator, SharedLimits
from inferframe.runtime.engine import InferenceRuntime
from inferframe.runtime.types import LimitHints, Outcome, Request, Result, RowError, Usage

__all__ = ["Coordinator", "InferenceRuntime", "LimitHints", "LocalCoordinator", "Outcome", "Request", "Result",
           "RowError", "RuntimeConfig", "SharedLimits", "Usage"]
