"""One embedded llama-server per Ray node, shared by every worker on that node.

A worker that needs the local model asks the node's host actor (named after the node, created by
whichever worker asks first, pinned to that node) for the server's URL; the actor starts the
server once (``get_local_server``) and keeps it for the life of the cluster. Workers then talk to it
over 127.0.0.1, as a local run does; the server's slots serve all of them.

Example:
    >>> use_node_server()  # doctest: +SKIP  (in a Ray worker: get_local_server() now returns the node's)
"""

from __future__ import annotations

from inferframe.providers.local_server import SharedServer, get_local_server, use_shared_server

NAMESPACE = "inferframe"


class NodeServerHost:
    """A Ray actor that owns its node's llama-server."""

    def url(self, n_parallel: int | None) -> dict:
        server = get_local_server(n_parallel)
        return {"base_url": server.base_url, "model": server.model, "n_parallel": server.n_parallel}


def _node_server(n_parallel: int | None) -> SharedServer:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    host = ray.remote(num_cpus=0)(NodeServerHost).options(
        name=f"inferframe-llama-{node}", namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False), max_restarts=-1,
    ).remote()
    return SharedServer(**ray.get(host.url.remote(n_parallel)))


def use_node_server() -> None:
    """In this Ray worker, make the local model mean the node's one server."""
    use_shared_server(_node_server)
