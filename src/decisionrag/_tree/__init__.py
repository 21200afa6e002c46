"""Corpus trees: the node model and the SQLite store."""

from ._model import DocumentSpec, Node, NodeKind, PassageSpec
from ._output import check_output
from ._store import SCHEMA_VERSION, Tree, TreeWriter

__all__ = ["SCHEMA_VERSION", "DocumentSpec", "Node", "NodeKind", "PassageSpec", "Tree",
           "TreeWriter", "check_output"]
