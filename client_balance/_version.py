"""The version, from the package's metadata: pyproject.toml is its one home."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("client-balance")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
