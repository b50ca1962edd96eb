"""Pushing a learner's checkpoint into a serving engine, and asking which version it serves.

``engine_client(kind, base_url)`` returns the adapter for the engine kind
(``AES_ENGINE``): ``torch`` is ``aes_lib.models.torch_serve``, which reads the
checkpoint from the shared blob store itself; ``gguf`` (the bundled xllamacpp
server) cannot take torch weights, so it is refused here with that reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from aes_proto.messages import PolicyVersion

ENGINES = ("torch", "gguf")
"""Engine kinds ``AES_ENGINE`` may name."""


class EngineWeightsError(RuntimeError):
    """The engine could not be asked for, or could not load, a version (transient: retried)."""


class StaticEngineError(ValueError):
    """The configured engine cannot load new weights (training needs one that can)."""


@dataclass(frozen=True)
class LoadResult:
    version: int
    """The version served after the request."""
    loaded: bool
    """False when the engine already served this or a newer version."""
    seconds: float


@dataclass
class TorchEngineClient:
    """The torch engine's ``/v1/aes/policy`` endpoints."""

    base_url: str
    timeout_s: float = 300.0
    """A load reads and copies the whole checkpoint."""

    async def served(self) -> tuple[int, str]:
        """The version served and the model folder it started from."""
        data = await self._call("GET", None)
        return int(data["version"]), str(data.get("model", ""))

    async def version(self) -> int:
        return (await self.served())[0]

    async def load(self, pv: PolicyVersion) -> LoadResult:
        t0 = time.monotonic()
        data = await self._call("POST", {"version": pv.version, "checkpoint": {
            "key": pv.checkpoint.key, "sha256": pv.checkpoint.sha256, "size": pv.checkpoint.size}})
        return LoadResult(int(data["version"]), bool(data["loaded"]), time.monotonic() - t0)

    async def _call(self, method: str, body: dict | None) -> dict:
        url = self.base_url.rstrip("/") + "/aes/policy"
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                r = await client.request(method, url, json=body)
        except httpx.HTTPError as e:
            raise EngineWeightsError(f"{method} {url}: {type(e).__name__}: {e}") from e
        if r.status_code != 200:
            raise EngineWeightsError(f"{method} {url} -> HTTP {r.status_code}: {r.text[:300]}")
        try:
            data = r.json()
            int(data["version"])
        except (ValueError, TypeError, KeyError):
            raise EngineWeightsError(f"{method} {url}: not an engine's policy answer: {r.text[:300]}") from None
        return data


def engine_client(kind: str, base_url: str) -> TorchEngineClient:
    if kind == "torch":
        return TorchEngineClient(base_url)
    if kind == "gguf":
        raise StaticEngineError("the GGUF server (xllamacpp) cannot load the learner's torch weights: "
                                "serve the policy with AES_ENGINE=torch to train")
    raise StaticEngineError(f"AES_ENGINE must be one of {ENGINES}, got {kind!r}")
