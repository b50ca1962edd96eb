"""One exception type per way a task bundle can be unacceptable.

Every type derives from :class:`BundleError`, so a gate can catch the family and
report ``type(err).__name__`` as the specific problem.
"""

from __future__ import annotations


class BundleError(Exception):
    """A task bundle that cannot be admitted."""


class MissingFileError(BundleError):
    """A required file (instruction.md, task.toml, solution/solve.sh, ...) is absent."""


class TomlSyntaxError(BundleError):
    """task.toml is not valid TOML."""


class UnknownFieldError(BundleError):
    """A section or field no model knows. No longer raised for task.toml, whose unknown fields
    are kept as warnings (``TaskConfig.warnings``) as Harbor keeps them; kept for callers that catch it."""


class InvalidFieldError(BundleError):
    """A task.toml field has the wrong type or an out-of-range value."""


class EmptyInstructionError(BundleError):
    """instruction.md holds nothing but whitespace."""


class InstructionEncodingError(BundleError):
    """instruction.md is not UTF-8 text."""


class UnsafePathError(BundleError):
    """An archive member has an absolute path, a ``..`` component or an odd name."""


class LinkEscapeError(BundleError):
    """A symlink or hardlink points outside the bundle (or at nothing in it)."""


class SpecialFileError(BundleError):
    """A device file, fifo or socket in the bundle."""


class FileTooLargeError(BundleError):
    """One file exceeds the per-file size limit."""


class ArchiveTooLargeError(BundleError):
    """The archive, its unpacked total or its entry count exceeds a limit."""


class DecompressionBombError(BundleError):
    """The archive inflates by more than the allowed ratio."""


class CorruptArchiveError(BundleError):
    """The bytes are not a readable gzip-compressed tar archive."""
