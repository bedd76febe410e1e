"""Stay in Spark: AI functions as Spark columns, in Spark SQL, and added to a lazy Spark DataFrame.

- ``from inferframe.spark import functions as AF``: ``AF.prompt``, ``AF.classify_text``, ``AF.embed_text``,
  ``AF.sem_predicate`` and ``AF.ai_error`` are pyspark Columns (``sdf.withColumn("label", AF.prompt("review"))``),
  which Spark's optimizer plans around (a filter on other columns first; a dropped column never runs);
- ``register(spark)``: ``ai_complete``, ``ai_classify``, ... in ``spark.sql`` (``inferframe.spark.sql``);
- ``with_columns(sdf, label=prompt(col("body"), ...))``: any inferframe expressions, as below.

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


from typing import Any as _Any

from inferframe.dataframe.constructors import spark_with_columns as _spark_with_columns
from inferframe.errors import ArgumentTypeError as _ArgumentTypeError
from inferframe.expressions import Expression as _Expression

from inferframe.spark import functions
from inferframe.spark.sql import register

__all__ = ["with_columns", "functions", "register"]


def with_columns(sdf: _Any, **columns: _Any) -> _Any:
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
        raise _ArgumentTypeError("with_columns() needs at least one column: with_columns(sdf, label=prompt(col('body'), ...)).")
    for name, expr in columns.items():
        if not isinstance(expr, _Expression):
            raise _ArgumentTypeError(f"with_columns(): column {name!r} is a {type(expr).__name__}, not an inferframe "
                                    f"expression; pass e.g. {name}=prompt(col('body'), ...) or {name}=col('x') * 2.")
    return _spark_with_columns(sdf, columns)
