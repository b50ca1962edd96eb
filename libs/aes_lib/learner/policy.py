"""Where a policy's versions live in the blob store (the store transport, ``aes_lib.weights``,
uploads each version's HF-format folder there; weight sync and ``aes policy export`` read it)."""

from __future__ import annotations


def version_prefix(prefix: str, version: int) -> str:
    return f"{prefix}/v{version:06d}"


def checkpoint_key(prefix: str, version: int) -> str:
    """Key of the manifest of ``version``'s folder (what ``PolicyVersion.checkpoint`` points at)."""
    return f"{version_prefix(prefix, version)}/manifest.json"
