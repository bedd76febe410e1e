"""Protocol-faithful simulator of the OpenAI HTTP API for tests and benchmarks.

Endpoints: POST /v1/chat/completions, POST /v1/responses, POST /v1/embeddings,
GET /v1/models[/{id}], plus admin routes under /_sim (config, stats, reset,
requests).  Behaviour (answers, latency, rate limits, API key, faults,
recording) is set by :class:`SimulatorConfig`.

Example (``Simulator.spawn`` runs the same in a separate process):
    >>> import openai
    >>> from inferframe.simulator import Simulator, SimulatorConfig
    >>> with Simulator(SimulatorConfig(rpm=600, fail_rules=[{"match": "ROW7", "status": 400}])) as sim:
    ...     client = openai.OpenAI(base_url=sim.base_url, api_key="x", max_retries=0)
    ...     for row in ["ROW1", "ROW7"]:
    ...         try:
    ...             _ = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": row}])
    ...         except openai.BadRequestError:
    ...             pass
    ...     sim.stats()["by_status"]
    {'200': 1, '400': 1}
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
