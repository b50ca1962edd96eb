"""Published versions as HF-format folders: what the learner writes, every engine loads."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from aes_lib.blobstore import open_store
from aes_lib.checkpoints import CheckpointFolderError, check_folder, fetch_folder, publish_folder
from .helpers import tiny_llama


@pytest.fixture
def store(tmp_path):
    return open_store(f"file://{tmp_path / 'blobs'}")


def test_a_published_folder_comes_back_loadable_by_transformers(store, tmp_path) -> None:
    model = tiny_llama()
    model.save_pretrained(tmp_path / "src", max_shard_size="20KB")  # sharded, with an index
    assert (tmp_path / "src" / "model.safetensors.index.json").is_file()
    ref = publish_folder(store, "policies/shared/v000001", tmp_path / "src")
    dest = fetch_folder(store, ref, tmp_path / "cache" / "v1")
    loaded = AutoModelForCausalLM.from_pretrained(dest)
    for name, t in model.state_dict().items():
        assert torch.equal(t, loaded.state_dict()[name]), name
    assert fetch_folder(store, ref, dest) == dest  # already there: reused


@pytest.mark.parametrize("damage", ["no_config", "truncated", "bad_header", "missing_shard"])
def test_a_broken_folder_is_refused_before_publishing(store, tmp_path, damage) -> None:
    src = tmp_path / "src"
    tiny_llama().save_pretrained(src, max_shard_size="20KB")
    shard = sorted(src.glob("*.safetensors"))[0]
    match damage:
        case "no_config":
            (src / "config.json").unlink()
        case "truncated":
            shard.write_bytes(shard.read_bytes()[:-100])
        case "bad_header":
            shard.write_bytes((10**9).to_bytes(8, "little") + shard.read_bytes()[8:])
        case "missing_shard":
            shard.unlink()
            (src / "extra.safetensors").write_bytes(sorted(src.glob("*.safetensors"))[0].read_bytes())
    with pytest.raises(CheckpointFolderError):
        check_folder(src)
    with pytest.raises(CheckpointFolderError):
        publish_folder(store, "policies/x", src)
    assert not store.exists("policies/x/manifest.json")


def test_a_manifest_naming_a_path_outside_the_folder_is_refused(store, tmp_path) -> None:
    src = tmp_path / "src"
    tiny_llama().save_pretrained(src)
    ref = publish_folder(store, "p", src)
    manifest = json.loads(store.get_bytes(ref))
    manifest["files"]["../escape.json"] = manifest["files"]["config.json"]
    bad = store.put_bytes("p/bad-manifest.json", json.dumps(manifest).encode())
    with pytest.raises(CheckpointFolderError, match="leaves the folder"):
        fetch_folder(store, bad, tmp_path / "dest")
    assert not (tmp_path / "escape.json").exists()
