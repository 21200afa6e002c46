"""The version of decisionrag, written here only (pyproject.toml reads it)."""

__version__ = "0.1.0"
