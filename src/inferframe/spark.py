"""Stay in Spark: AI columns added to a Spark DataFrame, which stays a lazy Spark DataFrame.

For pipelines that never leave Spark. ``with_columns(sdf, label=prompt(col("body"), ...))`` plans the
columns with inferframe's one physical planner and adds them as ``mapInArrow`` stages: the AI call's
runtime (rate limits, retries, response cache, errors as data) runs in each Python worker, built
once per worker, with keys reaching the executors through the job's driver service, never the
Spark conf. Nothing runs until Spark runs the result (``show``, ``write``, ``count``...).

Example:
    >>> from pyspark.sql import SparkSession                                   # doctest: +SKIP
    >>> from inferframe import col
    >>> spark = SparkSession.builder.master("local[2]").getOrCreate()          # doctest: +SKIP
    >>> sdf = spark.createDataFrame([(1, "good"), (2, "bad")], "id long, body string")  # doctest: +SKIP
    >>> with_columns(sdf, n=col("body").str.length()).toPandas()["n"].tolist()  # doctest: +SKIP
    [4, 3]
"""

from __future__ import annotations

from typing import Any

from inferframe.dataframe.constructors import spark_with_columns
from inferframe.errors import ArgumentTypeError
from inferframe.expressions import Expression

__all__ = ["with_columns"]


def with_columns(sdf: Any, **columns: Any) -> Any:
    """``sdf`` (a ``pyspark.sql.DataFrame``) with one column per keyword, from inferframe expressions; lazy.

    Parameters:
        sdf: the Spark DataFrame.
        **columns: name -> expression over ``sdf``'s columns (``prompt(col("body"), ...)``, ``@func`` calls,
            ``col("x") * 2`` ...). An AI call also adds its ``<name>_error`` column, as in inferframe.

    Example:
        >>> from inferframe import col
        >>> with_columns(spark.range(2), twice=col("id") * 2).collect()   # doctest: +SKIP
        [Row(id=0, twice=0), Row(id=1, twice=2)]
    """
    if not columns:
        raise ArgumentTypeError("with_columns() needs at least one column: with_columns(sdf, label=prompt(col('body'), ...)).")
    for name, expr in columns.items():
        if not isinstance(expr, Expression):
            raise ArgumentTypeError(f"with_columns(): column {name!r} is a {type(expr).__name__}, not an inferframe "
                                    f"expression; pass e.g. {name}=prompt(col('body'), ...) or {name}=col('x') * 2.")
    return spark_with_columns(sdf, columns)
