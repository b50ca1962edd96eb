"""``export`` refuses what it cannot write faithfully and leaves the folder as it found it."""

import shutil

import pytest

from aes_lib.bundle.harbor_dataset import DigestUnsupportedError
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.seeding import export, seed_dirs, seed_pool


async def test_a_failed_export_leaves_the_folder_empty(bus, tmp_path):
    plain, ignored = seed_dirs()[:2]
    copy = shutil.copytree(ignored, tmp_path / "with-ignore" / ignored.name)
    (copy / ".gitignore").write_text("*.log\n")
    store = PoolStore(await bus.kv(BUCKET))
    await seed_pool(bus, store, [plain, copy])
    dest = tmp_path / "export"
    with pytest.raises(ValueError, match="is not org/name"):
        export(await store.active_entries(), bus.blobs, dest, name="no-slash")
    assert not dest.exists()
    with pytest.raises(DigestUnsupportedError, match=".gitignore: ignore rules are not applied here"):
        export(await store.active_entries(), bus.blobs, dest)
    assert list(dest.iterdir()) == []
