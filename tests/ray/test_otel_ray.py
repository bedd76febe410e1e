"""One trace across the local Ray cluster (issue 47): the actors' stage and request spans join the driver's job
trace (W3C trace context shipped with the job), each worker configuring its SDK through ``set_tracing(worker_setup=...)``."""

import sys

import pytest

pytest.importorskip("opentelemetry.sdk")

import otel_cluster_helpers as helpers  # noqa: E402
import ray  # noqa: E402

import inferframe as ifr  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[helpers.__name__])  # the workers' SDK set-up travels by value


def test_workers_request_spans_join_the_drivers_job_trace_under_their_stages(ray_cluster, tmp_path):
    counts = helpers.traced_job_on(ifr.set_runner_ray)(tmp_path)
    print("ray:", counts)
