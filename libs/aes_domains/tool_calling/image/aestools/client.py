"""``aes-call``: the solver's typed client of the task's service.

    aes-call list                       methods, their typed parameters and docs
    aes-call <method> '<json object>'   call with a JSON object of arguments
    aes-call <method> key=value ...     the same; each value is read as its parameter's type

Arguments are checked against the method's declared types before anything is sent.
Exit status: 0 done, 1 the service refused or failed the call, 2 a bad call (never sent),
3 the service does not answer.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

from aestools.service import ADDRESS
from aestools.types import ArgumentError, TypeSpec

URL = f"http://{ADDRESS[0]}:{ADDRESS[1]}"


class Unreachable(RuntimeError):
    pass


def request(path: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
    except (urllib.error.URLError, OSError) as e:
        raise Unreachable(f"the service at {URL} does not answer ({e}); it is started before your turn") from None


def methods() -> dict[str, dict]:
    status, body = request("/methods")
    if status != 200:
        raise Unreachable(f"the service answered {status} to its method list: {body}")
    return {m["name"]: m for m in body["methods"]}


def render(service: dict[str, dict]) -> str:
    lines = []
    for m in service.values():
        params = ", ".join(p["name"] + ": " + p["type"] + ("" if p["required"] else f" = {json.dumps(p['default'])}")
                           for p in m["params"])
        lines.append(f"{m['name']}({params})" + ("  [changes state]" if m["writes"] else ""))
        lines.extend("    " + line for line in m["doc"].splitlines())
    return "\n".join(lines)


def arguments(method: dict, words: list[str]) -> dict:
    """The call's arguments from the command line, checked against ``method``'s types."""
    name = method["name"]
    params = {p["name"]: p for p in method["params"]}
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        try:
            args = json.loads(words[0])
        except ValueError as e:
            raise ArgumentError(f"{name}: arguments are not a JSON object: {e}") from None
    else:
        args = {}
        for w in words:
            key, eq, text = w.partition("=")
            if not eq:
                raise ArgumentError(f"{name}: expected key=value or one JSON object, got {w!r}")
            if key not in params:
                raise ArgumentError(f"{name}: unexpected argument {key!r} (takes: {', '.join(params) or 'none'})")
            args[key] = TypeSpec(params[key]["type"]).parse(f"{name}: argument {key!r}", text)
    if not isinstance(args, dict):
        raise ArgumentError(f"{name}: arguments must be a JSON object")
    if unknown := sorted(set(args) - set(params)):
        raise ArgumentError(f"{name}: unexpected argument {unknown[0]!r} (takes: {', '.join(params) or 'none'})")
    for p in params.values():
        if p["name"] in args:
            TypeSpec(p["type"]).check(f"{name}: argument {p['name']!r}", args[p["name"]])
        elif p["required"]:
            raise ArgumentError(f"{name}: missing argument {p['name']!r} ({p['type']})")
    return args


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    try:
        service = methods()
        if argv[0] == "list":
            print(render(service))
            return 0
        if argv[0] not in service:
            raise ArgumentError(f"unknown method {argv[0]!r} (known: {', '.join(sorted(service))}; see aes-call list)")
        args = arguments(service[argv[0]], argv[1:])
        status, body = request(f"/call/{argv[0]}", args)
    except ArgumentError as e:
        print(f"aes-call: {e}", file=sys.stderr)
        return 2
    except Unreachable as e:
        print(f"aes-call: {e}", file=sys.stderr)
        return 3
    if status != 200:
        print(f"aes-call: {body.get('error', body)}", file=sys.stderr)
        return 1
    print(json.dumps(body["result"], indent=2, sort_keys=True))
    return 0
