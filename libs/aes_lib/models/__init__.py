"""Model backends: an OpenAI-compatible chat client that records token ids and
log-probs, a price table, and the local SmolLM2 server (``serve.py``)."""

from aes_lib.models.client import (
    ChatClient,
    ChatTurn,
    ModelAuthError,
    ModelError,
    ModelRequestError,
    ModelResponseError,
    ModelUnavailableError,
    RetryPolicy,
    Usage,
)
from aes_lib.models.endpoints import chat_client
from aes_lib.models.prices import Price, PriceTable, UnknownModelPriceError, usd

__all__ = [
    "ChatClient",
    "ChatTurn",
    "ModelAuthError",
    "ModelError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelUnavailableError",
    "Price",
    "PriceTable",
    "RetryPolicy",
    "UnknownModelPriceError",
    "Usage",
    "chat_client",
    "usd",
]
