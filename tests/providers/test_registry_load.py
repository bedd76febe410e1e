"""The provider registry loads its entry points once, and a thread asking meanwhile waits for all of them."""

import threading
import time
from types import SimpleNamespace

import importlib.metadata

from inferframe.providers.registry import Registry


def test_a_thread_asking_while_another_loads_sees_every_provider(monkeypatch):
    def slow_plugin(registry):
        registry.register("first", None)
        time.sleep(0.3)  # a slow import: the other thread asks now
        registry.register("second", None)

    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [SimpleNamespace(load=lambda: slow_plugin)])
    reg = Registry()
    seen = []
    loader = threading.Thread(target=lambda: reg.names())
    loader.start()
    time.sleep(0.1)
    seen.append(reg.names())
    loader.join()
    assert seen == [["first", "second"]]
    assert reg.names() == ["first", "second"]


def test_a_plugin_that_asks_the_registry_while_loading_does_not_deadlock(monkeypatch):
    def asking_plugin(registry):
        registry.register("one", None)
        registry.names()  # re-entrant: returns what is there so far

    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [SimpleNamespace(load=lambda: asking_plugin)])
    assert Registry().names() == ["one"]
