"""One config file per run: file < environment < ``--set``, checked at start, recorded by the run."""

from __future__ import annotations

import json
import tomllib

import msgspec
import pytest

from aes_cli.main import main
from aes_lib import runconfig
from aes_lib.config import CONFIG_VAR, SET_VAR
from aes_lib.learner import LearnerConfig
from aes_proto.records import RUNS_BUCKET, RunRecord

CONFIG = """
[core]
log_level = "debug"
reset_paths = ["/srv/data", "/etc/app"]
contamination_required = false

[learner]
lr = 2e-6
groups_per_batch = 3
kernel_backend = "torch"

[training]
group_size = 8
temperature = 0.7

[review]
enforce = true
"""


@pytest.fixture
def layers(monkeypatch, tmp_path):
    """A clean slate: no inherited file or overrides (restored afterwards, as ``activate``
    writes them into the environment), a working directory without ``aes.toml``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CONFIG_VAR, "")
    monkeypatch.setenv(SET_VAR, "")
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    for var in ("AES_LEARNER_LR", "AES_LOG_LEVEL", "AES_TRAINING_GROUP_SIZE"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "run.toml"
    path.write_text(CONFIG)
    return path


def _show(capsys, *args: str) -> dict[tuple[str, str], dict]:
    assert main([*args, "config", "show", "--json"]) == 0
    return {(e["section"], e["key"]): e for e in json.loads(capsys.readouterr().out)}


def test_the_file_sets_every_section_it_names(layers, capsys):
    shown = _show(capsys, "--config", str(layers))
    assert shown["learner", "lr"] == {"section": "learner", "key": "lr", "value": 2e-6, "source": str(layers)}
    assert shown["core", "reset_paths"]["value"] == ["/srv/data", "/etc/app"]
    assert shown["review", "enforce"]["value"] is True and shown["training", "temperature"]["value"] == 0.7
    assert shown["learner", "seed"] == {"section": "learner", "key": "seed", "value": 0, "source": "default"}
    # The classes the code calls read the same layers.
    assert LearnerConfig.from_env().groups_per_batch == 3


def test_a_variable_overrides_the_file_and_set_overrides_both(layers, capsys, monkeypatch):
    monkeypatch.setenv("AES_LEARNER_LR", "3e-6")
    shown = _show(capsys, "--config", str(layers))
    assert (shown["learner", "lr"]["value"], shown["learner", "lr"]["source"]) == (3e-6, "AES_LEARNER_LR")
    monkeypatch.setenv(SET_VAR, "")
    shown = _show(capsys, "--config", str(layers), "--set", "learner.lr=4e-6", "--set", "training.group_size=6")
    assert (shown["learner", "lr"]["value"], shown["learner", "lr"]["source"]) == (4e-6, "--set")
    assert (shown["training", "group_size"]["value"], shown["training", "group_size"]["source"]) == (6, "--set")
    assert shown["training", "temperature"]["source"] == str(layers)  # untouched keys keep the file's


@pytest.mark.parametrize("text, line", [
    ("[learner]\nlrr = 1e-6\n", "run.toml: learner.lrr: unknown key (did you mean lr?)"),
    ("[lerner]\nlr = 1e-6\n", "run.toml: [lerner]: unknown section"),
    ('[learner]\nlr = "fast"\n', "run.toml: learner.lr: expected a number, got 'fast'"),
    ('[review]\nenforce = "yes"\n', "run.toml: review.enforce: expected true or false, got 'yes'"),
    ("[training]\ngroup_size = 2.5\n", "run.toml: training.group_size: expected an integer, got 2.5"),
])
def test_a_bad_file_fails_at_start_in_one_line_naming_the_key(layers, capsys, text, line):
    layers.write_text(text)
    # `status` would need a stack: the check runs before any command does.
    assert main(["--config", str(layers), "status"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and line in err, err


def test_a_bad_set_fails_at_start_naming_it(layers, capsys):
    assert main(["--set", "learner.seed=soon", "status"]) == 2
    assert "--set learner.seed: expected an integer, got 'soon'" in capsys.readouterr().err


def test_show_as_toml_reads_back_to_the_same_configuration(layers, capsys, tmp_path):
    assert main(["--config", str(layers), "--set", "proposer.max_turns=3", "config", "show", "--toml"]) == 0
    written = tmp_path / "shown.toml"
    written.write_text(capsys.readouterr().out)
    first = tomllib.loads(written.read_text())
    assert first["learner"]["lr"] == 2e-6 and first["proposer"]["max_turns"] == 3
    shown = _show(capsys, "--config", str(written))
    assert {k: e["value"] for k, e in shown.items()} == {
        (s, k): v for s, table in first.items() for k, v in table.items()}


async def test_a_run_records_exactly_its_config_file(layers, bus, tmp_path):
    from aes_ops.runrecord import CONFIG_NAME, record_run, runs

    runconfig.activate(layers)
    record = await record_run(bus, tmp_path / "out", "run")
    stored = msgspec.msgpack.decode((await (await bus.kv(RUNS_BUCKET)).get(record.run_id)).value, type=RunRecord)
    assert stored == record and await runs(bus) == [record]
    given = tomllib.loads(CONFIG)
    for section, table in given.items():
        for key, value in table.items():
            assert stored.config[section][key] == value, (section, key)
            assert stored.sources[f"{section}.{key}"] == str(layers)
    # Everything else is recorded at its default, and listed without a source.
    assert stored.config["learner"]["seed"] == 0 and "learner.seed" not in stored.sources
    # The file beside the report holds the same configuration and starts the same run again.
    beside = tmp_path / "out" / CONFIG_NAME
    assert tomllib.loads(beside.read_text()) == stored.config
    runconfig.activate(beside)
    assert runconfig.as_tables(runconfig.effective()) == stored.config


def test_secrets_are_neither_shown_nor_recorded(layers, monkeypatch):
    monkeypatch.setenv("AES_NATS_PASSWORD", "hunter2")
    runconfig.activate(layers)
    entries = {(e.section, e.key): e for e in runconfig.effective()}
    assert entries["core", "nats_password"].value == runconfig.REDACTED
    assert "hunter2" not in runconfig.to_toml(list(entries.values()))
    assert "nats_password" not in runconfig.as_tables(list(entries.values()))["core"]
