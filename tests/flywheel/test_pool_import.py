"""``aes pool seed --from DIR``: any Harbor dataset folder is validated task by task, printed as
a table, and only its valid tasks are seeded; and the pieces it is made of (finding the tasks,
the imported-network policy)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.bundle.imported import as_imported, dataset_tasks
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.seeding import SEEDS_DIR

from flywheel_helpers import AES

VALID = ("csv-sales-rollup", "fix-interval-merge")


async def aes_status(settings, *args: str, **env: str) -> tuple[int, str]:
    """``aes ARGS`` against the test's bus: (exit status, stdout)."""
    full = dict(os.environ, AES_NATS_URL=settings.nats_url, AES_NATS_USER=settings.nats_user,
                AES_NATS_PASSWORD=settings.nats_password, AES_HOME=str(settings.home),
                AES_BLOB_URL=settings.blob_url, **env)
    p = await asyncio.create_subprocess_exec(*AES, *args, env=full, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    out, err = await p.communicate()
    assert p.returncode in (0, 1), (out + err).decode()
    return p.returncode, out.decode()


def make_dataset(root: Path) -> Path:
    """Two seeds (one with fields Harbor does not model) and a task whose task.toml is wrong."""
    for name in VALID:
        shutil.copytree(SEEDS_DIR / name, root / name)
    toml = root / VALID[0] / "task.toml"
    toml.write_text(toml.read_text().replace("[task]\n", '[task]\nformat = "harbor"\nworkstream = "core"\n', 1))
    shutil.copytree(SEEDS_DIR / VALID[1], root / "broken")
    broken = root / "broken" / "task.toml"
    broken.write_text(broken.read_text().replace("memory_mb = ", 'memory_mb = "lots" #', 1)
                      .replace(VALID[1], "broken", 1))
    (root / "README.md").write_text("a dataset\n")  # not a task: ignored
    return root


@pytest.mark.docker
async def test_seed_from_a_dataset_seeds_only_its_valid_tasks(fresh_nats, bus, tmp_path):
    pytest.importorskip("docker").from_env().images.get("aes-base:latest")
    dataset = make_dataset(tmp_path / "dataset")
    status, out = await aes_status(fresh_nats, "pool", "seed", "--from", str(dataset), "-j", "2")
    assert status == 1, out  # one task failed
    # First every task pre-checked (nothing built yet), then the validation table.
    assert out.splitlines()[0].split() == ["TASK", "VERDICT", "WHY"] and "3 tasks: 2 build, 1 load_error" in out
    lines = out[out.index("TASK  "):].splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.split()[:4] == ["TASK", "VERDICT", "REASON", "WARNINGS"]):]
    assert lines[0].split() == ["TASK", "VERDICT", "REASON", "WARNINGS"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:4]}
    assert rows == {
        f"aes-seeds/{VALID[0]}": ["valid", "ok", "2"],
        f"aes-seeds/{VALID[1]}": ["valid", "ok", "0"],
        str(dataset / "broken"): ["FAIL", "invalid_bundle", "0"],
    }
    assert "InvalidFieldError" in out and "memory_mb" in out
    assert f"WARN aes-seeds/{VALID[0]}: task.toml: task.workstream is not a Harbor 0.26 field" in out
    assert "seeded 2 of 3 tasks" in out

    idx = await PoolStore(await bus.kv(BUCKET)).index()
    assert len(idx.active) == 2
    names = {e.name for e in await PoolStore(await bus.kv(BUCKET)).active_entries()}
    assert names == {f"aes-seeds/{n}" for n in VALID}


def test_dataset_tasks_reads_folders_and_a_registry(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    shutil.copytree(SEEDS_DIR / VALID[0], root / VALID[0])
    shutil.copytree(SEEDS_DIR / VALID[1], root / "deeper" / "tasks" / VALID[1])
    (root / "registry.json").write_text(json.dumps([{"name": "ds", "version": "1.0", "tasks": [
        {"name": "b", "path": f"deeper/tasks/{VALID[1]}"},
        {"name": "remote", "git_url": "https://example.com/x.git", "path": "tasks/x"},
        {"name": "gone", "path": "nowhere"},
    ]}]))
    found = dataset_tasks(root)
    assert found.dirs == sorted([(root / VALID[0]).resolve(), (root / "deeper" / "tasks" / VALID[1]).resolve()])
    assert [s.split(":")[0] for s in found.skipped] == ["remote", "gone"]
    assert dataset_tasks(root / VALID[0]).dirs == [(root / VALID[0]).resolve()]  # a task folder itself


def test_imported_network_follows_the_operator(tmp_path: Path) -> None:
    src = tmp_path / "src" / "task"
    shutil.copytree(SEEDS_DIR / VALID[0], src)
    toml = src / "task.toml"
    toml.write_text(toml.read_text().replace("allow_internet = false\n", ""))
    assert Task.load(src).config.environment.allow_internet is False  # the sandbox default
    assert as_imported(src, tmp_path / "off", "off") == src  # off: left as it is
    granted = as_imported(src, tmp_path / "harbor", "harbor")  # Harbor's default: a copy that says so
    assert granted != src and granted.name == src.name
    assert Task.load(granted).config.environment.allow_internet is True
    assert "allow_internet" not in toml.read_text()  # the dataset is untouched
    explicit = tmp_path / "explicit"
    shutil.copytree(SEEDS_DIR / VALID[1], explicit)  # says allow_internet = false: kept
    assert as_imported(explicit, tmp_path / "x", "harbor") == explicit


@pytest.mark.docker
def test_validate_prints_warnings_and_imported_grants_the_network(tmp_path: Path, capsys, monkeypatch) -> None:
    from aes_cli.main import main

    pytest.importorskip("docker").from_env().images.get("aes-base:latest")
    root = tmp_path / VALID[1]
    shutil.copytree(SEEDS_DIR / VALID[1], root)
    toml = root / "task.toml"
    toml.write_text("language = \"bash\"\n" + toml.read_text().replace("allow_internet = false\n", ""))
    assert main(["validate", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"WARN aes-seeds/{VALID[1]}: task.toml: language is not a Harbor 0.26 field (kept, ignored)" in out
    monkeypatch.setenv("AES_IMPORTED_NETWORK", "harbor")
    assert main(["validate", "--json", "--imported", str(root)]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["warnings"] == ["task.toml: language is not a Harbor 0.26 field (kept, ignored)"]
    assert "allow_internet" not in toml.read_text()  # validated a granted copy, never the task itself


@pytest.mark.docker
async def test_rollouts_of_a_pool_seed_get_the_network_it_asks_for(bus, tmp_path, monkeypatch):
    # A task that asks for the network and whose test passes only with one: the solver's attempts
    # on it as a pool seed (training, pool review) get it under AES_SANDBOX_NETWORK=imported, as
    # `aes pool seed` validated it; as a generated task it never does.
    import docker
    from replay_server import ReplayServer

    from aes_lib.agents.loop import LoopLimits
    from aes_lib.bundle import pack
    from aes_lib.runners.trial_runner import TrialRolloutRunner
    from aes_lib.models import ChatClient
    from aes_lib.domains.kinds import DomainKinds
    from aes_lib.sandbox import ImageCache
    from aes_lib.sandbox.container import remove_egress_network

    from flywheel_helpers import GIVE_UP_ONE

    egress = f"aes-egress-test-{os.urandom(3).hex()}"
    monkeypatch.setenv("AES_SANDBOX_NETWORK", "imported")
    monkeypatch.setenv("AES_SANDBOX_EGRESS_NETWORK", egress)
    root = tmp_path / "needs-network"
    shutil.copytree(SEEDS_DIR / VALID[1], root)
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace("allow_internet = false", "allow_internet = true"))
    for old in (root / "tests").glob("test_*.py"):
        old.unlink()
    (root / "tests" / "test_network.py").write_text(
        "from pathlib import Path\n\n\ndef test_has_a_network():\n    assert Path('/sys/class/net/eth0').exists()\n")
    packed = pack(root)
    ref = bus.blobs.put_bytes(f"bundles/sha256/{packed.sha256}.tar.gz", packed.data)
    with ReplayServer(replies=[GIVE_UP_ONE, GIVE_UP_ONE]) as model:
        runner = TrialRolloutRunner(ChatClient(model.url, "replay"), ImageCache(kinds=DomainKinds()), bus.blobs,
                                    LoopLimits(max_turns=1), tmp_path)
        try:
            generated = await runner.run(ref, packed.sha256, "as-generated")
            seed = await runner.run(ref, packed.sha256, "as-seed", imported=True)
        finally:
            remove_egress_network(docker.from_env(), egress)
    assert (generated.reward, seed.reward) == (0.0, 1.0)


# A task whose own test.sh runs the solution's script as root (test_tamper_probe.py's example).
GREET_SOLVE = "#!/bin/bash\nprintf '#!/bin/sh\\necho hello\\n' > /app/greet.sh\nchmod +x /app/greet.sh\n"
GREET_TEST = ("#!/bin/bash\nmkdir -p /logs/verifier\n[ \"$(bash /app/greet.sh)\" = hello ] && echo 1 > "
              "/logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n")


@pytest.mark.docker
async def test_a_forgeable_task_is_flagged_and_seeded_only_when_allowed(fresh_nats, bus, tmp_path):
    pytest.importorskip("docker").from_env().images.get("aes-base:latest")
    task = tmp_path / "dataset" / "greet"
    shutil.copytree(Path(__file__).parents[1] / "sandbox" / "tasks" / "echo", task)
    (task / "solution" / "solve.sh").write_text(GREET_SOLVE)
    (task / "tests" / "test.sh").write_text(GREET_TEST)
    status, out = await aes_status(fresh_nats, "pool", "seed", "--from", str(task.parent))
    assert status == 1, out
    # The import table's row (the pre-check table, printed before any build, comes first).
    rows = [line.split() for line in out.splitlines() if line.startswith("aes-fixtures/echo")]
    assert rows[-1] == ["aes-fixtures/echo", "FORGEABLE", "verifier_forgeable", "0"], out
    assert "/app/greet.sh" in out and "seeded 0 of 1" in out
    store = PoolStore(await bus.kv(BUCKET))
    assert not (await store.index()).active

    status, out = await aes_status(fresh_nats, "pool", "seed", "--from", str(task.parent), "--allow-forgeable")
    [entry] = await store.active_entries()
    assert "/app/greet.sh" in entry.forgeable
    status, out = await aes_status(fresh_nats, "pool", "list")
    assert "FORGEABLE (left out of training)" in out
