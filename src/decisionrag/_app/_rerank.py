"""Reranking given texts with a judge: the use-case of the LlamaIndex reranker (and of any
shell that reranks another retriever's results)."""

from .._navigate._rerank import Reranked, rerank_texts

__all__ = ["Reranked", "rerank_texts"]
