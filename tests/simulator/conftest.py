"""Fixtures for the simulator tests (loopback only, fast)."""

from __future__ import annotations

import openai
import pytest

from inferframe.simulator import Simulator, SimulatorConfig


@pytest.fixture
def sim():
    """A fresh in-process simulator with default settings."""
    with Simulator(SimulatorConfig()) as s:
        yield s


@pytest.fixture
def client(sim):
    """Official SDK client pointed at ``sim``, no retries."""
    c = openai.OpenAI(base_url=sim.base_url, api_key="x", max_retries=0, timeout=10)
    yield c
    c.close()
