"""The embedded default: Gemma 3 270M served by a llama.cpp server this library starts itself."""

from __future__ import annotations

from inferframe.providers.base import ProviderSpec
from inferframe.providers.openai import OpenAIProvider

DEFAULT_MODEL = "gemma-3-270m"


class LocalProvider(OpenAIProvider):
    """OpenAI-compatible calls to the process-wide local llama.cpp server (started on first use).

    Parameters:
        spec: options ``parallel`` (server slots) and ``timeout``.
    """

    is_local = True
    supports_batch = False  # llama.cpp serves no Batch API

    def __init__(self, spec: ProviderSpec) -> None:
        from inferframe.providers.local_server import get_local_server

        server = get_local_server(spec.option("parallel"))
        super().__init__(ProviderSpec(spec.name, server.base_url, spec.options))
        self.service = f"the local model server at {self.base_url}"
        # The port changes every run; the answers depend on the model file, not on where it is served.
        self.cache_identity = f"local:{server.model}"
        self.n_parallel = server.n_parallel

    async def tokenize(self, text: str) -> list[bytes]:
        """The model's tokens of ``text``, each as its bytes (llama.cpp's /tokenize), for exact chunking.

        Special tokens the server adds around an input (BOS) are not included.
        """
        session = await self._client()
        root = self.base_url.removesuffix("/v1")
        async with session.post(root + "/tokenize", json={"content": text, "with_pieces": True}) as resp:
            resp.raise_for_status()
            tokens = (await resp.json())["tokens"]
        # A piece that is part of a UTF-8 character comes as a list of byte values.
        return [t["piece"].encode() if isinstance(t["piece"], str) else bytes(t["piece"]) for t in tokens]


def register(registry) -> None:
    """Entry-point hook: the embedded local provider."""
    import os

    from inferframe.providers.local_server import DEFAULT_N_PARALLEL

    # As many requests in flight as the server has slots: more only queue inside llama.cpp.
    slots = int(os.environ.get("INFERFRAME_LOCAL_PARALLEL") or DEFAULT_N_PARALLEL)
    registry.register("local", LocalProvider, default_model=DEFAULT_MODEL, default_concurrency=slots)
