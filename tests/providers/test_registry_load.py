"""The provider registry loads its entry points once, a thread asking meanwhile waits for all of them, and a
plugin that fails to load disables only itself."""

import threading
import time
from types import SimpleNamespace

import importlib.metadata

import pytest

from inferframe.errors import PlanError
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


def test_a_plugin_whose_hook_raises_leaves_nothing_half_registered_and_the_others_load(monkeypatch):
    def half_plugin(registry):
        registry.register("half", None)
        raise RuntimeError("config file missing")

    def good_plugin(registry):
        registry.register("good", None)

    eps = [SimpleNamespace(name="half", value="half_pkg:register", load=lambda: half_plugin),
           SimpleNamespace(name="good", value="good_pkg:register", load=lambda: good_plugin)]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: eps)
    reg = Registry()
    assert reg.names() == ["good"]
    with pytest.raises(PlanError, match=r"'half' cannot be used: the plugin 'half' \(entry point half = "
                                        r"half_pkg:register\) failed to load: RuntimeError: config file missing"):
        reg.get("half")
    with pytest.raises(PlanError, match=r"Unknown provider 'hlaf'.*Not loaded: the plugin 'half'"):
        reg.get("hlaf")
