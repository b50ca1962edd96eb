"""The wire contract: every message type round-trips; bad input names the field."""

from __future__ import annotations

import types
import typing

import msgspec
import pytest

from aes_proto import MESSAGE_TYPES, MessageError, decode, encode, json_schemas
from aes_proto.messages import UNKNOWN_VERSION, Assignment, BlobRef, Message
from aes_proto.records import RolloutOutcome
from aes_proto.trajectory import Trajectory, Turn, decode_trajectory, encode_trajectory, trajectory_key

REF = BlobRef(key="bundles/sha256/ab.tar.gz", sha256="ab" * 32, size=3)


def sample(tp: object, name: str) -> object:
    """A non-default value of type ``tp`` (so the round trip exercises every field)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return args[-1]
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)), name)
    if origin in (tuple, list):
        return origin([sample(args[0], name)])
    if origin is dict:
        return {sample(args[0], name): sample(args[1], name)}
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return build(tp)
    return {str: f"{name}-x", int: 7, float: 0.25, bool: True, bytes: b"\x00\xff"}[tp]  # type: ignore[index]


def build(cls: type[msgspec.Struct]) -> msgspec.Struct:
    hints = typing.get_type_hints(cls)
    values = {f: sample(hints[f], f) for f in cls.__struct_fields__ if f not in ("schema_version", "type")}
    return cls(**values)


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=lambda c: c.__name__)
def test_every_message_round_trips(cls: type[Message]) -> None:
    msg = build(cls)
    assert decode(encode(msg), cls) == msg
    assert msgspec.json.decode(msgspec.json.encode(msg), type=cls) == msg


def test_every_message_has_a_schema() -> None:
    schemas = json_schemas()
    assert set(schemas) == {t.__name__ for t in MESSAGE_TYPES}


def _lineage(**fields: object) -> dict[str, object]:
    return {"assignment_id": "a", **fields}


def _raw(**fields: object) -> bytes:
    base = {"type": "Assignment", "idempotency_key": "k", "episode_id": "e", "lineage": _lineage(), "direction": "new"}
    return msgspec.msgpack.encode({**base, **fields})


@pytest.mark.parametrize(
    "data,field",
    [
        (_raw(lineage=_lineage(revision="two")), "$.lineage.revision"),
        (_raw(direction="sideways"), "$.direction"),
        (_raw(surprise=1), "surprise"),
        (_raw(schema_version=2), "schema_version"),
        (_raw(type="CandidateEnv"), "type"),
        (_raw(lineage=_lineage(surprise=1)), "surprise"),
        (_raw(lineage=None), "$.lineage"),
    ],
    ids=["wrong-type", "bad-literal", "unknown-field", "wrong-version", "wrong-tag", "unknown-lineage-field",
         "null-lineage"],
)
def test_bad_message_raises_naming_the_field(data: bytes, field: str) -> None:
    with pytest.raises(MessageError, match="cannot decode Assignment") as err:
        decode(data, Assignment)
    assert field in str(err.value)


def test_truncated_bytes_raise_message_error() -> None:
    with pytest.raises(MessageError):
        decode(encode(build(Assignment))[:-3], Assignment)


STORED = (RolloutOutcome, Trajectory)
"""Contract types stored rather than sent: a KV record (msgpack) and the trajectory blob (JSON)."""


@pytest.mark.parametrize("cls", STORED, ids=lambda c: c.__name__)
def test_every_stored_record_round_trips(cls: type[msgspec.Struct]) -> None:
    rec = build(cls)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(rec), type=cls) == rec
    assert msgspec.json.decode(msgspec.json.encode(rec), type=cls) == rec


def test_a_trajectory_round_trips_through_its_blob_encoding() -> None:
    traj = Trajectory(rollout_id="r", role="solver", turns=[build(Turn)], metrics={"asks": 2.0})
    assert decode_trajectory(encode_trajectory(traj)) == traj
    assert trajectory_key("solver", "r", "ab" * 32) == "trajectories/solver/r/" + "ab" * 8 + ".json"


def test_a_trajectory_blob_stored_before_the_move_still_decodes() -> None:
    """Bytes as ``aes_lib.agents.trajectory`` wrote them (field names unchanged by the move)."""
    old = (b'{"rollout_id":"w-g0-1","role":"solver","env_id":"e","model":"m","instruction":"do",'
           b'"messages":[{"role":"user","content":"do"}],"turns":[{"index":0,"reply":"r","command":"ls",'
           b'"output":"","exit_code":0,"timed_out":false,"format_error":false,"tool":false,'
           b'"prompt_token_ids":[1,2],"completion_token_ids":[3],"completion_logprobs":[-0.5],'
           b'"prompt_tokens":2,"completion_tokens":1,"model_seconds":0.1,"exec_seconds":0.2,'
           b'"temperature":0.7,"policy_version":3}],"stop_reason":"done","reward":1.0,"verifier_output":"ok",'
           b'"format_errors":0,"prompt_tokens":2,"completion_tokens":1,"cost_usd":0.0,"started_at":1.0,'
           b'"agent_seconds":2.0,"verifier_seconds":3.0,"error":"","metrics":{"asks":1.0}}')
    traj = decode_trajectory(old)
    assert (traj.policy_version, traj.n_tokens, traj.turns[0].temperature, traj.metrics) == (3, 1, 0.7, {"asks": 1.0})


def test_an_outcome_recorded_before_it_carried_the_summary_decodes_as_unknown() -> None:
    """A KV record of the five fields outcomes had: it decodes, its version is unknown (never
    trained on as fresh) and without a rollout id (``runners.rollouts.cached`` runs it again)."""
    old = msgspec.msgpack.encode({"reward": 1.0, "trajectory": msgspec.to_builtins(REF), "failure": "",
                                  "n_turns": 2, "seconds": 1.5})
    out = msgspec.msgpack.decode(old, type=RolloutOutcome)
    assert (out.reward, out.trajectory, out.n_turns) == (1.0, REF, 2)
    assert (out.rollout_id, out.policy_version) == ("", UNKNOWN_VERSION)
