"""The async inference runtime: admission, rate limits, retries, breaker, usage. No Arrow here."""

from inferframe.runtime.engine import InferenceRuntime, RuntimeConfig, ServiceError
from inferframe.runtime.types import Outcome, Request, Result, RowError, Usage

__all__ = ["InferenceRuntime", "Outcome", "Request", "Result", "RowError", "RuntimeConfig", "ServiceError", "Usage"]
