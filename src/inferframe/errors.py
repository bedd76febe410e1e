"""Error types users can catch; every message names the problem and the fix."""

from __future__ import annotations


class InferframeError(Exception):
    """Base of every error inferframe raises on purpose."""


class PlanError(InferframeError, ValueError):
    """The plan is wrong; raised before any data is read."""


class ColumnNotFoundError(PlanError, KeyError):
    """A column name does not exist in the input schema."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ExpressionTypeError(PlanError, TypeError):
    """An expression cannot be applied to the types of its inputs."""


class UDFError(InferframeError):
    """A user function raised or returned a value that does not fit its declared type."""


class ExecutionError(InferframeError):
    """The job failed while running."""
