"""The tamper probe's code-carrying files, loaded by the real libraries a test would use: each runs
its code through the unsafe loader, loads as text as a control, and runs nothing through the safe one."""

from __future__ import annotations

import contextlib
import json
import pickle
from pathlib import Path

import jsonpickle
import numpy as np
import pytest
import torch
import yaml
from ruamel.yaml import YAML

from aes_lib.sandbox.payloads import carrier


def _write_pickle(path: Path) -> None:
    path.write_bytes(pickle.dumps({"sum": 3}))


def _write_yaml(path: Path) -> None:
    path.write_text("sum: 3\n")


def _write_jsonpickle(path: Path) -> None:
    path.write_text(jsonpickle.encode({"sum": 3, "parts": (1, 2)}))


def _write_npy(path: Path) -> None:
    np.save(path, np.arange(3))


def _write_torch(path: Path) -> None:
    torch.save({"w": torch.zeros(2)}, path)


FORMATS = {
    # name: (file, writer, unsafe load, safe load, kind)
    "pickle": ("answer.pkl", _write_pickle, lambda p: pickle.loads(p.read_bytes()), None, "pickle payload"),
    "yaml": ("answer.yaml", _write_yaml, lambda p: yaml.unsafe_load(p.read_text()),
             lambda p: yaml.safe_load(p.read_text()), "YAML tag payload"),
    "ruamel.yaml": ("answer.yml", _write_yaml, lambda p: YAML(typ="unsafe", pure=True).load(p.read_text()),
                    lambda p: YAML(typ="safe", pure=True).load(p.read_text()), "YAML tag payload"),
    "jsonpickle": ("answer.json", _write_jsonpickle, lambda p: jsonpickle.decode(p.read_text()),
                   lambda p: json.loads(p.read_text()), "jsonpickle payload"),
    "npy": ("answer.npy", _write_npy, lambda p: np.load(p, allow_pickle=True), np.load, "NumPy object-array payload"),
    "torch": ("model.pt", _write_torch, lambda p: torch.load(p, weights_only=False), torch.load,
              "torch checkpoint payload"),
}


# ruamel.yaml's on typ='unsafe' (it still loads), jsonpickle's on its coming default
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning", "ignore:keys will default:DeprecationWarning")
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_each_carrier_runs_its_code_through_the_unsafe_loader_only(fmt, tmp_path) -> None:
    name, write, unsafe, safe, kind = FORMATS[fmt]
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('yes')"
    for control in (True, False):
        path = tmp_path / f"{control}-{name}"
        write(path)
        found, make = carrier(str(path))
        assert found == kind
        path.write_bytes(make(code, control))
        if safe is not None and not control:
            with contextlib.suppress(Exception):  # refused, or read as plain data
                safe(path)
            assert not marker.exists()
        unsafe(path)
        assert marker.exists() != control, f"{fmt}, control={control}"


def test_a_file_whose_format_carries_no_code_is_left_to_the_other_breakages(tmp_path) -> None:
    for name, text in {"answer.txt": b"3\n", "data.json": b'{"sum": 3}', "archive.zip": b"PK\x03\x04rest"}.items():
        (tmp_path / name).write_bytes(text)
        assert carrier(str(tmp_path / name)) is None
