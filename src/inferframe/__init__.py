"""inferframe: AI inference as a DataFrame operation.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"review": ["great", "awful"]})
    >>> df.with_column("n", ifr.col("review").str.length()).to_pydict()
    {'review': ['great', 'awful'], 'n': [5, 5]}
"""

from inferframe import functions
# The sql package first: its import binds inferframe.sql, which the function ifr.sql then takes over.
import inferframe.sql  # noqa: F401
from inferframe.dataframe import (
    DataFrame, Evaluation, GroupedDataFrame, Schema, evaluate, from_arrow, from_glob_path, from_pandas, from_pydict, from_pylist,
    from_ray_dataset, read_csv, read_json, read_parquet, report, run_sample, runs,
)
from inferframe.dataframe import from_duckdb, from_huggingface, from_polars, read_lance, sql
from inferframe.dataframe.constructors import from_spark
from inferframe.observe import DriftWarning, last_run
# Public so that warnings.filterwarnings(category=inferframe.PromptLayoutHint) can silence it; its message names it so.
from inferframe.functions.layout_hint import PromptLayoutHint
from inferframe.datatype import DataType
from inferframe.errors import (
    ArgumentTypeError, BatchAPIError, BudgetExceededError, BudgetExceededWarning, ColumnNotFoundError, DownloadError, ErrorKind, ExecutionError, ExpressionTypeError, InferframeError,
    LocalServerError, LowInformationWarning, MediaError, OutputExistsError, PathNotFoundError, PathNotWritableError, PlanError, RenamedOptionWarning, RowFailed, SchemaMismatchError,
    SemanticFailuresWarning, ServiceError, SparkEnvironmentError, UDFError, UnreadableFileError,
)
from inferframe.expressions import Expression, col, lit
from inferframe.file import File
from inferframe.runners import set_runner_native, set_runner_ray, set_runner_spark
from inferframe.session import set_cache, set_history, set_prices, set_provider, set_tracing
from inferframe.series import Series
from inferframe.udf import cls, func, method

__version__ = "0.1.0"

__all__ = [
    "ArgumentTypeError", "BatchAPIError", "BudgetExceededError", "BudgetExceededWarning", "ColumnNotFoundError", "DataFrame", "DriftWarning", "PromptLayoutHint", "DataType", "Evaluation", "evaluate", "DownloadError", "ErrorKind", "ExecutionError",
    "Expression", "ExpressionTypeError", "File", "GroupedDataFrame", "InferframeError", "LocalServerError",
    "MediaError", "OutputExistsError", "PathNotFoundError", "PathNotWritableError", "PlanError", "RenamedOptionWarning", "RowFailed", "Schema", "SchemaMismatchError", "Series", "ServiceError", "SparkEnvironmentError", "UDFError", "UnreadableFileError",
    "LowInformationWarning", "SemanticFailuresWarning", "cls", "last_run", "col", "from_arrow",
    "from_glob_path", "from_pandas", "from_pydict", "from_pylist", "from_ray_dataset", "func", "functions", "lit", "method",
    "read_csv", "read_json", "read_parquet", "report", "run_sample", "runs", "set_cache", "set_history", "set_prices", "set_provider", "set_runner_native", "set_tracing",
    "set_runner_ray", "set_runner_spark",
    "from_duckdb", "from_huggingface", "from_polars", "read_lance", "sql", "from_spark",
]
