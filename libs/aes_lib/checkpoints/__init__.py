"""Published policy versions as HF-format folders in the blob store (the contract between the
learner, which writes them, and every engine and exporter, which read them)."""

from aes_lib.checkpoints.hf_folder import (
    FORMAT,
    CheckpointFolderError,
    check_folder,
    delete_folder,
    fetch_folder,
    publish_folder,
)

__all__ = ["FORMAT", "CheckpointFolderError", "check_folder", "delete_folder", "fetch_folder", "publish_folder"]
