"""Corpus trees: the node model and the SQLite store."""

from ._model import DocumentHead, DocumentSpec, Node, NodeKind, PassageSpec, ancestry
from ._output import check_output
from ._store import SCHEMA_VERSION, DuplicateKey, Tree, TreeWriter

__all__ = ["SCHEMA_VERSION", "DocumentHead", "DocumentSpec", "DuplicateKey", "Node", "NodeKind",
           "PassageSpec", "Tree", "TreeWriter", "ancestry", "check_output"]
