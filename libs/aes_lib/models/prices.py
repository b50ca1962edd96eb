"""Cost of a model call: USD per one million tokens, looked up by model name."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


class UnknownModelPriceError(KeyError):
    """The price table has no entry for a model name."""


@dataclass(frozen=True)
class Price:
    """List price of one model."""

    input_per_m: float
    """USD per 1M prompt tokens."""
    output_per_m: float
    """USD per 1M completion tokens."""

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_m + completion_tokens * self.output_per_m) / 1e6


LOCAL = Price(0.0, 0.0)

DEFAULT_PRICES: dict[str, Price] = {
    # Served on our own hardware: no per-token charge.
    "smollm2-135m": LOCAL,
    "replay": LOCAL,
    # Public list prices of a few hosted models (USD / 1M tokens) for comparison runs;
    # extend or override with AES_MODEL_PRICES.
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4o": Price(2.50, 10.00),
}


class PriceTable:
    """Model name -> Price; an unknown name is an error, never a silent zero."""

    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self._prices = dict(DEFAULT_PRICES if prices is None else prices)

    def __getitem__(self, model: str) -> Price:
        try:
            return self._prices[model]
        except KeyError:
            raise UnknownModelPriceError(
                f"no price for model {model!r}; known: {sorted(self._prices)}; "
                "add it to the JSON file named by AES_MODEL_PRICES"
            ) from None

    def with_prices(self, extra: dict[str, Price]) -> "PriceTable":
        return PriceTable({**self._prices, **extra})

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        return self[model].cost(prompt_tokens, completion_tokens)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "PriceTable":
        """Defaults plus the JSON file ``{"model": [usd_in_per_m, usd_out_per_m]}`` at
        ``path`` (or ``$AES_MODEL_PRICES``) when one is given."""
        path = path or os.environ.get("AES_MODEL_PRICES")
        table = cls()
        if not path:
            return table
        raw = json.loads(Path(path).read_text())
        extra: dict[str, Price] = {}
        for name, pair in raw.items():
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, (int, float)) for x in pair)):
                raise ValueError(f"{path}: price of {name!r} must be [usd_in_per_m, usd_out_per_m], got {pair!r}")
            extra[name] = Price(float(pair[0]), float(pair[1]))
        return table.with_prices(extra)
