"""What root's steps in the verifier's container run with: nothing there resolves, loads or
configures itself from the agent's results (docs/SECURITY.md, "environment" and "configuration").

- ``environment``: the image's variables (and the task's ``[verifier.env]``), less every one that
  names a result path or loads code (``LD_*``, ``PYTHON*``, ...), with a ``PATH`` of the image's
  absolute folders outside the result paths behind the harness's own ``/aes/bin``;
- ``shims``: in ``/aes/bin``, the tools that run programs their configuration names (git's
  filters and signing program, a Makefile's recipes, npm's scripts, pip's builds). Root running
  one working in a folder inside the result paths (its tree option's, ``TREE_OPTIONS``, or with
  none, its working folder), or with any argument or option's value naming a path there, runs it
  as nobody without capabilities, so the agent's configuration never runs as root.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Mapping

JUDGE_BIN = "/aes/bin"
"""The harness's folder first on root's PATH in the verifier's container."""
SHIMMED = ("git", "make", "gmake", "npm", "npx", "yarn", "pnpm", "pip", "pip3", "cargo")
"""Tools whose configuration, in the tree they work on, names programs they run."""
_LOADERS = ("LD_", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX",
            "PERL5LIB", "PERLLIB", "PERL5OPT", "RUBYLIB", "RUBYOPT", "NODE_PATH", "NODE_OPTIONS", "GCONV_PATH",
            "LOCPATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PROMPT_COMMAND", "CDPATH", "PS4", "GIT_DIR",
            "GIT_WORK_TREE", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_EXEC_PATH",
            "GIT_TEMPLATE_DIR", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "GIT_PAGER",
            "GIT_EDITOR", "GIT_PROXY_COMMAND", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS")
"""Variables that name code or configuration a process loads on its own."""
_SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TREE_OPTIONS = {"git": ("-C",), "make": ("-C", "--directory"), "gmake": ("-C", "--directory"),
                "npm": ("--prefix", "-C"), "npx": ("--prefix",), "yarn": ("--cwd",), "pnpm": ("-C", "--dir")}
"""Each tool's options naming the folder it works in, in place of its working folder (pip and cargo
read configuration there whatever they are given)."""


def _names_result(value: str, roots: Iterable[str]) -> bool:
    """Whether any absolute path in ``value`` (split on ``:``, ``=``, ``;``, ``,`` and spaces) lies in a root."""
    for sep in ":=;, ":
        value = value.replace(sep, "\0")
    parts = [posixpath.normpath(p) for p in value.split("\0") if p.startswith("/")]
    return any(p == r or p.startswith(r.rstrip("/") + "/") for p in parts for r in roots)


def _unsafe(name: str, value: str, roots: list[str], from_task: bool) -> bool:
    """A loader's variable naming a result path or anything relative (root's working folder is
    the task's, a result path); any other of the image's naming a result path. The task's own
    ``[verifier.env]`` is the task author's data (``APP=/app``), not the agent's."""
    if name.startswith(_LOADERS):
        return _names_result(value, roots) or any(p and not p.startswith("/") for p in value.split(":"))
    return not from_task and _names_result(value, roots)


def environment(image_env: Iterable[str], task_env: Mapping[str, str], roots: list[str],
                fixed: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Root's variables for test.sh and the names to unset before it (an exec can only override
    the image's variables, so each one dropped is set empty there and then unset). ``fixed``:
    the harness's own (``VERIFIER_ENV``), kept whatever their names."""
    image = dict(kv.split("=", 1) for kv in image_env if "=" in kv)
    env, dropped = {}, []
    for name, value in {**image, **task_env}.items():
        if name == "PATH" or name in fixed:
            continue
        if _unsafe(name, value, roots, from_task=name in task_env):
            dropped.append(name)
        else:
            env[name] = value
    folders = [d for d in image.get("PATH", _SAFE_PATH).split(":")
               if d.startswith("/") and d != JUDGE_BIN and not _names_result(d, roots)]
    env["PATH"] = ":".join([JUDGE_BIN, *dict.fromkeys(folders)])
    if "HOME" in dropped or "HOME" not in env:
        env["HOME"] = "/root"
        dropped = [n for n in dropped if n != "HOME"]
    return {**env, **{n: "" for n in dropped}, **fixed}, dropped


def shim(tool: str, roots: list[str]) -> str:
    """``/aes/bin/<tool>``: the real tool (the next on PATH), as nobody over the agent's trees."""
    cases = "|".join(f"{shlex.quote(r)}|{shlex.quote(r.rstrip('/'))}/*" for r in roots) or "/nonexistent-root"
    options = TREE_OPTIONS.get(tool, ())
    longs, shorts = "|".join(f"{o}=*" for o in options if o[1] == "-"), "|".join(f"{o}?*" for o in options if o[1] != "-")
    tree_case = "".join([f"\n  case $a in {'|'.join(options)}) value=1;; esac" if options else "",
                         f'\n  case $a in {longs}) into "${{a#*=}}";; esac' if longs else "",
                         f'\n  case $a in {shorts}) into "${{a#-?}}";; esac' if shorts else ""])
    return f"""#!/bin/sh
# The harness's {tool} for root (aes_lib.sandbox.root_env): over the agent's results, as nobody.
real=
IFS=:
for d in $PATH; do [ "$d" != {JUDGE_BIN} ] && [ -x "$d/{tool}" ] && {{ real=$d/{tool}; break; }}; done
unset IFS
[ -n "$real" ] || {{ echo "{tool}: not found" >&2; exit 127; }}
[ "$(id -u)" = 0 ] || exec "$real" "$@"
# Where it works: the last tree option's value (relative ones from the folder before), else here.
base=$(pwd -P) value=0
into() {{ case $1 in /*) base=$1;; *) base=${{base%/}}/$1;; esac; }}
for a in "$@"; do
  if [ $value = 1 ]; then into "$a"; value=0; continue; fi{tree_case}
done
# Whether an argument, relative ones from there, names a path in the results (links resolved;
# without realpath -m, as busybox has it, as written, and any ".." counts as in).
inside() {{
  [ -n "$1" ] || return 1
  case $1 in /*) p=$1;; *) p=${{base%/}}/$1;; esac
  if r=$(realpath -m -- "$p" 2>/dev/null); then p=$r; else case $p in */..|*/../*) return 0;; esac; fi
  case $p in {cases}) return 0;; esac
  return 1
}}
# Over the results when it works there, or any argument or option's value (--dir=X, -CX) is there.
agent=0
inside "$base" && agent=1
for a in "$@"; do
  inside "${{a#*=}}" && agent=1
  inside "${{a#-?}}" && agent=1
done
[ $agent = 1 ] || exec "$real" "$@"
command -v setpriv >/dev/null 2>&1 || {{ echo "{tool}: refused as root over the agent's results (no setpriv to drop to nobody)" >&2; exit 126; }}
exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs "$real" "$@"
"""
