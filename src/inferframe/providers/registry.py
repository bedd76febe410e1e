"""The provider registry: one hook per provider package, built-ins included.

A provider package exposes an entry point in the group ``inferframe.providers`` that points to
``register(registry)``; the built-in providers are registered through that same entry-point path.
Keys are looked up through ``inferframe.providers.secrets`` (or the provider's environment
variable) only when a provider is built, so they never reach a plan, a pickle, a log or an error.
A plugin that fails to load (its import raises, or its hook does) disables only itself: asking
for it raises a ``PlanError`` that names its entry point and why; every other provider works.

Example:
    >>> "openai" in REGISTRY.names() and REGISTRY.get("local").capabilities.local
    True
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

from inferframe.errors import PlanError
from inferframe.providers import secrets
from inferframe.providers import interface
from inferframe.providers.interface import Capabilities, Transport
from inferframe.providers.spec import ProviderSpec, spec_lookups


@dataclasses.dataclass(frozen=True)
class ProviderInfo:
    """How to build one provider, and what it declares.

    Parameters:
        name: the registered name.
        cls: the provider's class: its class methods are its wire format (the protocols of
            ``providers.interface`` it implements), built as ``cls(spec, base_url=..., api_key=...)`` it is
            the transport; None for
            in-process model families, which the AI functions run without HTTP.
        key_env / base_url_env: environment variables read for the key and the URL.
        default_base_url: the URL when neither the call nor the environment gives one.
        needs_key: a hosted API: planning fails without a key.
        capabilities: what the provider can do (see ``Capabilities``).
        auto: with no provider named, picked when its key is in the environment.
        offline_default: with no provider named and no key, the provider that runs offline.
    """

    name: str
    cls: type[Transport] | None
    key_env: str | None = None
    base_url_env: str | None = None
    default_base_url: str | None = None
    needs_key: bool = False
    capabilities: Capabilities = Capabilities()
    auto: bool = False
    offline_default: bool = False

    def knows_model(self, model: str | None) -> bool:
        """This provider serves ``model`` by name (a hosted model table, the packaged local model)."""
        return self.cls is not None and interface.knows_model(self.cls, model)


class Registry:
    """Provider name -> how to build it; loaded from the ``inferframe.providers`` entry points."""

    def __init__(self) -> None:
        self._providers: dict[str, ProviderInfo] = {}
        self._failed: dict[str, str] = {}  # entry point name -> "name = value: why it failed to load"
        self._loaded = False
        self._loading = False  # the loading thread's own calls while it registers (others wait on the lock)
        self._lock = threading.RLock()

    def register(self, name: str, cls: type[Transport] | None, **info: Any) -> None:
        if cls is not None and "capabilities" not in info:
            info["capabilities"] = cls.capabilities
        self._providers[name] = ProviderInfo(name, cls, **info)

    def _load(self) -> None:
        if self._loaded:  # read on every request built: no lock once loaded
            return
        with self._lock:
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                from importlib.metadata import entry_points

                for ep in entry_points(group="inferframe.providers"):
                    self._load_one(ep)
            finally:
                self._loading = False
            if not self._providers:
                why = "; ".join(self._failed.values()) or "the package metadata is missing"
                raise RuntimeError(f"No inferframe provider is registered: {why}. "
                                   "Install inferframe with pip (pip install -e .) instead of running it from a copy.")
            # Only now: another thread reading ``_loaded`` without the lock must find every provider there.
            self._loaded = True

    def _load_one(self, ep: Any) -> None:
        """Run one entry point's hook; a failure drops what it registered and is kept to be told."""
        before = set(self._providers)
        try:
            ep.load()(self)
        except Exception as e:  # noqa: BLE001 - a broken plugin disables itself, never the others
            for name in set(self._providers) - before:
                del self._providers[name]
            self._failed[ep.name] = (f"the plugin {ep.name!r} (entry point {ep.name} = {ep.value}) failed to load: "
                                     f"{type(e).__name__}: {e}")

    def get(self, name: str) -> ProviderInfo:
        self._load()
        if name not in self._providers:
            if name in self._failed:
                raise PlanError(f"Provider {name!r} cannot be used: {self._failed[name]}. Fix or reinstall that "
                                "package; the other providers work.")
            known = ", ".join(sorted(self._providers))
            broken = "".join(f" Not loaded: {why}." for why in self._failed.values())
            raise PlanError(f"Unknown provider {name!r}. Known providers: {known}.{broken} "
                            "Install the provider's package or check the spelling.")
        return self._providers[name]

    def failed(self) -> dict[str, str]:
        """Plugins that failed to load: entry point name -> which plugin and why.

        Example:
            >>> REGISTRY.failed()
            {}
        """
        self._load()
        return dict(self._failed)

    def names(self) -> list[str]:
        self._load()
        return sorted(self._providers)

    def infos(self) -> list[ProviderInfo]:
        self._load()
        return list(self._providers.values())


REGISTRY = Registry()


def resolve(provider: str | ProviderSpec | None, *, default: ProviderSpec | None = None, model: str | None = None,
            base_url: str | None = None, api_key: str | None = None) -> ProviderSpec:
    """Pick the provider for one call.

    The argument, else ``default`` (``set_provider``), else a provider that serves ``model`` by
    name and has what it needs, else one whose key is in the environment, else the offline default.
    A name is checked when the spec is resolved (``resolved``), not here.
    """
    if isinstance(provider, ProviderSpec):
        spec = provider
    elif isinstance(provider, str):
        spec = default if default is not None and default.name == provider else ProviderSpec(provider)
    elif default is not None:
        spec = default
    else:
        spec = ProviderSpec(_auto_name(model))
    if base_url is not None:
        spec = dataclasses.replace(spec, base_url=base_url)
    if api_key is not None:
        spec = dataclasses.replace(spec, key_ref=secrets.put(api_key))
    return spec


def _auto_name(model: str | None) -> str:
    infos = REGISTRY.infos()
    for info in infos:
        if info.knows_model(model) and (not info.needs_key or _env_key(info)):
            return info.name
    for info in infos:
        if info.auto and _env_key(info):
            return info.name
    for info in infos:
        if info.offline_default:
            return info.name
    raise PlanError("No provider given and none can run here: pass provider=... or call inferframe.set_provider(...).")


def _env_key(info: ProviderInfo) -> str | None:
    return os.environ.get(info.key_env) if info.key_env else None


def api_key_for(spec: ProviderSpec, info: ProviderInfo | None = None) -> str | None:
    """The key for ``spec``: its handle's key, else the provider's environment variable."""
    return secrets.get(spec.key_ref) or _env_key(info or REGISTRY.get(spec.name))


def base_url_for(spec: ProviderSpec, info: ProviderInfo | None = None) -> str | None:
    info = info or REGISTRY.get(spec.name)
    if spec.base_url:
        return spec.base_url
    if info.base_url_env and os.environ.get(info.base_url_env):
        return os.environ[info.base_url_env]
    return info.default_base_url


def check_ready(spec: ProviderSpec, info: ProviderInfo | None = None) -> None:
    """Fail before any request when the provider cannot work (e.g. a hosted API with no key)."""
    info = info or REGISTRY.get(spec.name)
    default_url = (info.default_base_url or "").rstrip("/")
    if info.needs_key and not api_key_for(spec) and (not spec.base_url or spec.base_url.rstrip("/") == default_url):
        raise PlanError(
            f"Provider {spec.name!r} needs an API key: set {info.key_env or 'the key'} in the environment or call "
            f"inferframe.set_provider({spec.name!r}, api_key=...). For a local OpenAI-compatible server pass base_url=..."
        )


def provider_class(spec: ProviderSpec) -> type[Transport]:
    """The provider class behind ``spec`` (its wire format and capabilities, without building it)."""
    info = REGISTRY.get(spec.name)
    if info.cls is None:
        raise PlanError(f"Provider {spec.name!r} runs models in this process; it serves embed_text/embed_image, "
                        "not requests over an API.")
    return info.cls


def capabilities(spec: ProviderSpec, info: ProviderInfo | None = None) -> Capabilities:
    """What the provider behind ``spec`` declares (a plugin may refine it per spec)."""
    info = info or REGISTRY.get(spec.name)
    return interface.capabilities_for(info.cls, spec, info.capabilities) if info.cls is not None else info.capabilities


def resolved(spec: ProviderSpec, info: ProviderInfo | None = None) -> ProviderSpec:
    """``spec`` carrying its wire format and capabilities, looked up once here when the plan is built.

    The AI operators then use ``spec.wire_format()`` / ``spec.capabilities()`` and never the registry.

    Example:
        >>> spec = resolved(ProviderSpec("vllm"))
        >>> spec.wire.__name__, spec.caps.structured_outputs, spec == ProviderSpec("vllm")
        ('VLLMProvider', 'vllm', True)
    """
    info = info or REGISTRY.get(spec.name)
    return dataclasses.replace(spec, wire=info.cls, caps=capabilities(spec, info))


def build(spec: ProviderSpec) -> Transport:
    """A live provider for ``spec``, with its URL and key resolved in this process.

    The registry is read once here (for the URL and key variables); a resolved spec (``resolved``, what
    an expression holds) brings its wire format and capabilities, looked up when the plan was built.

    Example:
        >>> t = build(resolved(ProviderSpec("vllm", base_url="http://127.0.0.1:9/v1")))
        >>> type(t).__name__, t.capabilities.structured_outputs
        ('VLLMProvider', 'vllm')
    """
    info = REGISTRY.get(spec.name)
    if spec.wire is None or spec.caps is None:
        spec = resolved(spec, info)
    if info.cls is None:
        provider_class(spec)  # raises: this provider runs models in this process
    return spec.wire(spec, base_url=base_url_for(spec, info), api_key=api_key_for(spec, info), capabilities=spec.caps)


spec_lookups.update(resolve=resolved, build=build)
