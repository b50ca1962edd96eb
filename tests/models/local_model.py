"""Session fixture: the real SmolLM2 model served by xllamacpp in a child process."""

from __future__ import annotations

import pytest

from aes_lib.models.serve import spawn


@pytest.fixture(scope="session")
def local_model_url(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("model")
    with spawn(d / "url", d / "server.log") as url:
        yield url
