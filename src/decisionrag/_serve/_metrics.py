"""Prometheus metrics of one app: requests, latency, judge requests/tokens/errors, in flight.

Each app owns its registry (several apps can live in one process, as in the tests). Under
`--workers N` the CLI sets PROMETHEUS_MULTIPROC_DIR, and /metrics sums every worker.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()  # the *_created series only add noise to every scrape

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)


def _multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        live = {"multiprocess_mode": "livesum"}
        self.requests = Counter("decisionrag_http_requests", "HTTP requests answered",
                                ["method", "route", "status"], registry=r)
        self.latency = Histogram("decisionrag_http_request_seconds", "HTTP request latency",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("decisionrag_http_requests_in_flight", "HTTP requests being served",
                               registry=r, **live)  # type: ignore[arg-type]
        self.judge_requests = Counter("decisionrag_judge_requests", "judge requests answered",
                                      ["kind"], registry=r)
        self.judge_seconds = Histogram("decisionrag_judge_request_seconds", "judge request latency",
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.judge_tokens = Counter("decisionrag_judge_input_tokens", "input tokens sent to the judge",
                                    registry=r)
        self.judge_errors = Counter("decisionrag_judge_errors", "judge requests that failed",
                                    ["error"], registry=r)
        self.judge_in_flight = Gauge("decisionrag_judge_requests_in_flight", "judge requests in flight",
                                     registry=r, **live)  # type: ignore[arg-type]
        self.judge_queue = Gauge("decisionrag_judge_queue", "judge requests waiting for a slot",
                                 registry=r, **live)  # type: ignore[arg-type]
        self.busy = Counter("decisionrag_busy_rejections", "requests turned away with 503 (queue full)",
                            registry=r)
        self.deadlines = Counter("decisionrag_deadline_exceeded", "requests cut short by their deadline",
                                 registry=r)
        self.reloads = Counter("decisionrag_tree_reloads", "tree files reopened after a replace",
                               ["tree"], registry=r)

    def render(self) -> bytes:
        if _multiprocess():
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)

    @staticmethod
    def worker_exited(pid: int) -> None:
        if _multiprocess():
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(pid)
