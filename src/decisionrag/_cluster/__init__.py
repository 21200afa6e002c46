"""Hierarchies for flat corpora: embed, cluster, describe, and add to a clustered tree."""

from ._api import ClusterReport, cluster_documents, resolve_groups
from ._describe import (
    PAPER_PROMPT,
    ChatDescriber,
    Describer,
    ExtractiveDescriber,
    GroupSketch,
    make_describer,
)
from ._kmeans import DEFAULT_BRANCHING, auto_groups, levels_for
from ._update import AddReport, RebalanceReport, add_documents, rebalance

__all__ = [
    "DEFAULT_BRANCHING",
    "PAPER_PROMPT",
    "AddReport",
    "ChatDescriber",
    "ClusterReport",
    "Describer",
    "ExtractiveDescriber",
    "GroupSketch",
    "RebalanceReport",
    "add_documents",
    "auto_groups",
    "cluster_documents",
    "levels_for",
    "make_describer",
    "rebalance",
    "resolve_groups",
]
