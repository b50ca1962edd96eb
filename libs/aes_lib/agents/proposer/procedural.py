"""The procedural mode: a registered task family's next instance instead of a model's task.

The programmatic-pool baseline the paper compares against: no model call, no tokens, no
cost. The assignment's base is the candidate a revision starts from, else the parent; its
``[metadata.family]`` names the family and parameters, and the direction moves the
difficulty one step (``aes_lib.families.moves``). Without a parent the category names the
family (empty: the first registered one) at its easiest. The seed comes from the
assignment's key, so a redelivered assignment writes the same bundle (the same env id)
while parallel attempts and revisions get instances of their own.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import uuid
from pathlib import Path

from aes_lib import families
from aes_lib.agents.proposer.proposal import Proposal
from aes_lib.agents.trajectory import Trajectory, store_trajectory
from aes_lib.bundle import BundleError, PackedBundle, pack, unpack
from aes_proto.messages import Assignment

MODE = "procedural"
MODEL = "procedural"
"""What the candidate's ``proposer_model`` says: no model wrote it."""


def child_seed(a: Assignment) -> int:
    """A seed determined by the assignment's key (revisions and group attempts have their own)."""
    return int.from_bytes(hashlib.sha256(a.idempotency_key.encode()).digest()[:6], "big")


def base_instance(a: Assignment, store, tmp: Path) -> families.Instance:
    """The instance the assignment starts from (``FamilyError`` when there is none to read);
    ``parametric`` starts from it too."""
    ref = a.previous_bundle or a.parent_bundle
    if ref is None:
        name = a.lineage.category or families.names()[0]
        family = families.get(name)
        return families.Instance(family.name, families.Params(family.min_difficulty, 0))
    try:
        task = unpack(store.get_bytes(ref), tmp / "base")
    except BundleError as e:
        raise families.NotAFamilyInstanceError(f"the parent bundle does not unpack: {type(e).__name__}: {e}") from e
    return families.instance_of(task.config.metadata)


def write_child(family: families.Family, params: families.Params, tmp: Path) -> PackedBundle:
    """The instance ``params`` of ``family``, packed (written under ``tmp``)."""
    return pack(families.write_instance(family, params, tmp / "task"))


def _write(a: Assignment, store, tmp: Path, traj: Trajectory) -> PackedBundle:
    base = base_instance(a, store, tmp)
    family = families.get(base.family)
    params = families.moved(family, base.params, a.direction, child_seed(a), a.pass_rate)
    traj.instruction = (f"{family.name}: difficulty {base.params.difficulty} -> {params.difficulty} "
                        f"({a.direction}), seed {params.seed}")
    return write_child(family, params, tmp)


async def generate(a: Assignment, store) -> Proposal:
    """The next instance of the base's family for ``a``; a parent that no family wrote (or one
    naming an unknown family or bad parameters) is the failure ``not_procedural``."""
    traj = Trajectory(rollout_id=uuid.uuid4().hex, role="proposer", env_id=a.lineage.parent_env_id or "", model=MODEL)
    packed, failure = None, ""
    with tempfile.TemporaryDirectory(prefix="aes-procedural-") as tmp:
        try:
            packed = await asyncio.to_thread(_write, a, store, Path(tmp), traj)
            traj.stop_reason = "submitted"
        except families.FamilyError as e:
            failure, traj.stop_reason, traj.error = "not_procedural", "not_procedural", str(e)
    ref = await asyncio.to_thread(store_trajectory, store, traj)
    return Proposal(traj, ref, packed, failure=failure)
