"""The version: its one home, which pyproject.toml reads (``dynamic = ["version"]``).

A literal, not ``importlib.metadata.version()``: that import brings ``email``, ``zipfile`` and
``csv`` with it, some 3,000 objects that every full garbage collection of the user's process
would walk (docs/design-decisions.md, "The settings are checked without pydantic").
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
