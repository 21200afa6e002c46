"""Evaluation: datasets in the shared format, metrics, bootstrap intervals, baselines, runner."""

from .._navigate import Retriever
from .._retrievers import BM25Retriever, DenseRetriever, passage_text, tree_passages
from ._answers import AnswerClient, exact_match, normalize_answer
from ._bootstrap import Interval, compare, paired_bootstrap
from ._data import Dataset, EvalQuery, dataset_prefix, load_dataset
from ._metrics import Judgments, MetricSpec, mean_metrics, score_run, text_groups
from ._runner import EvalSettings, Evaluation

__all__ = [
    "AnswerClient",
    "BM25Retriever",
    "Dataset",
    "DenseRetriever",
    "EvalQuery",
    "EvalSettings",
    "Evaluation",
    "Interval",
    "Judgments",
    "MetricSpec",
    "Retriever",
    "compare",
    "dataset_prefix",
    "exact_match",
    "load_dataset",
    "mean_metrics",
    "normalize_answer",
    "paired_bootstrap",
    "passage_text",
    "score_run",
    "text_groups",
    "tree_passages",
]
