"""AI functions in Spark SQL: ``inferframe.spark.register(spark)``, then ``spark.sql("SELECT ai_classify(...)")``.

The functions and their arguments are ``ifr.sql``'s (``inferframe.sql.functions``):
``ai_complete``, ``ai_query``, ``ai_classify``, ``ai_extract``, ``ai_filter``, ``ai_score``, ``ai_embed``,
``ai_similarity``, with named options (``model => 'gemma-3-270m'``, ``system_message => '...'``) and
``ai_error(<a call>)``. Each is a deterministic scalar Arrow UDF, so Spark runs a ``WHERE`` on other
columns first and never calls one whose column a query drops. A failed row is NULL.

Spark gives a UDF its constant arguments (the labels, the model) as columns, one value per row, so
they are read, and checked, in the executors at each query's first batch, before any request: a bad
option stops the query there with inferframe's own message. ``ai_extract`` returns the fields as a
JSON string (a UDF has one result type whatever its schema argument): read them with
``from_json(ai_extract(...), 'name STRING, age INT')``. ``ai_agg`` and ``ai_summarize_agg`` are not
Spark aggregates: they stop with an error that says to run the query through ``ifr.sql`` on the Spark
runner.

Example:
    >>> import inferframe.spark                                                            # doctest: +SKIP
    >>> inferframe.spark.register(spark)                                                   # doctest: +SKIP
    >>> spark.sql("SELECT ai_classify('I loved it', array('positive', 'negative')) AS l").first().l  # doctest: +SKIP
    'positive'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from inferframe.sql.functions import FUNCTIONS, TEXT, expressions, similarity
from inferframe.errors import PlanError
from inferframe.runners import spark_columns as sc

__all__ = ["register", "RETURNS"]

# The Spark SQL type each function returns (ai_extract: JSON text, see the module's docstring).
RETURNS = MappingProxyType({"ai_complete": "string", "ai_query": "string", "ai_classify": "string", "ai_extract": "string",
           "ai_filter": "boolean", "ai_score": "int", "ai_embed": "array<float>", "ai_similarity": "double"})
_ARROW = MappingProxyType({"string": pa.string(), "boolean": pa.bool_(), "int": pa.int32(), "array<float>": pa.list_(pa.float32()),
          "double": pa.float64()})


def _constant(fn: str, name: str, values: pa.Array) -> Any:
    """The one value of a constant argument (Spark hands it over once per row)."""
    seen = values.to_pylist()
    if seen and any(v != seen[0] for v in seen):
        raise PlanError(f"{fn}(): {name} must be a constant (a literal such as 'gemma-3-270m' or "
                        f"array('positive', 'negative')), not a column whose rows differ.")
    return seen[0] if seen else None


class SqlFunction:
    """One Spark SQL AI function in the executors: the call built from the query's constants at its first batch.

    Parameters:
        name: the SQL function (a key of ``FUNCTIONS``).
        job, link: the session's job and service (``runners.spark_jobs.session_job``).
        session: the driver's settings at ``register`` (provider, prices, cache), without its runner; keys
            are handles in it, never values.
    """

    def __init__(self, name: str, job: str, link: Any, session: Any, defaults: dict | None = None,
                 environment: tuple[dict, dict] = ({}, {})) -> None:
        self.fn, self.job, self.link, self.session = FUNCTIONS[name], job, link, session
        self.defaults = dict(defaults or {})
        self.keys, self.urls = environment  # provider_environment(): key handles and base URLs by variable
        self._calls: dict[str, sc.ColumnUDF] = {}

    def __call__(self, *arrays: pa.Array, **named: pa.Array) -> pa.Array:
        fn = self.fn
        inputs: dict[str, Any] = {}
        texts: list[tuple[str, pa.Array]] = []
        for (param, kind), values in zip(fn.params, arrays):
            if kind == TEXT:
                inputs[param] = param
                texts.append((param, values))
            else:
                inputs[param] = _constant(fn.name, param, values)
        if len(arrays) < fn.required or len(arrays) > len(fn.params):
            names = ", ".join(p for p, _ in fn.params)
            raise PlanError(f"{fn.name}() takes {fn.required} to {len(fn.params)} arguments ({names}) and named "
                            f"options (model => ...), got {len(arrays)}.")
        options = {**self.defaults, **{k: _constant(fn.name, k, v) for k, v in named.items()}}
        call = self._call(inputs, options, [p for p, _ in texts])
        return call(*[v for _, v in texts])

    def _call(self, inputs: dict, options: dict, texts: list[str]) -> sc.ColumnUDF:
        key = json.dumps([inputs, options], sort_keys=True, default=str)
        found = self._calls.get(key)
        if found is None:
            found = self._calls[key] = self._build(inputs, options, texts, key)
        return found

    def _build(self, inputs: dict, options: dict, texts: list[str], key: str) -> sc.ColumnUDF:
        from inferframe.dataframe.constructors import in_memory
        from inferframe.plan import physical as pp
        from inferframe.session import using

        self._environment()
        with using(self.session):
            frame = in_memory(pa.schema([(t, pa.string()) for t in texts]).empty_table())
            for suffix, expr in expressions(self.fn, inputs, options):
                expr = expr if expr is not None else similarity(sc.VALUE + "_a", sc.VALUE + "_b")
                frame = frame.with_column(sc.VALUE + suffix, expr)
            chain = sc.column_chain(pp.plan_physical(frame._runnable()))
        # The same id for the same call in every task: the worker keeps one operator (clients, budget) for it.
        digest = hashlib.sha256(f"{self.job}:{self.fn.name}:{key}".encode()).hexdigest()[:12]
        returns = RETURNS[self.fn.name]
        return sc.ColumnUDF(self.job, self.link, chain, texts, _ARROW[returns], label=f"{self.fn.name}-{digest}",
                            as_json=self.fn.name == "ai_extract", stable_id=True)


    def _environment(self) -> None:
        """The driver's provider settings in this worker's environment, before a call is built from them.

        A Connect server's or a cluster's executors do not share the client's environment: the keys reach
        them as handles through the session's service (the secret channel), the base URLs as they are. A
        variable the worker already has stays.
        """
        from inferframe.providers import secrets

        for name, value in self.link.call("env").items():  # the handles' keys, as a task's services set them
            os.environ.setdefault(name, value)
        for name, ref in self.keys.items():
            key = secrets.get(ref)
            if key:
                os.environ.setdefault(name, key)
        for name, url in self.urls.items():
            os.environ.setdefault(name, url)


def provider_environment() -> tuple[dict, dict]:
    """This process's provider keys (as handles, never values) and base URLs from the environment, by variable.

    Example:
        >>> keys, urls = provider_environment()
        >>> all(ref.startswith("k") for ref in keys.values())
        True
    """
    from inferframe.providers import secrets
    from inferframe.providers.registry import REGISTRY

    keys, urls = {}, {}
    for info in REGISTRY.infos():
        if info.key_env and os.environ.get(info.key_env):
            keys[info.key_env] = secrets.put(os.environ[info.key_env])
        if info.base_url_env and os.environ.get(info.base_url_env):
            urls[info.base_url_env] = os.environ[info.base_url_env]
    return keys, urls


def _check_defaults(defaults: dict) -> None:
    """register()'s options, checked on the driver as a call of ai_complete and ai_classify would take them."""
    if not defaults:
        return
    probe = {"ai_complete": {"prompt": "t"}, "ai_classify": {"text": "t", "labels": ["a", "b"]}}
    for name, inputs in probe.items():
        try:
            expressions(FUNCTIONS[name], inputs, dict(defaults))
        except TypeError as e:
            raise PlanError(f"register(): {e}; pass the options the AI functions take (model=, system_message=, "
                            f"max_tokens=, ...).") from None
        except PlanError as e:
            if "needs model=" not in str(e):  # a query may name the model itself
                raise PlanError(f"register(): {e}") from None


class NotAnAggregate:
    """``ai_agg``/``ai_summarize_agg`` in Spark SQL: not a Spark aggregate; the query stops saying what works."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *arrays: pa.Array, **named: pa.Array) -> Any:
        raise PlanError(f"{self.name}() is not available in Spark SQL: it asks the model about a whole group at once, "
                        f"which a Spark UDF cannot plan. Run the query with ifr.sql(...) on the Spark runner "
                        f"(ifr.set_runner_spark(spark)), or use sdf.groupBy(...) with inferframe's sem_agg.")


def _aggregate(fn: Any) -> Any:
    """``fn`` as a grouped Arrow aggregate, so a GROUP BY query with it gets to run it and read its error."""
    import warnings

    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="It is preferred to specify type hints", category=UserWarning)
        return arrow_udf(fn, returnType="string", functionType=ArrowUDFType.GROUPED_AGG)


def register(spark: Any, **defaults: Any) -> list[str]:
    """Register inferframe's AI functions in ``spark``'s SQL; returns their names.

    Parameters:
        spark: the SparkSession whose ``spark.sql`` should know them.
        **defaults: named options every call gets unless it names them itself (``model="gemma-3-270m"``,
            ``system_message=...``), checked here. ``ai_error(<call>)`` needs them: Spark hands a UDF nested in
            another no named arguments, so a call inside ``ai_error`` takes its options from here.
    """
    from inferframe.runners.spark_jobs import session_job
    from inferframe.session import current
    from inferframe.spark.functions import scalar_udf

    _check_defaults(defaults)
    job, link = session_job(spark)
    session = dataclasses.replace(current(), runner=None, last_recorded=None)
    environment = provider_environment()  # the executors build the calls, away from this process's environment
    names = []
    for name, fn in FUNCTIONS.items():
        if fn.aggregate:
            spark.udf.register(name, _aggregate(NotAnAggregate(name)))
        else:
            spark.udf.register(name, scalar_udf(SqlFunction(name, job, link, session, defaults, environment),
                                                   RETURNS[name]))
        names.append(name)
    spark.udf.register("ai_error", scalar_udf(sc.ErrorOf(), "string"))
    return names + ["ai_error"]

