"""Encoding and decoding with errors that name the offending field."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from aes_proto.messages import MESSAGE_TYPES, Message

T = TypeVar("T", bound=Message)

_encoder = msgspec.msgpack.Encoder()
_decoders: dict[type, msgspec.msgpack.Decoder] = {}


class MessageError(ValueError):
    """A message that cannot be decoded: malformed bytes, a wrong type or version.

    ``str(err)`` names the field, e.g. ``Expected `int`, got `str` - at `$.revision```.
    """


def encode(msg: Message) -> bytes:
    return _encoder.encode(msg)


def decode(data: bytes, type_: type[T]) -> T:
    dec = _decoders.get(type_)
    if dec is None:
        dec = _decoders[type_] = msgspec.msgpack.Decoder(type_)
    try:
        return dec.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise MessageError(f"cannot decode {type_.__name__}: {e}") from e


def json_schemas() -> dict[str, Any]:
    """JSON Schema of every message, keyed by type name."""
    return {t.__name__: msgspec.json.schema(t) for t in MESSAGE_TYPES}
