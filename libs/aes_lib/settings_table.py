"""The settings tables of docs/SETTINGS.md, one per config-file section, made from the settings classes.

``python -m aes_lib.settings_table`` prints the table as markdown; ``--write docs/SETTINGS.md``
replaces what lies between the ``settings:begin`` / ``settings:end`` marker comments
(``make settings-doc``). ``tests/foundation/test_settings.py`` fails when the two differ.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import sys
import textwrap
from pathlib import Path

from aes_lib.config import DOC_DEFAULT
from aes_lib.runconfig import REGISTRY

BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"


class SettingsDocError(ValueError):
    """A registered field without a docstring, or a page without the markers."""


def variables() -> dict[str, tuple[type, dataclasses.Field]]:
    """Variable name -> (class, field) over the registry."""
    return {f"{cls.env_prefix}{f.name.upper()}": (cls, f) for _, cls in REGISTRY for f in dataclasses.fields(cls)}


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the string literal after it in the class body (dataclasses drop them)."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    return {
        node.target.id: inspect.cleandoc(doc.value.value)
        for node, doc in zip(body, body[1:])
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)
    }


def env_text(value: object) -> str:
    """A default as it would be written in the environment."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _cell(text: str) -> str:
    # One markdown line: reST ``literals`` become `code`, pipes would end the cell.
    return " ".join(text.split()).replace("``", "`").replace("|", "\\|")


def _default(f: dataclasses.Field) -> str:
    if DOC_DEFAULT in f.metadata:
        return f"`{f.metadata[DOC_DEFAULT]}`"
    if f.default is dataclasses.MISSING:
        raise SettingsDocError(f"{f.name}: a computed default needs metadata {DOC_DEFAULT!r}")
    text = env_text(f.default)
    return f"`{text}`" if text else "empty"


def markdown() -> str:
    """The settings tables: per registered class (a config-file section), one row per field
    (key, variable, default, meaning)."""
    parts = []
    for heading, cls in REGISTRY:
        docs = field_docs(cls)
        rows = ["| key | variable | default | meaning |", "|---|---|---|---|"]
        for f in dataclasses.fields(cls):
            if f.name not in docs:
                raise SettingsDocError(f"{cls.__qualname__}.{f.name} has no docstring: the settings table needs one")
            rows.append(f"| `{f.name}` | `{cls.env_prefix}{f.name.upper()}` | {_default(f)} | {_cell(docs[f.name])} |")
        parts.append(f"**`[{cls.section}]`** {heading} (`{cls.__module__}.{cls.__qualname__}`)\n\n"
                     + "\n".join(rows))
    return "\n\n".join(parts)


def splice(text: str, table: str) -> str:
    """``text`` with what lies between the markers replaced by ``table``."""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if len(pattern.findall(text)) != 1:
        raise SettingsDocError(f"expected one {BEGIN} ... {END} block")
    return pattern.sub(lambda _: f"{BEGIN}\n{table}\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m aes_lib.settings_table", description=__doc__.splitlines()[0])
    p.add_argument("--write", type=Path, metavar="PAGE", help="replace the table between the markers in this file (docs/SETTINGS.md)")
    args = p.parse_args(argv)
    if args.write is None:
        print(markdown())
    else:
        args.write.write_text(splice(args.write.read_text(), markdown()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
