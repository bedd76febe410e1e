"""Protocol-faithful simulator of the OpenAI HTTP API for tests and benchmarks.

Endpoints: POST /v1/chat/completions, POST /v1/responses, POST /v1/embeddings,
GET /v1/models[/{id}], plus admin routes under /_sim (config, stats, reset,
requests).  Behaviour (answers, latency, rate limits, API key, faults,
recording) is set by :class:`SimulatorConfig`.

Example::

    from inferframe.simulator import Simulator, SimulatorConfig
    with Simulator(SimulatorConfig(rpm=600, p_500=0.01)) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="x")
        ...
        sim.stats()["by_status"]

    proc = Simulator.spawn(SimulatorConfig(latency_ms=20))   # separate process
    ...; proc.close()
"""

from .app import DEFAULT_MODULES, create_app
from .config import DEFAULT_MODELS, FAULT_KINDS, FailRule, SimulatorConfig
from .errors import SimError
from .server import Simulator, SimulatorProcess, start_server
from .state import SimState

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_MODULES",
    "FAULT_KINDS",
    "FailRule",
    "SimError",
    "SimState",
    "Simulator",
    "SimulatorConfig",
    "SimulatorProcess",
    "create_app",
    "start_server",
]
