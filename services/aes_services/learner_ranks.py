"""One rank of a learner launched by torchrun (``aes service learner --nproc N``).

Every rank joins the process group and the control group; rank 0 then runs the learner
service on the bus (it drives the others, ``aes_lib.learner.distributed.Ranks``), the
other ranks follow its commands. A rank that dies takes the group down: torchrun's agent
stops the rest and starts them all again (``--max-restarts``), and the service resumes
from its saved state as after any crash. A rank also dies with the agent, so a killed
launcher leaves no rank behind still consuming.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import torch.distributed as dist

from aes_lib.blobstore import open_store
from aes_lib.config import Settings
from aes_lib.learner import LearnerConfig
from aes_lib.learner.distributed import Ranks, die_with_parent, init_ranks
from aes_lib.learner.runtime import LearnerRuntime
from aes_services.learner import LearnerService


def run_rank(service_cls: type[LearnerService], settings: Settings, on_ready: Callable[[], None] | None) -> None:
    from aes_lib.bus import run_service
    from aes_lib.bus.runner import new_event_loop

    die_with_parent()
    init_ranks(LearnerConfig.from_env())
    ranks = Ranks()
    try:
        if dist.get_rank() == 0:
            service = service_cls()
            service.ranks = ranks
            try:
                with asyncio.Runner(loop_factory=new_event_loop) as runner:
                    runner.run(run_service(service, settings, on_ready=on_ready))
            finally:
                ranks.stop()
        else:
            ranks.follow(LearnerRuntime(open_store(settings.blob_location, settings)))
    finally:
        dist.destroy_process_group()
