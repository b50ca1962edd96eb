"""The weight version that sampled a completion, as a response header of the completion itself.

Both engines put ``X-AES-Weight-Version`` on every completion: the torch engine from the
generation's own result, vLLM through ``WeightVersionHeader``, an ASGI middleware that
``vllm_serve`` passes to vLLM (``--middleware``). The chat client reads it from the response,
so a turn costs one HTTP call, not three (``/weight_info`` before and after).

Why one read in vLLM, at the request's arrival, is a safe label: weight sync changes weights
only between ``/pause?mode=wait`` and ``/resume``, and sets the version inside that window. A
request read at version ``v`` either was running when the pause came (the pause waits for it:
all of it is ``v``'s, the label is exact), or reaches the engine after the pause began (it
queues until the resume and is sampled by a newer version, labelled ``v``: older than its
sampler, never newer). Versions only grow, so the label is always a lower bound of the
sampler's version, exact unless a load landed between arrival and scheduling; the learner's
staleness filter only needs the bound. This module imports nothing outside the standard
library: vLLM's interpreter (its own venv) imports it.
"""

from __future__ import annotations

HEADER = "x-aes-weight-version"
"""Response header (lower case, as ASGI carries names) with the version that sampled the reply."""
COMPLETION_PATHS = ("/v1/chat/completions", "/v1/completions")


def served_version(reported: object) -> int | None:
    """Our version from vLLM's weight version string: ``default`` (the weights vLLM started
    from, the base) is 0; anything weight sync did not set is None (unknown)."""
    if reported == "default":
        return 0
    try:
        return None if reported is None else int(str(reported))
    except ValueError:
        return None


class WeightVersionHeader:
    """ASGI middleware for vLLM's OpenAI server: each completion's response carries the weight
    version vLLM served when the request arrived (see the module's docstring for why that
    label is safe). Reads it from the engine client vLLM keeps on the app's state."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http" or scope.get("path", "").rstrip("/") not in COMPLETION_PATHS:
            await self.app(scope, receive, send)
            return
        version = await scope["app"].state.engine_client.get_weight_version()
        value = str(version).encode()

        async def send_with_version(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (HEADER.encode(), value)]}
            await send(message)

        await self.app(scope, receive, send_with_version)
