"""The embedded default: Gemma 3 270M served by a llama.cpp server this library starts itself.

Example:
    >>> LocalProvider.knows_model("gemma-3-270m"), LocalProvider.embedding_size("gemma-3-270m")
    (True, 640)
"""

from __future__ import annotations

import dataclasses
import os
from types import MappingProxyType

from inferframe.errors import PlanError
from inferframe.providers.gbnf import json_schema_to_gbnf
from inferframe.structured.answer_budget import answer_token_bound
from inferframe.providers.interface import LLAMA_CPP_BODY_OPTIONS, Capabilities, Outcome, OutputCap, Request
from inferframe.providers.local_server import DEFAULT_CTX_PER_SLOT, DEFAULT_N_PARALLEL
from inferframe.providers.openai import LlamaCppProvider
from inferframe.providers.spec import ProviderSpec

DEFAULT_MODEL = "gemma-3-270m"
# The names of a cap a body may carry from extra_body= (the call's own cap is the request's max_output_tokens).
_BODY_CAPS = frozenset({"max_tokens", "max_output_tokens", "max_completion_tokens", "n_predict"})
EMBEDDING_SIZE = 640  # Gemma 3 270M's hidden size: its mean-pooled vectors
# llama.cpp embeds an input in one physical batch (--ubatch-size, 512 by default), BOS included;
# measured: 537 text tokens give HTTP 500 "input (538 tokens) is too large to process".
MAX_INPUT_TOKENS = 512
# The server embeds n_parallel inputs at a time on the CPU (measured 5-12 short inputs/s on a busy
# 2-core machine): small requests keep every request well inside the HTTP timeout.
MAX_BATCH_INPUTS = 8
# DRY ("don't repeat yourself") sampling for structured answers: a token that would continue a
# sequence already seen (in the prompt or the answer) longer than dry_allowed_length tokens is
# penalised by dry_multiplier * dry_base ** (length - allowed), so a loop (a summary repeating its
# sentence) is broken within a few tokens; '"' and ':' reset the count, so a JSON key or a short
# label copied from the prompt costs nothing. Greedy decoding (temperature 0) applies it too.
# llama.cpp's repeat_penalty is not used: it penalises every recent token, digits and labels too.
ANTI_REPETITION = MappingProxyType({"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": 256})


class LocalProvider(LlamaCppProvider):
    """OpenAI-compatible calls to the process-wide local llama.cpp server (started on first use).

    A slot that still holds an earlier prompt reuses its shared start: the server reports those
    tokens as ``usage.prompt_tokens_details.cached_tokens`` (and ``timings.cache_n``), part of
    ``prompt_tokens`` as on OpenAI, so ``Usage.cached_tokens`` counts them (``parse_chat``);
    they cost nothing here, as every local token.

    Parameters:
        spec: options ``parallel`` (server slots) and ``timeout``.
    """

    capabilities = Capabilities(
        default_endpoint="chat", structured_outputs="grammar", batch_api=False, tokenizer=True, local=True,
        default_concurrency=DEFAULT_N_PARALLEL, default_model=DEFAULT_MODEL, default_embedding_model=DEFAULT_MODEL,
        embedding_max_input_tokens=MAX_INPUT_TOKENS, embedding_max_batch_inputs=MAX_BATCH_INPUTS, logprobs="tokens",
        vision=False,  # Gemma 3 270M reads text only (the server runs without an image projector)
        context_tokens=DEFAULT_CTX_PER_SLOT,  # each request runs in one slot of the embedded server
        body_options=LLAMA_CPP_BODY_OPTIONS,
    )

    def __init__(self, spec: ProviderSpec, *, base_url: str | None = None, api_key: str | None = None,
                 capabilities: Capabilities | None = None) -> None:
        from inferframe.providers.local_server import get_local_server

        server = get_local_server(spec.option("parallel"))
        super().__init__(spec, base_url=server.base_url, capabilities=capabilities)
        self.service = f"the local model server at {self.base_url}"
        # The port changes every run; the answers depend on the model file, not on where it is served.
        self.cache_identity = f"local:{server.model}"
        self.n_parallel = server.n_parallel

    async def prefix_lanes(self) -> int | None:
        return self.n_parallel

    @classmethod
    def knows_model(cls, model: str) -> bool:
        return model.startswith(DEFAULT_MODEL)

    @classmethod
    def context_size(cls, model: str | None, caps: Capabilities) -> int | None:
        # ModelCatalog is asked whole (``supports``): the embedded model's window is the declared one.
        return caps.context_tokens

    @classmethod
    def reads_images(cls, model: str | None, caps: Capabilities) -> bool | None:
        return caps.vision

    @classmethod
    def embedding_size(cls, model: str) -> int | None:
        return EMBEDDING_SIZE if model.startswith(DEFAULT_MODEL) else None

    @classmethod
    def check_options(cls, fn: str, endpoint: str, model: str | None, caps: Capabilities, options: dict,
                      cap: OutputCap | None) -> None:
        """Refuse an answer cap that one slot of the embedded server cannot hold (its ``--ctx-size`` / ``--parallel``).

        Known without starting the server: it gets ``DEFAULT_CTX_PER_SLOT`` tokens per slot, one cache
        its slots share (``--kv-unified``; ``/slots`` reports the whole of it for each), and a job keeps
        every slot busy, so each request in flight has one slot's share. Beyond it a base model writes
        until the cache is full, minutes a row on a CPU, and the cap never applies.

        Example:
            >>> LocalProvider.check_options("prompt", "chat", None, LocalProvider.capabilities, {},
            ...                            OutputCap("max_tokens", 10**6))
            Traceback (most recent call last):
            ...
            inferframe.errors.PlanError: prompt(): max_tokens=1000000 does not fit the embedded model: its llama.cpp server shares 16,384 tokens of context among its 8 slots, 2,048 tokens a slot for each request in flight, prompt and answer together. Use max_tokens below 2,048 less the prompt's tokens, e.g. max_tokens=512 (a short answer needs far fewer).
        """
        slot = caps.context_tokens or DEFAULT_CTX_PER_SLOT
        if cap is None or cap.tokens < slot:
            return
        name, tokens = cap
        slots = caps.default_concurrency  # one request in flight per slot (``register``)
        raise PlanError(f"{fn}(): {name}={tokens} does not fit the embedded model: its llama.cpp server shares "
                        f"{slots * slot:,} tokens of context among its {slots} slots, {slot:,} tokens a slot for each "
                        f"request in flight, prompt and answer together. Use {name} below {slot:,} less the prompt's "
                        "tokens, e.g. max_tokens=512 (a short answer needs far fewer).")

    @classmethod
    def embedding_max_input_tokens(cls, model: str) -> int | None:
        return MAX_INPUT_TOKENS

    @classmethod
    def format_fields(cls, caps: Capabilities, endpoint: str, name: str, schema: dict, labels) -> dict:
        """A compact grammar of ``schema`` (its free-text strings bounded) and DRY sampling (``ANTI_REPETITION``).

        A request option of the same name (e.g. ``dry_multiplier=0``) replaces the field.

        Example:
            >>> f = LocalProvider.format_fields(LocalProvider.capabilities, "chat", "R", {"type": "string"}, None)
            >>> print(f["grammar"].splitlines()[0], f["dry_multiplier"])
            root ::= "\\"" char{1,300} "\\"" 0.8
        """
        if labels is not None:
            # A grammar of the bare labels makes the first token start a label.
            return {"grammar": "root ::= " + " | ".join(_gbnf_literal(c) for c in labels)}
        # llama.cpp's own schema grammar lets a base model pad with whitespace until max_tokens:
        # ours admits compact JSON only.
        return {"grammar": json_schema_to_gbnf(schema), **ANTI_REPETITION}

    @classmethod
    def default_max_tokens(cls, schema: dict | None) -> int | None:
        """A structured answer's cap when the user sets none: 1.5x a full compact answer, from 64 to 2048; free text: per request (``send``).

        Without it a small base model can write one list until the context is full; a string ends
        at its bound in the grammar, within this budget.

        Example:
            >>> LocalProvider.default_max_tokens(None), LocalProvider.default_max_tokens({"type": "integer"})
            (None, 64)
        """
        if schema is None:
            return None
        return max(64, min(2048, int(1.5 * answer_token_bound(schema))))

    async def send(self, request: Request) -> Outcome:
        """Send ``request``; a chat request with no output cap gets ``free_text_cap`` of its prompt first.

        The bound and the prompt are the request's own fields; the body is looked at only for a cap
        given in ``extra_body=``.
        """
        if (request.max_output_tokens is None and request.endpoint in ("chat", "responses")
                and not _BODY_CAPS & request.body.keys()):
            prompt = request.prompt if request.prompt is not None else self.prompt_text(request.endpoint, request.body)
            cap = free_text_cap(len(prompt or ""))
            request = Request(request.endpoint, {**request.body, "max_tokens": cap}, request.est_tokens,
                              request.prompt, cap)
        return answer_text(request.endpoint, await super().send(request))

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


def free_text_cap(prompt_chars: int, context: int = DEFAULT_CTX_PER_SLOT) -> int:
    """The output cap of a free-text answer the user set no max_tokens for: twice its prompt, 64 to 512 tokens, within the slot.

    llama-server's own default is no cap (``n_predict -1``): a base model asked for five words
    writes until its slot's context is full, minutes per row on a CPU. The prompt's tokens are
    counted at 3 characters a token; an answer rarely needs more than twice its prompt, a short
    prompt still gets 64 tokens (about 48 words), and no answer gets more than 512 or what the
    slot's context leaves. Reaching the cap keeps the text, with ``finish_reason='length'`` and a
    ``TruncatedWarning``, as on hosted models; ``max_tokens=`` sets it.

    Example:
        >>> free_text_cap(60), free_text_cap(600), free_text_cap(1_200), free_text_cap(5_700)
        (64, 400, 512, 148)
    """
    tokens = prompt_chars // 3
    return max(1, min(max(64, 2 * tokens), 512, context - tokens))


def answer_text(endpoint: str, outcome: Outcome) -> Outcome:
    """A text answer of the embedded model without the whitespace it starts with.

    Gemma 3 270M is a base model: it continues the prompt, and after ``Sentiment:`` the next token
    is `` negative``, space included, which is the prompt's spacing, not the answer. Only this
    provider strips: an OpenAI-compatible server's answer is the user's model's own text and is
    kept as the server sent it (as the OpenAI SDK and the peers keep it), since leading whitespace
    can be meaningful there (indented code, a continued sentence); ``col(...).str.strip()`` or the
    CLI's ``--strip`` trims it.

    Example:
        >>> answer_text("chat", Outcome(value=" negative", finish_reason="stop")).value
        'negative'
        >>> answer_text("completion", Outcome(value=" kept")).value
        ' kept'
    """
    value = outcome.value
    if endpoint in ("chat", "responses") and isinstance(value, str) and value[:1].isspace():
        return dataclasses.replace(outcome, value=value.lstrip())
    return outcome


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def register(registry) -> None:
    """Entry-point hook: the embedded local provider, the default when no key is set."""
    # As many requests in flight as the server has slots: more only queue inside llama.cpp.
    slots = int(os.environ.get("INFERFRAME_LOCAL_PARALLEL") or DEFAULT_N_PARALLEL)
    registry.register("local", LocalProvider, offline_default=True,
                      capabilities=dataclasses.replace(LocalProvider.capabilities, default_concurrency=slots))
