"""``aes proto schema``: print the JSON Schema of every wire message."""

from __future__ import annotations

import argparse
import json

from aes_proto import json_schemas


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(json_schemas(), indent=2, sort_keys=True))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("proto", help="the wire contract")
    psub = p.add_subparsers(dest="proto_command", required=True)
    psub.add_parser("schema", help="print the JSON Schema of every message").set_defaults(func=_schema)
