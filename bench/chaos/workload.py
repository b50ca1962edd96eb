"""The chaos suite's candidates: N distinct tasks from one small template (one shared
``environment/``, so the validator's image cache makes builds cheap; the instruction varies, so
every env_id differs): some garbage bundles, most copying a registered held-out instruction,
some that pass the gates and are calibrated."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import random
from pathlib import Path

from aes_proto.messages import CandidateEnv, Lineage

from chaos.stack import ROUTE

HELDOUT = (
    "Write a bash script that rotates the nginx access logs every night, compresses the old ones "
    "with gzip and keeps exactly fourteen days of history in /var/log/nginx/archive, then reports "
    "how many archives were removed on standard output."
)
WORDS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
         "kelp", "lumen", "marble", "nectar", "onyx", "pewter", "quartz", "russet", "sable", "tundra")

TASK_TOML = """schema_version = "1.4"

[task]
name = "aes-chaos/{name}"
description = "Chaos-suite candidate."

[agent]
timeout_sec = 60.0

[verifier]
timeout_sec = 60.0

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 256
allow_internet = false
"""
DOCKERFILE = "FROM aes-base:latest\nWORKDIR /app\n"
"""Shared by every candidate: one image build serves them all."""
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "{word}" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""
SOLVE_SH = "#!/bin/bash\nprintf '%s\\n' {word} > /app/answer.txt\n"


@dataclasses.dataclass
class Candidate:
    index: int
    kind: str
    """``invalid`` (garbage bundle), ``contaminated`` (copies the held-out text), ``pass`` (reaches calibrate)."""
    msg: CandidateEnv

    @property
    def expected(self) -> str:
        return {"invalid": "rejected@validate:invalid_bundle", "contaminated": "rejected@contamination:contaminated",
                "pass": "too_hard@calibrate"}[self.kind]


def kinds_for(n: int, invalid_frac: float, pass_frac: float, rng: random.Random) -> list[str]:
    n_invalid = max(1, round(n * invalid_frac)) if n >= 3 else 0
    n_pass = max(1, round(n * pass_frac))
    kinds = ["invalid"] * n_invalid + ["pass"] * n_pass
    kinds += ["contaminated"] * (n - len(kinds))
    rng.shuffle(kinds)
    return kinds


def write_task(d: Path, i: int, kind: str, run: str) -> None:
    word = f"{WORDS[i % len(WORDS)]}{i}"
    for sub in ("environment", "solution", "tests"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text(TASK_TOML.format(name=f"c{i:04d}"))
    (d / "environment" / "Dockerfile").write_text(DOCKERFILE)
    text = (f"Candidate {i} of chaos run {run}. Create the file `/app/answer.txt` whose only line is the word "
            f"`{word}`.\n")
    if kind == "contaminated":
        text += f"\nBackground, as seen elsewhere: {HELDOUT}\n"
    (d / "instruction.md").write_text(text)
    (d / "solution" / "solve.sh").write_text(SOLVE_SH.format(word=word))
    (d / "tests" / "test.sh").write_text(TEST_SH.format(word=word))


def build_candidates(settings, n: int, args: argparse.Namespace, work: Path, run: str) -> list[Candidate]:
    from aes_lib.blobstore import open_store
    from aes_lib.bundle import pack

    blobs = open_store(settings.blob_location, settings)
    rng = random.Random(args.seed)
    out = []
    for i, kind in enumerate(kinds_for(n, args.invalid_frac, args.pass_frac, rng)):
        if kind == "invalid":
            data = b"chaos garbage %d " % i + rng.randbytes(200)
            sha = hashlib.sha256(data).hexdigest()
        else:
            d = work / f"c{i:04d}"
            write_task(d, i, kind, run)
            packed = pack(d)
            data, sha = packed.data, packed.sha256
        ref = blobs.put_content("bundles", data, ".tar.gz")
        key = f"chaos-{run}-{i:04d}"
        out.append(Candidate(i, kind, CandidateEnv(
            idempotency_key=key, episode_id=key, env_id=sha, bundle=ref, route=ROUTE,
            lineage=Lineage(assignment_id=f"chaos-{run}-a{i:04d}", category="chaos", mode="prompt"))))
    return out


async def register_heldout(settings) -> None:
    from aes_lib.blobstore import open_store
    from aes_lib.bus import Bus
    from aes_lib.contamination import KV_BUCKET, HeldoutTask, NgramIndex, register, save_index

    index = NgramIndex.build([HeldoutTask("chaos/nginx-logrotate", HELDOUT)])
    ref = save_index(open_store(settings.blob_location, settings), index)
    bus = await Bus.connect(settings, name="chaos-setup")
    async with bus:
        await register(await bus.kv(KV_BUCKET), ref)
