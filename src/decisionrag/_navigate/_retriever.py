"""The one retriever protocol: what navigation takes for hybrid candidates and evaluation
runs as a flat baseline (`decisionrag._retrievers` implements it for BM25 and dense)."""

from __future__ import annotations

from typing import Protocol


class Retriever(Protocol):
    """Anything that ranks passage keys for a query text (BM25, dense, …)."""

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]: ...
