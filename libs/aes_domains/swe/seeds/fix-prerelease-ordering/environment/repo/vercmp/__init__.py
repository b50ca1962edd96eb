"""Semantic versions: parsing and precedence."""

from vercmp.version import InvalidVersion, Version, compare, latest, sort_versions

__all__ = ["InvalidVersion", "Version", "compare", "latest", "sort_versions"]
__version__ = "1.1.0"
