"""Every error inferframe raises on purpose, and the kinds of row errors; each message names the problem and the fix.

The hierarchy::

    InferframeError
    ├── PlanError (ValueError)              the plan is wrong; raised before any data is read
    │   ├── ColumnNotFoundError (KeyError)  a column name does not exist
    │   ├── ExpressionTypeError (TypeError) an expression does not fit its inputs' types
    │   ├── ArgumentTypeError (TypeError)   an argument of a call has the wrong Python type
    │   ├── PathNotFoundError (FileNotFoundError)  an input path matches no file
    │   └── PathNotWritableError (OSError)  the output location cannot be written
    │       └── OutputExistsError (FileExistsError)  the output directory holds data and mode="error"
    ├── UDFError                            a user function raised or returned the wrong type
    ├── ExecutionError                      the job failed while running
    │   ├── ServiceError (RuntimeError)     the service, not a row, is failing: the job stops
    │   ├── RowFailed (RuntimeError)        a row failed and on_error="raise" was asked for
    │   ├── BatchAPIError (RuntimeError)    the Batch API refused a file or batch operation
    │   ├── BudgetExceededError (RuntimeError) the job's max_cost/max_tokens_budget was reached, on_error="raise"
    │   ├── LocalServerError (RuntimeError) the embedded llama.cpp server could not start
    │   └── SparkEnvironmentError (RuntimeError) Spark's executors cannot run this inferframe (their Python)
    ├── SchemaMismatchError (ValueError)    files of one dataset disagree on their schema
    ├── UnreadableFileError (ValueError)    an input file is not data of the format read (a README.txt)
    ├── MediaError (ValueError)             an image or file of one row cannot be read or encoded
    └── DownloadError                       one location could not be downloaded

Warnings (a result is returned, but the user must know):

    LowInformationWarning   the model's answers carry little information (every row the same
                            answer, A/B comparisons at chance, every pair a match)
    SemanticFailuresWarning calls inside a semantic operator failed and were counted, not raised
    BudgetExceededWarning   the job's max_cost/max_tokens_budget was reached: rows were not run

A failure of one row is not an exception but data: a null value and an error record whose
``kind`` is one of :class:`ErrorKind`.

Example:
    >>> issubclass(ServiceError, InferframeError), ErrorKind.RATE_LIMIT == "rate_limit"
    (True, True)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import os
import sys
import threading
import warnings
from typing import Iterator


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


class ArgumentTypeError(PlanError, TypeError):
    """An argument of an inferframe call has the wrong Python type; the message names it, what came and what fits.

    Subclasses TypeError, so ``except TypeError`` still catches it.

    Example:
        >>> import inferframe as ifr
        >>> try:
        ...     ifr.from_pydict([1, 2])
        ... except TypeError as e:
        ...     isinstance(e, ifr.ArgumentTypeError), isinstance(e, ifr.PlanError)
        (True, True)
    """


class PathNotFoundError(PlanError, FileNotFoundError):
    """An input path (file, directory or glob) matches no file; the message names it.

    Subclasses FileNotFoundError, so ``except FileNotFoundError`` still catches it.

    Example:
        >>> import inferframe as ifr
        >>> try:
        ...     ifr.read_parquet("/no/such/dir/*.parquet")
        ... except FileNotFoundError as e:
        ...     isinstance(e, ifr.PlanError), str(e).startswith("No files match '/no/such/dir/*.parquet'")
        (True, True)
    """


class PathNotWritableError(PlanError, OSError):
    """The output location cannot be written: read-only, no permission, or a file where a directory must be.

    Subclasses OSError, so ``except OSError`` still catches it; raised before any row is computed.
    """


class OutputExistsError(PathNotWritableError, FileExistsError):
    """A write's target directory already holds data and the write's ``mode`` is ``"error"`` (the default).

    Raised when the write starts, before the plan runs: nothing was sent, written or removed. The
    message names the directory, the files found and the fix (``mode="overwrite"`` or ``"append"``);
    ``directory`` and ``files`` hold them.

    Example:
        >>> import tempfile, inferframe as ifr
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = ifr.from_pydict({"a": [1]}).write_parquet(d)
        ...     try:
        ...         ifr.from_pydict({"a": [2]}).write_parquet(d)
        ...     except FileExistsError as e:
        ...         e.files, isinstance(e, ifr.PlanError)
        (['part-00000.parquet'], True)
    """

    def __init__(self, message: str, directory: str = "", files: list[str] | None = None) -> None:
        super().__init__(message)
        self.directory, self.files = directory, list(files or [])

    def __str__(self) -> str:  # OSError would show its args as a tuple
        return str(self.args[0]) if self.args else ""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _package_dirs(*names: str) -> tuple[str, ...]:
    """The directories of installed packages, found without importing them."""
    import importlib.util

    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None:
            found += [os.path.join(d, "") for d in spec.submodule_search_locations or []]
    return tuple(found)


# A library warning raised as a ``with`` block ends (a job's progress) passes through contextlib's frames, and a
# DataFrame that DuckDB or Arrow reads (``sql()``) runs under their frames: none of them is the user's line.
_SKIPPED = (_PACKAGE, contextlib.__file__) + _package_dirs("duckdb", "pyarrow")
# Where a worker thread's stack starts: a warning that meets one of these before any user frame has no user line here.
_THREAD_START = (threading.__file__, os.path.dirname(concurrent.futures.__file__) + os.sep,
                 os.path.dirname(asyncio.__file__) + os.sep)
# The calls now running that take the warnings of worker threads (``carried_warnings``), newest last.
_carriers: list["_Carrier"] = []
_carriers_lock = threading.Lock()


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn at the user's line: the first frame outside inferframe (its CLI included), not inside the library.

    Python 3.11 has no ``skip_file_prefixes``; this walks the stack as 3.12's would. A warning raised
    on a worker thread (the executor's stages, DuckDB's threads reading a DataFrame for ``sql()``)
    has no user frame there: it is handed to the user's call now running (``carried_warnings``),
    which raises it at the user's line as that call ends; with no such call it points at the thread.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     warn_user("hello")
        >>> seen[0].filename.startswith(_PACKAGE), str(seen[0].message)
        (False, 'hello')
    """
    frame, level = sys._getframe(1), 2  # stacklevel 2: warn_user's caller
    while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED):
        frame, level = frame.f_back, level + 1
    if frame is None or frame.f_code.co_filename.startswith(_THREAD_START):
        with _carriers_lock:
            carrier = _carriers[-1] if _carriers else None
            if carrier is not None:
                carrier.held.append((message, category))
                return
    warnings.warn(message, category, stacklevel=level)


class _Carrier:
    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: list[tuple[str, type[Warning]]] = []


@contextlib.contextmanager
def carried_warnings() -> Iterator[None]:
    """Run a user's call (a job) so that warnings its worker threads raise come out at the user's line as it ends.

    Nested calls hand theirs to the call around them when they end on a thread with no user frame.

    Example:
        >>> import threading, warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     with carried_warnings():
        ...         t = threading.Thread(target=warn_user, args=("from a worker",)); t.start(); t.join()
        >>> seen[0].filename.startswith((_PACKAGE, threading.__file__)), str(seen[0].message)
        (False, 'from a worker')
    """
    carrier = _Carrier()
    with _carriers_lock:
        _carriers.append(carrier)
    try:
        yield
    finally:
        with _carriers_lock:
            _carriers.remove(carrier)
        for message, category in carrier.held:
            warn_user(message, category)


class LowInformationWarning(UserWarning):
    """The model's answers look like chance: the message names the measurement and the fix."""


class SemanticFailuresWarning(UserWarning):
    """Some model calls inside a semantic operator failed; the message gives the count and ``on_error="raise"``."""


class RenamedOptionWarning(DeprecationWarning):
    """An option was given by its old name; the message names the one name (the old one goes in the next release)."""


class BudgetExceededWarning(UserWarning):
    """A job reached its ``max_cost``/``max_tokens_budget``: the message gives what was spent, the rows not run and how to go on."""


class UDFError(InferframeError):
    """A user function raised or returned a value that does not fit its declared type."""


class ExecutionError(InferframeError):
    """The job failed while running."""


class ServiceError(ExecutionError, RuntimeError):
    """The service, not a row, is failing (bad key, server down): the job stops."""


class RowFailed(ExecutionError, RuntimeError):
    """A row failed and the user asked for on_error="raise": the job stops with that row's error.

    Every AI function raises this one shape, whatever failed (an HTTP error, a malformed answer, a
    vector of the wrong size, an answer off the schema, an input that cannot be sent):
    "A row failed (kind, status S, N attempts): message", status and attempts only when known.

    Attributes:
        error: the row's error record, as ``<name>_error`` holds it with on_error="null"
            (kind, message, status, attempts, raw).

    Example:
        >>> e = RowFailed.of({"kind": "input", "message": "an empty text has no embedding", "status": None,
        ...                   "attempts": 0, "raw": None})
        >>> str(e), e.kind
        ('A row failed (input): an empty text has no embedding', 'input')
    """

    def __init__(self, message: str, error: dict | None = None) -> None:
        super().__init__(message)
        self.error = error

    @classmethod
    def of(cls, error: dict) -> "RowFailed":
        """The exception for one row's error record (``RowError.as_dict()``)."""
        said = [str(error["kind"])]
        if error.get("status") is not None:
            said.append(f"status {error['status']}")
        attempts = error.get("attempts") or 0
        if attempts:  # 0: the row failed before anything was sent
            said.append(f"{attempts} attempt{'s' if attempts != 1 else ''}")
        return cls(f"A row failed ({', '.join(said)}): {error['message']}", dict(error))

    @property
    def kind(self) -> str | None:
        """The row's error kind (an :class:`ErrorKind` value)."""
        return None if self.error is None else str(self.error["kind"])

    def __reduce__(self):
        # The record would be lost by the default pickling; workers ship errors across processes.
        return (RowFailed, (self.args[0] if self.args else "", self.error))


class BudgetExceededError(ExecutionError, RuntimeError):
    """The job's ``max_cost``/``max_tokens_budget`` was reached with ``on_error="raise"``: what was paid stays cached."""


class BatchAPIError(ExecutionError, RuntimeError):
    """The Batch API refused a file or batch operation."""


class LocalServerError(ExecutionError, RuntimeError):
    """The embedded local model server could not be found, started or reached."""


class SparkEnvironmentError(ExecutionError, RuntimeError):
    """Spark's executors cannot run this inferframe: their Python does not start, lacks inferframe or has another version.

    Raised by the first job on a SparkContext, before any request is sent; the message names the
    interpreter tried, what went wrong and how to ship the environment (``spark.archives``).

    Attributes:
        found: what the executors run and what went wrong, in one sentence.
        fix: how to give them this inferframe.

    Example:
        >>> e = SparkEnvironmentError("x. Fix: y.", found="x", fix="y")
        >>> e.found, e.fix
        ('x', 'y')
    """

    def __init__(self, message: str, found: str = "", fix: str = "") -> None:
        super().__init__(message)
        self.found, self.fix = found or message, fix

    def __reduce__(self):
        return (SparkEnvironmentError, (self.args[0] if self.args else "", self.found, self.fix))


class SchemaMismatchError(InferframeError, ValueError):
    """A file's column cannot be cast to the type the scan's schema expects.

    The message names the offending file, the column, both types, and the file (or explicit
    schema) the scan's schema came from.
    """


class UnreadableFileError(InferframeError, ValueError):
    """An input file cannot be read as the format asked (a README.txt among Parquet files): the message names it.

    Files whose names start with ``.`` or ``_`` (``_SUCCESS``, ``.crc``) are skipped in a directory, as
    Spark and pyarrow skip them; any other file must be data of the format read.
    """


class MediaError(InferframeError, ValueError):
    """One value cannot be used as media: not an image, a broken PDF, binary data where text was expected.

    Subclasses ValueError so callers that validate input generically still catch it.
    """


class DownloadError(InferframeError):
    """One location could not be read; the message names it and says why.

    Attributes:
        url: the location as given.
        status: the HTTP status for an answered request, else None.
    """

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status

    def __reduce__(self):
        # Keyword-only fields would be lost by the default pickling; workers ship errors across processes.
        return (_rebuild_download_error, (self.args[0] if self.args else "", self.url, self.status))


def _rebuild_download_error(message: str, url: str | None, status: int | None) -> DownloadError:
    return DownloadError(message, url=url, status=status)


class ErrorKind(str, enum.Enum):
    """Why one row failed; the value is the string users see in ``<name>_error.kind``.

    Example:
        >>> ErrorKind("timeout").retryable, ErrorKind.AUTH.fatal
        (True, True)
    """

    BAD_REQUEST = "bad_request"
    NOT_FOUND = "not_found"
    AUTH = "auth"
    QUOTA = "quota"
    UNREACHABLE = "unreachable"
    RATE_LIMIT = "rate_limit"
    TIMEOUT = "timeout"
    SERVER = "server"
    CONNECTION = "connection"
    MALFORMED = "malformed"
    LENGTH = "length"
    REFUSAL = "refusal"
    SCHEMA = "schema"
    UNSUPPORTED = "unsupported"
    INPUT = "input"
    DOWNLOAD = "download"
    IMAGE = "image"
    BUDGET = "budget"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value

    @property
    def retryable(self) -> bool:
        """Worth another attempt: the same request may succeed later."""
        return self in _RETRYABLE

    @property
    def fatal(self) -> bool:
        """No row can succeed: the whole job stops."""
        return self in _FATAL


_RETRYABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.TIMEOUT, ErrorKind.SERVER, ErrorKind.CONNECTION,
                        ErrorKind.MALFORMED})
_FATAL = frozenset({ErrorKind.AUTH, ErrorKind.QUOTA, ErrorKind.UNREACHABLE})
