"""Pushing a learner's checkpoint into a serving engine, and asking which version it serves.

``engine_client(kind, base_url)`` returns the adapter for the engine kind
(``AES_ENGINE``): ``torch`` is ``aes_lib.models.torch_serve``, which reads the
checkpoint itself (from the shared blob store, or the version's folder); ``vllm`` is a vLLM
server with its RL endpoints (``aes_lib.models.vllm_serve`` starts one), which loads a folder:
the one the trainer wrote, where the version names one (``PolicyVersion.folder``, the
filesystem transport of ``aes_lib.weights``: read in place), else one this client fetches
from the store and checks first; ``gguf`` (the bundled xllamacpp server) cannot take torch
weights, so it is refused here with that reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from aes_lib.checkpoints import check_folder, fetch_folder
from aes_lib.models.untie import untie
from aes_proto.messages import PolicyVersion

if TYPE_CHECKING:
    from aes_lib.config import Settings

ENGINES = ("vllm", "torch", "gguf")
"""Engine kinds ``AES_ENGINE`` may name."""
TRAINABLE = ("vllm", "torch")
"""Engine kinds that load the learner's weights (training needs one)."""


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
        where = {"folder": pv.folder} if pv.folder else {"checkpoint": {
            "key": pv.checkpoint.key, "sha256": pv.checkpoint.sha256, "size": pv.checkpoint.size}}
        data = await self._call("POST", {"version": pv.version, **where})
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


def weight_version(reported: object) -> int:
    """vLLM's weight version as ours: the string we set at each load, or ``default`` (vLLM's name
    for the weights it started from: the base, v0)."""
    if reported == "default":
        return 0
    try:
        return int(str(reported))
    except ValueError:
        raise EngineWeightsError(f"the engine serves weight version {reported!r}, not one weight sync set") from None


@dataclass
class VLLMEngineClient:
    """A vLLM server's RL endpoints (``VLLM_SERVER_DEV_MODE=1``).

    ``load`` fetches the version's folder (``aes_lib.checkpoints``) next to the engine and checks
    it before vLLM sees it (a bad load path kills vLLM's engine core), gives a tied output head a
    weight of its own (``untie``: vLLM's reload misses it), then: ``/pause?mode=wait``
    (running completions finish on the old weights, new ones queue: no completion mixes two
    versions), ``/collective_rpc reload_weights``, ``/reset_prefix_cache`` (cached prompt blocks
    hold the old weights' keys and values), ``/update_weight_version``, and ``/resume`` whatever
    happened. A folder that is not a checkpoint raises ``CheckpointFolderError`` (permanent);
    engine faults raise ``EngineWeightsError`` (transient)."""

    base_url: str
    settings: "Settings | None" = None
    """Where the blob store and the checkpoint folder are (needed by ``load`` only)."""
    timeout_s: float = 300.0
    keep: int = 2
    """Version folders kept per policy (the newest)."""
    _store: object = field(default=None, init=False, repr=False)

    @property
    def root(self) -> str:
        url = self.base_url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    async def version(self) -> int:
        return weight_version((await self._call("GET", "/weight_info")).get("weight_version"))

    async def load(self, pv: PolicyVersion) -> LoadResult:
        t0 = time.monotonic()
        served = await self.version()
        if pv.version <= served:
            return LoadResult(served, False, time.monotonic() - t0)
        folder = await asyncio.to_thread(self._folder, pv)
        async with httpx.AsyncClient(timeout=self.timeout_s) as http:  # one client: each costs a TLS setup
            await self._call("POST", "/pause", params={"mode": "wait"}, http=http)
            try:
                await self._call("POST", "/collective_rpc",
                                 {"method": "reload_weights", "kwargs": {"weights_path": str(folder)}}, http=http)
                await self._call("POST", "/reset_prefix_cache", http=http)
                await self._call("POST", "/update_weight_version", {"new_version": str(pv.version)}, http=http)
            except BaseException:
                with contextlib.suppress(EngineWeightsError):  # the load's own error is the one to report
                    await self._call("POST", "/resume", http=http)
                raise
            await self._call("POST", "/resume", http=http)
        return LoadResult(pv.version, True, time.monotonic() - t0)

    def _folder(self, pv: PolicyVersion) -> Path:
        """The version's folder: the trainer's own, checked (headers only), where the version names
        one; else under the checkpoint directory, fetched (or reused) and checked, older folders
        of the policy beyond ``keep`` removed."""
        if pv.folder:
            folder = Path(pv.folder)
            check_folder(folder)
            return untie(folder)  # a no-op: the filesystem transport writes heads untied for vLLM
        from aes_lib.blobstore import open_store
        from aes_lib.config import Settings

        settings = self.settings or Settings.from_env()
        if self._store is None:
            self._store = open_store(settings.blob_location, settings)
        base = Path(settings.vllm_checkpoint_dir or settings.home / "vllm" / "checkpoints") / pv.policy
        dest = fetch_folder(self._store, pv.checkpoint, base / f"v{pv.version:08d}")
        check_folder(dest)  # a reused folder too: it may have been touched since
        untie(dest)  # vLLM's reload leaves a tied output head on the old weights
        for old in sorted(p for p in base.glob("v*") if p.is_dir() and p.name < dest.name)[:-(self.keep - 1) or None]:
            shutil.rmtree(old, ignore_errors=True)
        return dest

    async def _call(self, method: str, path: str, body: dict | None = None, params: dict | None = None,
                    http: httpx.AsyncClient | None = None) -> dict:
        url = self.root + path
        try:
            if http is not None:
                r = await http.request(method, url, json=body, params=params)
            else:
                async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                    r = await client.request(method, url, json=body, params=params)
        except httpx.HTTPError as e:
            raise EngineWeightsError(f"{method} {url}: {type(e).__name__}: {e}") from e
        if r.status_code == 404:
            raise EngineWeightsError(f"{method} {url} -> 404: is it vLLM, started with VLLM_SERVER_DEV_MODE=1?")
        if r.status_code != 200:
            raise EngineWeightsError(f"{method} {url} -> HTTP {r.status_code}: {r.text[:300]}")
        try:
            data = r.json()
        except ValueError:
            data = None
        return data if isinstance(data, dict) else {}


EngineClient = TorchEngineClient | VLLMEngineClient


def engine_client(kind: str, base_url: str, settings: "Settings | None" = None) -> EngineClient:
    """The weights adapter of engine ``kind`` at ``base_url``; ``settings`` say where checkpoints
    are (vLLM loads from a local folder; the torch engine reads the blob store itself)."""
    if kind == "torch":
        return TorchEngineClient(base_url)
    if kind == "vllm":
        return VLLMEngineClient(base_url, settings)
    if kind == "gguf":
        raise StaticEngineError("the GGUF server (xllamacpp) cannot load the learner's torch weights: "
                                "serve the policy with AES_ENGINE=vllm or torch to train")
    raise StaticEngineError(f"AES_ENGINE must be one of {ENGINES}, got {kind!r}")
