"""The one place a model client is built from settings: endpoint, model, key, prices, token-id mode, timeout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aes_lib.models.client import ChatClient
from aes_lib.models.prices import PriceTable

if TYPE_CHECKING:
    from aes_lib.config import Settings

_TOKEN_IDS = {"auto": None, "on": True, "off": False}


def chat_client(settings: "Settings", role: str = "solver", *, url: str = "", model: str = "",
                api_key: str = "") -> ChatClient:
    """A client for ``role``'s endpoint (``url``, ``model`` and ``api_key`` override the settings')."""
    default_url, default_model, key = settings.endpoint(role)
    if settings.vllm_token_ids not in _TOKEN_IDS:
        raise ValueError(f"AES_VLLM_TOKEN_IDS: expected auto, on or off, got {settings.vllm_token_ids!r}")
    if not settings.model_timeout_s > 0:
        raise ValueError(f"AES_MODEL_TIMEOUT_S: expected seconds > 0, got {settings.model_timeout_s!r}")
    return ChatClient(url or default_url, model or default_model, api_key=api_key or key, timeout_s=settings.model_timeout_s,
                      prices=PriceTable.load(settings.model_prices),
                      vllm_token_ids=_TOKEN_IDS[settings.vllm_token_ids])
