"""AI functions as pyspark Columns: ``from inferframe.spark import functions as AF``.

Each function returns an ordinary pyspark ``Column`` (a deterministic scalar Arrow UDF), so it goes
wherever a Spark column goes, and Spark's optimizer plans around it: a filter on other columns runs
first, and a select that drops the column never calls the model.

    sdf.withColumn("label", AF.classify_text("review", ["positive", "negative"])).where("stars >= 4")

sends requests only for the rows with ``stars >= 4``. The calls are inferframe's own (batching, the
session's one budget per endpoint and model across every executor, retries, the response cache,
cost); the options are those of the Python functions (``model=``, ``system_message=``, ...), checked
when the column is made, before any request. A failed row is NULL; ``AF.ai_error(col)`` gives its
error. The totals of each Spark action appear in ``ifr.last_run()``.

Example:
    >>> from inferframe.spark import functions as AF
    >>> from pyspark.sql import SparkSession                                        # doctest: +SKIP
    >>> spark = SparkSession.builder.master("local[2]").getOrCreate()               # doctest: +SKIP
    >>> sdf = spark.createDataFrame([(5, "Loved it")], "stars int, review string")  # doctest: +SKIP
    >>> sdf.withColumn("label", AF.classify_text("review", ["positive", "negative"])).first().label  # doctest: +SKIP
    'positive'
"""

from __future__ import annotations

import re
from typing import Any, Callable

import pyarrow as pa

from inferframe.errors import ArgumentTypeError
from inferframe.expressions import Expression, col
from inferframe.runners import spark_columns as sc

__all__ = ["prompt", "classify_text", "embed_text", "sem_predicate", "ai_error"]

_FIELD = re.compile(r"(?<!\{)\{([^{}]+)\}(?!\})")


def _spark():
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - the install has it
        raise ImportError("inferframe.spark.functions needs pyspark: pip install 'inferframe[spark]'.") from e
    spark = SparkSession.getActiveSession()
    if spark is None:
        raise ArgumentTypeError("inferframe.spark.functions needs a SparkSession: start one first "
                                "(SparkSession.builder.getOrCreate()), then make the column.")
    return spark


def _inputs(args: list[Any]) -> tuple[list[str], list[Any]]:
    """Each argument (a column name or a pyspark Column) as an input name and the Spark column to pass."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    names, columns = [], []
    for i, a in enumerate(args):
        if isinstance(a, str):
            names.append(a)
            columns.append(F.col(a))
        elif isinstance(a, Column):
            names.append(f"__in{i}")
            columns.append(a)
        else:
            raise ArgumentTypeError(f"expected a column name or a pyspark Column, got {type(a).__name__}; pass e.g. "
                                    f"'review' or F.col('review').")
    return names, [c.cast("string") for c in columns]


def plain(t: pa.DataType) -> pa.DataType:
    """``t`` as a type Spark holds: dictionaries as their values, fixed-size lists as lists, large kinds as plain."""
    if pa.types.is_dictionary(t):
        return plain(t.value_type)
    if pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(plain(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, plain(f.type)) for f in t])
    if pa.types.is_large_string(t):
        return pa.string()
    return t


def ai_column(build: Callable[[list[Expression]], Expression], args: list[Any], label: str) -> Any:
    """A pyspark Column computing ``build(inputs)`` (an inferframe expression over the args) for each row.

    The expression is planned here, on the driver, over string inputs: a bad option fails now, before
    any request. Spark then calls a ``ColumnUDF`` per Arrow batch in its Python workers.
    """
    from inferframe.dataframe.constructors import in_memory
    from inferframe.plan import physical as pp
    from inferframe.runners.spark_plan import spark_arrow, spark_schema
    from inferframe.runners.spark_jobs import session_job

    spark = _spark()
    # First: over Spark Connect, a server this process's service cannot serve is an error before any call to it.
    job, link = session_job(spark)
    names, columns = _inputs(args)
    frame = in_memory(pa.schema([(n, pa.string()) for n in dict.fromkeys(names)]).empty_table())
    frame = frame.with_column(sc.VALUE, build([col(n) for n in names]))
    chain = sc.column_chain(pp.plan_physical(frame._runnable()))
    out = pa.schema([pa.field(sc.VALUE, plain(chain[-1].schema.field(sc.VALUE).type))])
    fn = sc.ColumnUDF(job, link, chain, names, spark_arrow(out).field(sc.VALUE).type, label=label)
    return scalar_udf(fn, spark_schema(out)[0].dataType)(*columns)


def scalar_udf(fn: Any, return_type: Any) -> Any:
    """``fn`` (arrays in, one array out) as Spark's scalar Arrow UDF, deterministic."""
    import warnings

    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    with warnings.catch_warnings():
        # pyspark prefers type hints to the UDF type; a callable object's are not read, so the type is given.
        warnings.filterwarnings("ignore", message="It is preferred to specify type hints", category=UserWarning)
        return arrow_udf(fn, returnType=return_type, functionType=ArrowUDFType.SCALAR)


def prompt(column: Any, return_format: Any = None, **options: Any) -> Any:
    """The model's answer to each row's text (a struct column with ``return_format=`` a pydantic model or schema).

    Parameters:
        column: the prompt's text: a column name or a pyspark Column (build one with ``F.concat`` or ``F.format_string``).
        return_format: a pydantic model or JSON schema: a typed struct column.
        **options: ``prompt()``'s options (``model=``, ``provider=``, ``system_message=``, ``max_tokens=``...).
    """
    from inferframe.functions import prompt as ai_prompt

    return ai_column(lambda c: ai_prompt(c[0], return_format, **options), [column], "prompt")


def classify_text(column: Any, labels: list[str], **options: Any) -> Any:
    """One of ``labels`` for each row's text (``classify_text()``'s options)."""
    from inferframe.functions import classify_text as ai_classify

    return ai_column(lambda c: ai_classify(c[0], labels, **options), [column], "classify_text")


def embed_text(column: Any, **options: Any) -> Any:
    """Each row's embedding vector, an array of floats (``embed_text()``'s options: ``model=``, ``dimensions=``...)."""
    from inferframe.functions import embed_text as ai_embed

    return ai_column(lambda c: ai_embed(c[0], **options), [column], "embed_text")


def sem_predicate(template: str, **options: Any) -> Any:
    """Whether the statement ``template`` makes of each row is true: ``"{review} is about shipping"``.

    The ``{name}`` fields are the row's columns.
    """
    from inferframe.functions import sem_predicate as ai_predicate

    if not isinstance(template, str):
        raise ArgumentTypeError(f"sem_predicate() takes a template string such as '{{review}} is positive', got "
                                f"{type(template).__name__}.")
    fields = list(dict.fromkeys(m.strip() for m in _FIELD.findall(template)))
    if not fields:
        raise ArgumentTypeError(f"sem_predicate({template!r}) names no column: write the columns in braces, e.g. "
                                f"'{{review}} is positive'.")
    return ai_column(lambda c: ai_predicate(template, **options), fields, "sem_predicate")


def ai_error(column: Any) -> Any:
    """The error of each row of an AI column made by these functions (NULL where the row succeeded).

    Pass the AI column itself: ``AF.ai_error(AF.prompt("review"))``, or the same call again.
    """
    from pyspark.sql import Column

    if not isinstance(column, Column):
        raise ArgumentTypeError(f"ai_error() takes an AI column (AF.prompt(...)), got {type(column).__name__}.")
    return scalar_udf(sc.ErrorOf(), "string")(column)
