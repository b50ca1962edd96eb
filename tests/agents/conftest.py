"""Shared by the proposer mode tests: the proposer service with one model URL in both its roles."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import pytest

from aes_services.proposer import ProposerService


@pytest.fixture
def proposer_service(bus) -> Callable[[str], Awaitable[ProposerService]]:
    """``await proposer_service(url)``: a set-up ProposerService on ``bus`` whose proposer and solver
    models are the server at ``url`` (a replay server: what it is asked is what the test checks)."""
    async def make(url: str) -> ProposerService:
        bus.settings = dataclasses.replace(bus.settings, model_url=url, model="replay", proposer_model_url=url,
                                           proposer_model="replay")
        svc = ProposerService()
        await svc.setup(bus)
        return svc

    return make
