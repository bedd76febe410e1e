"""The provider registry: one hook per provider package, built-ins included.

A provider package exposes an entry point in the group ``inferframe.providers``
that points to ``register(registry)``; the built-in ``openai``, ``lm_studio``
and ``local`` providers are registered through that same entry-point path.
Keys live only in this process's memory (or the environment) and are looked up
by provider name when a provider is built, so they never reach a plan, a
pickle, a log or an error message.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from typing import Any, Callable

from inferframe.errors import PlanError


@dataclasses.dataclass(frozen=True)
class ProviderSpec:
    """Which provider to use and where; never holds a secret.

    Parameters:
        name: the registered provider name ("openai", "local", "lm_studio", or a plugin's).
        base_url: where its API lives (None: the provider's default).
        options: extra provider options as sorted (key, value) pairs.
    """

    name: str
    base_url: str | None = None
    options: tuple = ()
    key_ref: str | None = None  # handle to a key held in this process's memory, never the key

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)


@dataclasses.dataclass(frozen=True)
class ProviderInfo:
    name: str
    factory: Callable[[ProviderSpec], Any]
    key_env: str | None = None
    base_url_env: str | None = None
    default_base_url: str | None = None
    needs_key: bool = False
    default_model: str | None = None
    default_concurrency: int | None = None


class Registry:
    """Provider name -> how to build it."""

    def __init__(self) -> None:
        self._providers: dict[str, ProviderInfo] = {}
        self._loaded = False
        self._lock = threading.Lock()

    def register(self, name: str, factory: Callable[[ProviderSpec], Any], **info: Any) -> None:
        self._providers[name] = ProviderInfo(name, factory, **info)

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            from importlib.metadata import entry_points

            hooks = {ep.name: ep for ep in entry_points(group="inferframe.providers")}
            if "openai" not in hooks:  # running from a source tree without installed metadata
                from inferframe.providers import local, openai

                openai.register(self)
                local.register(self)
            for ep in hooks.values():
                ep.load()(self)

    def get(self, name: str) -> ProviderInfo:
        self._load()
        if name not in self._providers:
            known = ", ".join(sorted(self._providers))
            raise PlanError(f"Unknown provider {name!r}. Known providers: {known}. "
                            "Install the provider's package or check the spelling.")
        return self._providers[name]

    def names(self) -> list[str]:
        self._load()
        return sorted(self._providers)


REGISTRY = Registry()

_state_lock = threading.Lock()
_default: ProviderSpec | None = None
_keys: dict[str, str] = {}  # key_ref -> key given to set_provider or a call; memory only


def set_provider(name: str, *, base_url: str | None = None, api_key: str | None = None, **options: Any) -> None:
    """Make ``name`` the default provider for AI functions, optionally with its URL and key.

    Example:
        >>> set_provider("openai", base_url="http://127.0.0.1:8000/v1", api_key="sk-...")  # doctest: +SKIP
    """
    REGISTRY.get(name)
    global _default
    with _state_lock:
        ref = None
        if api_key is not None:
            ref = f"default:{name}"
            _keys[ref] = api_key
        _default = ProviderSpec(name, base_url, tuple(sorted(options.items())), ref)


def default_spec() -> ProviderSpec | None:
    """The provider set by ``set_provider``, if any."""
    with _state_lock:
        return _default


def reset_provider() -> None:
    """Forget the default provider and any keys given to ``set_provider``."""
    global _default
    with _state_lock:
        _default = None
        _keys.clear()


def resolve(provider: str | ProviderSpec | None, *, model: str | None = None, base_url: str | None = None,
            api_key: str | None = None) -> ProviderSpec:
    """Pick the provider for one call: the argument, else the default, else OpenAI if a key is set, else local."""
    if isinstance(provider, ProviderSpec):
        spec = provider
    elif isinstance(provider, str):
        REGISTRY.get(provider)
        with _state_lock:
            d = _default
        spec = d if d is not None and d.name == provider else ProviderSpec(provider)
    else:
        with _state_lock:
            d = _default
        if d is not None:
            spec = d
        elif os.environ.get("OPENAI_API_KEY") and not (model or "").startswith("gemma-3-270m"):
            spec = ProviderSpec("openai")
        else:
            spec = ProviderSpec("local")
    if base_url is not None:
        spec = dataclasses.replace(spec, base_url=base_url)
    if api_key is not None:
        ref = f"call:{uuid.uuid4().hex}"
        with _state_lock:
            _keys[ref] = api_key
        spec = dataclasses.replace(spec, key_ref=ref)
    return spec


def api_key_for(spec: ProviderSpec) -> str | None:
    info = REGISTRY.get(spec.name)
    with _state_lock:
        key = _keys.get(spec.key_ref) if spec.key_ref else None
    if key is None and info.key_env:
        key = os.environ.get(info.key_env)
    return key


def base_url_for(spec: ProviderSpec) -> str | None:
    info = REGISTRY.get(spec.name)
    if spec.base_url:
        return spec.base_url
    if info.base_url_env and os.environ.get(info.base_url_env):
        return os.environ[info.base_url_env]
    return info.default_base_url


def check_ready(spec: ProviderSpec) -> None:
    """Fail before any request when the provider cannot work (e.g. a hosted API with no key)."""
    info = REGISTRY.get(spec.name)
    if info.needs_key and not api_key_for(spec):
        url = base_url_for(spec) or ""
        if "api.openai.com" in url or not spec.base_url:
            raise PlanError(
                f"Provider {spec.name!r} needs an API key: set {info.key_env or 'the key'} in the environment or call "
                f"inferframe.set_provider({spec.name!r}, api_key=...). For a local OpenAI-compatible server pass base_url=..."
            )


def build(spec: ProviderSpec) -> Any:
    return REGISTRY.get(spec.name).factory(spec)
