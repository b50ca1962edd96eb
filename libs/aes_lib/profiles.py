"""Model profiles: the harness's limits for a kind of model, set together (``[core] model_profile``).

A profile is the lowest layer of the settings (``aes_lib.config.sourced``): the config file, the
environment and ``--set`` override any of its values, and ``aes config show`` names the profile
as the source of each value it sets.

- ``small``: the embedded SmolLM2-135M on 2 cores. Short turns and a few exchanges of history,
  so an episode stays inside its 8192-token context and its time budget (the defaults).
- ``capable``: a hosted or large served model. No cap binds a normal episode: long turns, the
  whole history re-sent until the context is full (then the oldest observations are shortened
  first), a 128k context.

Where the server says its context window (vLLM's ``max_model_len`` in ``/v1/models``), the agent
loop cuts the history to the smaller of that and the profile's.
"""

from __future__ import annotations

from typing import Literal

ProfileName = Literal["small", "capable"]
SMALL_CONTEXT = 8192
CAPABLE_CONTEXT = 131072

PROFILES: dict[str, dict[str, dict[str, object]]] = {
    "small": {
        "flywheel": {"solver_max_tokens": 384, "solver_history_turns": 6, "solver_context_tokens": SMALL_CONTEXT},
        "training": {"max_tokens": 192, "history_turns": 6, "context_tokens": SMALL_CONTEXT},
        "proposer": {"max_tokens": 1024, "history_turns": 3, "context_tokens": SMALL_CONTEXT, "prompt_max_tokens": 2048},
    },
    "capable": {
        "flywheel": {"solver_max_tokens": 4096, "solver_history_turns": 0, "solver_context_tokens": CAPABLE_CONTEXT},
        "training": {"max_tokens": 4096, "history_turns": 0, "context_tokens": CAPABLE_CONTEXT},
        "proposer": {"max_tokens": 8192, "history_turns": 0, "context_tokens": CAPABLE_CONTEXT,
                     "prompt_max_tokens": 16384},
    },
}
"""Section -> setting -> value of each profile (settings of sections a profile does not name keep
their classes' defaults)."""
