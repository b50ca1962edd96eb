"""The wire contract: every message type round-trips; bad input names the field."""

from __future__ import annotations

import types
import typing

import msgspec
import pytest

from aes_proto import MESSAGE_TYPES, MessageError, decode, encode, json_schemas
from aes_proto.messages import Assignment, BlobRef, Message

REF = BlobRef(key="bundles/sha256/ab.tar.gz", sha256="ab" * 32, size=3)


def sample(tp: object, name: str) -> object:
    """A non-default value of type ``tp`` (so the round trip exercises every field)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return args[-1]
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)), name)
    if origin is tuple:
        return (sample(args[0], name),)
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
