"""The AI layer: operators that turn Arrow batches into requests and the answers back into columns.

Prompts (and classification, and cascades of classifiers), embeddings over APIs, the embedding
head and nearest examples, and media steps live here; each operator is built per run from an
``AICall`` resolved when the plan was built, and talks to the runtime, never to HTTP. The
user-facing functions that build these calls are in ``inferframe.functions``; the classes that run
in-process models are in ``inferframe.models``, and reach the operators here as the class the call's
``ModelRef.runner`` names (resolved by ``inferframe.models.registry.resolve_model``).
"""

from inferframe.ai.call import AICall, ModelRef, Sizing, sizing
from inferframe.ai.columns import ERROR_TYPE, USAGE_TYPE, result_type
from inferframe.ai.config import AICallConfig, EmbedCallConfig
from inferframe.ai.embed import EmbeddingOperator
from inferframe.ai.media import Downloader, ImageCodec, MediaConfig
from inferframe.ai.operator import AIOperator
from inferframe.ai.prompt import PromptOperator
from inferframe.ai.run import RunServices

__all__ = ["AICall", "AICallConfig", "AIOperator", "Downloader", "ERROR_TYPE", "EmbedCallConfig", "EmbeddingOperator",
           "ImageCodec", "MediaConfig", "ModelRef", "PromptOperator", "RunServices", "Sizing", "USAGE_TYPE",
           "result_type", "sizing"]
