"""The user's DataFrame API."""

from inferframe.dataframe.constructors import (
    from_arrow, from_glob_path, from_pandas, from_pydict, from_pylist, from_ray_dataset, read_csv, read_json, read_parquet,
)
from inferframe.dataframe.dataframe import DataFrame, GroupedDataFrame
from inferframe.dataframe.evaluation import Evaluation, evaluate
from inferframe.dataframe.interop import from_duckdb, from_huggingface, from_polars, read_lance, sql
from inferframe.dataframe.report import report
from inferframe.dataframe.runs import run_sample, runs
from inferframe.dataframe.schema import Schema

__all__ = [
    "DataFrame", "Evaluation", "GroupedDataFrame", "Schema", "from_arrow", "from_glob_path", "from_pandas", "from_pydict",
    "from_pylist", "from_ray_dataset", "read_csv", "read_json", "read_parquet", "run_sample", "runs", "evaluate", "report",
    "from_duckdb", "from_huggingface", "from_polars", "read_lance", "sql",
]
