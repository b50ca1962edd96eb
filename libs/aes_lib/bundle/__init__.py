"""Harbor task bundles: load and check a task directory, pack it deterministically
(sha256 = env_id), and unpack an untrusted archive safely."""

from aes_lib.bundle.archive import PackedBundle, pack, unpack
from aes_lib.bundle.compose import ComposeSpec, InvalidComposeError
from aes_lib.bundle.config import (
    AgentConfig,
    Author,
    EnvironmentConfig,
    SolutionConfig,
    TaskConfig,
    TaskInfo,
    VerifierConfig,
    parse_task_toml,
)
from aes_lib.bundle.errors import (
    ArchiveTooLargeError,
    BundleError,
    CorruptArchiveError,
    DecompressionBombError,
    EmptyInstructionError,
    FileTooLargeError,
    InstructionEncodingError,
    InvalidFieldError,
    LinkEscapeError,
    MissingFileError,
    SpecialFileError,
    TomlSyntaxError,
    UnknownFieldError,
    UnsafePathError,
)
from aes_lib.bundle.task import BundleLimits, Task

__all__ = [
    "AgentConfig", "ArchiveTooLargeError", "Author", "BundleError", "BundleLimits", "ComposeSpec",
    "CorruptArchiveError", "DecompressionBombError", "EmptyInstructionError",
    "EnvironmentConfig", "FileTooLargeError", "InstructionEncodingError", "InvalidComposeError", "InvalidFieldError",
    "LinkEscapeError", "MissingFileError", "PackedBundle", "SolutionConfig", "SpecialFileError",
    "Task", "TaskConfig", "TaskInfo", "TomlSyntaxError", "UnknownFieldError", "UnsafePathError",
    "VerifierConfig", "pack", "parse_task_toml", "unpack",
]
