"""User-defined functions and model classes."""

from inferframe.udf.cls import cls, method
from inferframe.udf.func import func

__all__ = ["cls", "func", "method"]
