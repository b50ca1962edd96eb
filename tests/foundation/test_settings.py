"""One typed reader for every ``AES_*`` setting, and docs/SETTINGS.md's settings table generated from it
(the config file and ``--set`` layers: ``tests/foundation/test_runconfig.py``)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import ClassVar, Literal

import pytest

from aes_lib import settings_table
from aes_lib.agents.proposer.config import ProposerConfig
from aes_lib.config import DOC_DEFAULT, Settings, SettingsError, read_settings
from aes_lib.flywheel.training import TrainingConfig
from aes_lib.learner import LearnerConfig, LearnerConfigError
from aes_lib.models import Price, chat_client
from aes_lib.review import ReviewSettings, ReviewSettingsError

ROOT = Path(__file__).resolve().parents[2]

ENV_READ = re.compile(r"""(?:environ(?:\.get)?\s*[(\[]|getenv\s*\()\s*f?["'](AES_\w*)""")
"""``os.environ.get("AES_X"`` / ``environ["AES_X"`` / ``getenv("AES_X"``; an f-string read
such as ``environ.get(f"AES_REVIEW_{name}")`` yields its prefix, which is no variable."""

NOT_SETTINGS = {"AES_EXEC_ID"}
"""Read from the environment but not settings: the sandbox's marker of exec'd processes."""


@dataclasses.dataclass(frozen=True)
class Kinds:
    env_prefix: ClassVar[str] = "AES_T_"
    section: ClassVar[str] = "t"
    text: str = ""
    count: int = 0
    ratio: float = 0.0
    flag: bool = False
    where: Path = Path(".")
    names: tuple[str, ...] = ()
    mode: Literal["a", "b"] = "a"


class KindsError(ValueError):
    pass


def test_the_docs_table_is_the_generated_one():
    page = (ROOT / "docs" / "SETTINGS.md").read_text()
    assert settings_table.BEGIN in page and settings_table.END in page
    assert settings_table.splice(page, settings_table.markdown()) == page, \
        "docs/SETTINGS.md's settings table is stale: run `make settings-doc`"


def test_every_variable_has_one_row_with_its_docstring_and_default():
    table = settings_table.markdown()
    rows = {line.split(" | ")[1].strip("` "): line for line in table.splitlines() if line.startswith("| `")}
    assert set(rows) == set(settings_table.variables())
    assert "| `waves_per_round` | `AES_TRAINING_WAVES_PER_ROUND` | `1` | Waves `aes run` requests" \
        in rows["AES_TRAINING_WAVES_PER_ROUND"]
    assert "**`[training]`** Training waves" in table
    assert "| `AES_HOME` | `./.aes` |" in rows["AES_HOME"]
    assert "| `AES_MODEL_API_KEY` | `$OPENAI_API_KEY` |" in rows["AES_MODEL_API_KEY"]  # the documented fallback
    assert "| `AES_REVIEW_ENFORCE` | `false` |" in rows["AES_REVIEW_ENFORCE"]


def test_variable_names_are_unique_across_the_registry():
    fields = sum(len(dataclasses.fields(cls)) for _, cls in settings_table.REGISTRY)
    assert len(settings_table.variables()) == fields


def test_a_field_without_a_docstring_fails_the_generator(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Undocumented:
        env_prefix: ClassVar[str] = "AES_U_"
        section: ClassVar[str] = "u"
        documented: int = 1
        """Has one."""
        bare: int = 2

    monkeypatch.setattr(settings_table, "REGISTRY", (("Undocumented", Undocumented),))
    with pytest.raises(settings_table.SettingsDocError, match="Undocumented.bare has no docstring"):
        settings_table.markdown()


def test_write_replaces_only_the_marked_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n\n{settings_table.BEGIN}\nold rows\n{settings_table.END}\n\nafter\n")
    assert settings_table.main(["--write", str(readme)]) == 0
    text = readme.read_text()
    assert "old rows" not in text and text.startswith("# x\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert f"{settings_table.BEGIN}\n{settings_table.markdown()}\n{settings_table.END}" in text
    readme.write_text("no markers\n")
    with pytest.raises(settings_table.SettingsDocError, match="settings:begin"):
        settings_table.main(["--write", str(readme)])


def test_every_aes_variable_read_in_the_code_is_registered():
    found: dict[str, list[str]] = {}
    for package in ("libs", "services", "proto"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for name in ENV_READ.findall(path.read_text()):
                found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert "AES_HOME" in found  # the scan sees reads (config.py's default home)
    known = set(settings_table.variables()) | NOT_SETTINGS
    assert {name: paths for name, paths in found.items() if name not in known} == {}, \
        "read these through a registered settings class (aes_lib.config.read_settings)"


def test_the_scan_catches_ad_hoc_reads():
    code = 'os.environ.get("AES_NEW_KNOB", "") + os.environ["AES_X"] + os.getenv("AES_Y") ' \
           '+ os.environ.get(f"AES_REVIEW_{f.name.upper()}") + {**os.environ, "AES_HOME": h}'
    assert ENV_READ.findall(code) == ["AES_NEW_KNOB", "AES_X", "AES_Y", "AES_REVIEW_"]


def test_the_reader_converts_by_annotation(monkeypatch):
    assert read_settings(Kinds) == {}
    for name, raw in {"TEXT": " a b ", "COUNT": "-3", "RATIO": "1e-3", "FLAG": "Yes", "WHERE": "/tmp/x",
                      "NAMES": " /a, ,/b ", "MODE": "b"}.items():
        monkeypatch.setenv(f"AES_T_{name}", raw)
    assert Kinds(**read_settings(Kinds)) == Kinds(" a b ", -3, 0.001, True, Path("/tmp/x"), ("/a", "/b"), "b")
    for raw, value in {"1": True, "true": True, "no": False, "0": False, "FALSE": False}.items():
        monkeypatch.setenv("AES_T_FLAG", raw)
        assert read_settings(Kinds)["flag"] is value


@pytest.mark.parametrize("name, raw, message", [
    ("COUNT", "x", "AES_T_COUNT: expected an integer, got 'x'"),
    ("COUNT", "1.5", "AES_T_COUNT: expected an integer, got '1.5'"),
    ("RATIO", "fast", "AES_T_RATIO: expected a number, got 'fast'"),
    ("FLAG", "sometimes", "AES_T_FLAG: expected one of 1, 0, true, false, yes, no, got 'sometimes'"),
    ("MODE", "c", "AES_T_MODE: expected one of a, b, got 'c'"),
])
def test_the_reader_rejects_bad_values_naming_the_variable(monkeypatch, name, raw, message):
    monkeypatch.setenv(f"AES_T_{name}", raw)
    with pytest.raises(SettingsError, match=re.escape(message)):
        read_settings(Kinds)
    with pytest.raises(KindsError, match=re.escape(message)):
        read_settings(Kinds, KindsError)


def test_the_reader_refuses_a_type_it_cannot_read(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Odd:
        env_prefix: ClassVar[str] = "AES_T_"
        section: ClassVar[str] = "t"
        limits: dict[str, int] = dataclasses.field(default_factory=dict)

    monkeypatch.setenv("AES_T_LIMITS", "{}")
    with pytest.raises(TypeError, match="no reader"):
        read_settings(Odd)


def test_every_registered_default_reads_back_from_its_table_text(monkeypatch):
    # Each default as the table shows it is a valid value of its variable, so every field's type is readable.
    for var, (_, f) in settings_table.variables().items():
        if DOC_DEFAULT not in f.metadata:
            monkeypatch.setenv(var, settings_table.env_text(f.default))
    for _, cls in settings_table.REGISTRY:
        values = read_settings(cls)
        assert values == {f.name: f.default for f in dataclasses.fields(cls) if DOC_DEFAULT not in f.metadata}


def test_real_classes_read_typed_values(monkeypatch, tmp_path):
    monkeypatch.setenv("AES_HOME", str(tmp_path))
    monkeypatch.setenv("AES_IO_DEADLINE", "2.5")
    monkeypatch.setenv("AES_RESET_PATHS", "/srv/data, /etc/app")
    monkeypatch.setenv("AES_MODEL_PRICES", '{"hosted-q": [2, 8]}')
    monkeypatch.setenv("AES_TRAINING_WAVES_PER_ROUND", "3")
    monkeypatch.setenv("AES_TRAINING_TEMPERATURE", "0.5")
    monkeypatch.setenv("AES_REVIEW_STRUCTURED", "no")
    monkeypatch.setenv("AES_PROPOSER_TIME_LIMIT_S", "60")
    s = Settings.from_env()
    assert (s.home, s.io_deadline, s.reset_paths) == (tmp_path, 2.5, ("/srv/data", "/etc/app"))
    assert chat_client(Settings.from_env(model_url="http://m/v1")).prices["hosted-q"] == Price(2.0, 8.0)
    t = TrainingConfig.from_env(max_turns=2)
    assert (t.waves_per_round, t.temperature, t.max_turns) == (3, 0.5, 2)
    assert ReviewSettings.from_env().structured is False
    assert ProposerConfig.from_env().budget().loop.time_limit_s == 60.0
    monkeypatch.setenv("AES_REVIEW_RETRIES", "twice")
    with pytest.raises(ReviewSettingsError, match="AES_REVIEW_RETRIES: expected an integer, got 'twice'"):
        ReviewSettings.from_env()
    monkeypatch.setenv("AES_LEARNER_KERNEL_BACKEND", "cuda")
    with pytest.raises(LearnerConfigError, match="AES_LEARNER_KERNEL_BACKEND: expected one of auto, triton, torch"):
        LearnerConfig.from_env()
    monkeypatch.setenv("AES_IO_DEADLINE", "soon")
    with pytest.raises(SettingsError, match="AES_IO_DEADLINE: expected a number, got 'soon'"):
        Settings.from_env()


def test_a_stack_file_setting_is_read_back_typed(monkeypatch, tmp_path):
    import json

    from aes_lib.config import STACK_FILE, StackFileError

    monkeypatch.setenv("AES_HOME", str(tmp_path))
    monkeypatch.delenv("AES_CONTAMINATION_REQUIRED", raising=False)
    assert Settings.from_env().contamination_required is True  # fail closed unless told otherwise
    # `aes up` writes the embedded stack's opt-out as text: "0" must read as False, not as a true string.
    (tmp_path / STACK_FILE).write_text(json.dumps({"settings": {"contamination_required": "0", "engine": "gguf"}}))
    s = Settings.from_env()
    assert s.contamination_required is False and s.engine == "gguf"
    monkeypatch.setenv("AES_CONTAMINATION_REQUIRED", "1")  # the variable wins over the stack file
    assert Settings.from_env().contamination_required is True
    (tmp_path / STACK_FILE).write_text(json.dumps({"settings": {"contamination_required": "maybe"}}))
    with pytest.raises(StackFileError, match="stack.json"):
        Settings.from_env()
