"""The wire contract of AutoEnvScaling: message types and subject names.

Nothing but this package couples the services: each one decodes the messages it
consumes and encodes the ones it publishes with the types defined here.
"""

from aes_proto.codec import MessageError, decode, encode, json_schemas
from aes_proto.messages import *  # noqa: F403  (the message types are the public surface)
from aes_proto.messages import MESSAGE_TYPES, SCHEMA_VERSION

__all__ = ["MessageError", "decode", "encode", "json_schemas", "MESSAGE_TYPES", "SCHEMA_VERSION"]
