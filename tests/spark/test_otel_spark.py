"""One trace across local Spark (issue 47): the Python workers' stage and request spans join the driver's job trace
(W3C trace context shipped with each UDF stage), each worker configuring its SDK through ``set_tracing(worker_setup=...)``."""

import sys

import pytest

pytest.importorskip("opentelemetry.sdk")

import otel_cluster_helpers as helpers  # noqa: E402
from pyspark import cloudpickle  # noqa: E402

import inferframe as ifr  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[helpers.__name__])  # the workers' SDK set-up travels by value


def test_python_workers_request_spans_join_the_drivers_job_trace_under_their_stages(spark, tmp_path):
    counts = helpers.traced_job_on(lambda: ifr.set_runner_spark(spark))(tmp_path)
    assert counts["stage spans"] >= 2  # one per partition that ran the stage: 4 partitions
    print("spark:", counts)
