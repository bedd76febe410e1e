"""Spark DataFrames in and out through Arrow, and AI columns added to a Spark DataFrame lazily.

- ``spark_to_arrow(sdf)``: a Spark DataFrame's rows as one Arrow table on the driver (``ifr.from_spark``);
- ``plan_to_spark(plan, result, spark)``: a plan as a Spark DataFrame: lazily on the Spark runner (its
  operators, run when Spark runs it), else the local result handed over as Arrow (``df.to_spark``);
- ``spark_with_columns(sdf, exprs)``: ``sdf`` plus columns from inferframe expressions (``prompt()``,
  ``@func``, ...), as a lazy Spark DataFrame whose AI calls run in ``mapInArrow`` stages
  (``inferframe.spark.with_columns``).

Example:
    >>> from pyspark.sql import SparkSession                                   # doctest: +SKIP
    >>> spark = SparkSession.builder.master("local[2]").getOrCreate()          # doctest: +SKIP
    >>> spark_to_arrow(spark.range(3)).column("id").to_pylist()                 # doctest: +SKIP
    [0, 1, 2]
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa

from inferframe.errors import ArgumentTypeError
from inferframe.plan import logical as lp
from inferframe.plan import physical as pp
from inferframe.runners import spark_plan as sp
from inferframe.runners.spark_connect import require_classic
from inferframe.runners.spark_python import ensure_executor_python


def _check_spark_frame(sdf: Any, what: str) -> None:
    try:
        from pyspark.sql import DataFrame as SparkFrame
    except ImportError as e:  # pragma: no cover - the install has it
        raise ImportError(f"{what} needs pyspark: pip install 'inferframe[spark]'.") from e
    if not isinstance(sdf, SparkFrame):
        raise ArgumentTypeError(f"{what} takes a pyspark.sql.DataFrame, got {type(sdf).__name__}; "
                                f"pass e.g. spark.read.parquet(path).")


def spark_to_arrow(sdf: Any) -> pa.Table:
    """A Spark DataFrame's rows on the driver, as Arrow (Spark's own Arrow collection)."""
    _check_spark_frame(sdf, "from_spark()")
    return sdf.toArrow()


def arrow_schema_of(sdf: Any) -> pa.Schema:
    """The Arrow schema of a Spark DataFrame's columns."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(sdf.schema, timezone="UTC")


def plan_to_spark(plan: lp.LogicalPlan | None, result: pa.Table | None, spark: Any = None):
    """``plan`` as a Spark DataFrame: lazily on the Spark runner, else ``result`` (run now if None) through Arrow."""
    from inferframe.runners import get_runner
    from inferframe.runners.spark_runner import SparkRunner

    runner = get_runner()
    if result is None and isinstance(runner, SparkRunner) and (spark is None or spark is runner.spark):
        return runner.to_spark(plan)
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    ensure_executor_python(spark)  # the DataFrame's later Python stages (the user's own UDFs) find inferframe's Python
    schema = result.schema
    return spark.createDataFrame(result.select(schema.names).cast(sp.spark_arrow(schema)),
                                 schema=sp.spark_schema(schema))


def spark_with_columns(sdf: Any, plan: lp.LogicalPlan) -> Any:
    """``plan`` (columns added to an empty table of ``sdf``'s schema) run over ``sdf``, as a lazy Spark DataFrame."""
    from inferframe.runners.spark_jobs import Job
    from inferframe.runners.spark_runner import Builder

    _check_spark_frame(sdf, "with_columns()")
    require_classic(sdf, "inferframe.spark.with_columns()")
    ensure_executor_python(sdf.sparkSession)  # before its stages are made: each takes the executors' Python then
    op = pp.plan_physical(plan)
    return Builder(Job.lazy(sdf.sparkSession), source=sdf).build(op)
