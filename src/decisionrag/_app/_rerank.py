"""Reranking given texts with a judge: the use-case of the LlamaIndex reranker and of the
server's rerank endpoints, on the walk's own passage and choice stages
(`decisionrag._navigate._rerank`). Passages of a tree are reranked by `Navigator.arerank`."""

from .._navigate._rerank import Reranked, rerank_texts

__all__ = ["Reranked", "rerank_texts"]
