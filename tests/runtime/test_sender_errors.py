"""An exception from a provider's own code on the send path stops the job with that error: never a hang.

A provider's prompt-cache hint (``PrefixRouting.routed``, a plugin may implement it) runs in the sender pool for each
row. It raised outside the pool's guard once: the sender task ended, its row was never answered, and the job waited
for it for good (found when ``Request.with_body`` raised there: the suite's 600 s timeout ended the test).
"""

from __future__ import annotations

import threading

import inferframe as ifr
from inferframe import col
from inferframe.functions import classify_text
from inferframe.providers.openai import HostedOpenAIProvider
from inferframe.simulator import Simulator, SimulatorConfig


def test_a_provider_whose_cache_hint_raises_stops_the_job_with_its_error(monkeypatch):
    def broken(self, body, lane, group):
        raise RuntimeError("the provider's cache hint failed")

    monkeypatch.setattr(HostedOpenAIProvider, "routed", broken)
    outcome: list = []
    with Simulator(SimulatorConfig()) as sim:
        df = ifr.from_pydict({"t": [f"review {i}" for i in range(8)]}).with_column("c", classify_text(
            col("t"), ["yes", "no"], model="gpt-5-mini", provider="openai", base_url=sim.base_url, api_key="k"))

        def run() -> None:
            try:
                outcome.append(df.to_pydict())
            except BaseException as e:  # noqa: BLE001 - what the user's call raised is what is checked
                outcome.append(e)

        job = threading.Thread(target=run, daemon=True)
        job.start()
        job.join(60)  # on main it never ended
    assert outcome, "the job hung: a row whose sender raised was never answered"
    # The job's error names the call, its rows and the provider's error.
    assert isinstance(outcome[0], Exception) and "classify_text" in str(outcome[0]), outcome[0]
    assert "RuntimeError: the provider's cache hint failed" in str(outcome[0]), outcome[0]
