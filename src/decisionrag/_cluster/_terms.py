"""Distinctive terms of each group: TF-IDF over groups, so a term scores high when it is
frequent in one group and rare among its siblings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._errors import missing_extra

_TOKEN = r"(?u)\b[^\W\d_][^\W\d_'-]{2,}\b"


def distinctive_terms(group_texts: Sequence[str], n_terms: int = 8) -> list[tuple[str, ...]]:
    """For each group (all its members' texts joined), its `n_terms` most distinctive terms."""
    if not group_texts:
        return []
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
    except ImportError as exc:
        raise missing_extra("scikit-learn", "cluster") from exc
    n = len(group_texts)
    # a term found in (nearly) every sibling says nothing about any one of them
    max_df: float | int = 0.5 if n >= 4 else (n - 1 if n >= 2 else 1.0)
    vectorizer = TfidfVectorizer(token_pattern=_TOKEN, stop_words="english", lowercase=True,
                                 sublinear_tf=True, max_df=max_df, min_df=1, dtype=np.float32)
    try:
        matrix = vectorizer.fit_transform(group_texts).tocsr()
    except ValueError:  # no term survives (empty or all stop words)
        return [() for _ in group_texts]
    vocabulary = vectorizer.get_feature_names_out()
    result: list[tuple[str, ...]] = []
    for row in range(matrix.shape[0]):
        start, end = matrix.indptr[row], matrix.indptr[row + 1]
        columns, scores = matrix.indices[start:end], matrix.data[start:end]
        best = np.lexsort((columns, -scores))[:n_terms]  # ties broken by term order: deterministic
        result.append(tuple(str(vocabulary[columns[i]]) for i in best))
    return result
