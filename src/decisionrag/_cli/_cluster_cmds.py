"""Placeholder: commands are registered here by the module's owner."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: "argparse._SubParsersAction[Any]") -> None:
    return None
