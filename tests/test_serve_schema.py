"""Schemathesis against the live server's own /openapi.json: no 5xx, every response conforms.

Bounded and derandomised (the same examples every run); with API keys configured, so the
auth checks (a request without the key must be refused) run too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from conftest import require_module

schemathesis = require_module("schemathesis")
from hypothesis import HealthCheck, given, settings

from _chat_standin import ChatStandIn
from _serve_helpers import CORPUS_B, live_server, write_tree
from _serve_helpers import settings as serve_settings
from decisionrag._serve import ServeLimits
from decisionrag._serve._auth import add_key

KEY: dict[str, str] = {}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("schema")
    trees = {"docs": write_tree(root / "docs.tree"), "garden": write_tree(root / "garden.tree", CORPUS_B)}
    key_file = root / "keys.json"
    KEY["admin"] = add_key(key_file, "admin", [])
    # deadlines of 5 s at least (in the schema): a scripted walk never takes that long, so a
    # 504 here would be a real failure
    limits = ServeLimits(min_timeout=5.0)
    with ChatStandIn() as chat, live_server(serve_settings(  # /v1/answer fuzzed too
            trees, api_key_file=str(key_file), limits=limits, generator="openai-compatible:stand-in",
            generator_base_url=chat.base_url)) as url:
        yield schemathesis.openapi.from_url(f"{url}/openapi.json")


@pytest.mark.slow
def test_the_api_conforms_to_its_own_schema(api: Any) -> None:
    # (schemathesis' lazy pytest fixture loader does not run on pytest 9; its hypothesis
    # strategies do, one operation at a time)
    headers = {"Authorization": f"Bearer {KEY['admin']}"}
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 10  # retrieve, 3 rerank, trees, tree, node, health, ready, metrics
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=20, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        def conforms(case: Any) -> None:
            case.call_and_validate(headers=headers)

        try:
            conforms()
        except Exception as exc:  # every operation runs; all failures are reported together
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert not failures, "\n\n".join(failures)
