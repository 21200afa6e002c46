"""Test-wide fixtures and the "no real network" guard.

Every test may talk to 127.0.0.0/8 and ::1 only (servers the tests start themselves);
any other connection fails loudly. Tests marked `network` are skipped unless
DECISIONRAG_NETWORK_TESTS=1, and only those may leave the machine.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Property-based suites (builders, judge answers) are bounded and derandomised by default, so
# that `make test` and CI are reproducible; HYPOTHESIS_PROFILE=explore searches further with
# fresh random examples.
settings.register_profile("ci", max_examples=60, derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("explore", max_examples=1_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # unix socket path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise RuntimeError(f"test tried to reach the network: {address!r} (only loopback is allowed)")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise RuntimeError(f"test tried to reach the network: {address!r} (only loopback is allowed)")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host not in (None, "localhost") and not _is_local((host,)):
        raise RuntimeError(f"test tried to resolve {host!r} (only loopback is allowed)")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def no_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.node.get_closest_marker("network"):
        yield
        return
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DECISIONRAG_NETWORK_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="network test: set DECISIONRAG_NETWORK_TESTS=1 to run")
    for item in items:
        if item.get_closest_marker("network"):
            item.add_marker(skip)


def under_ci() -> bool:
    """CI installs every dev dependency and puts shared/ beside the clone: there a missing one
    is a failure, not a skip."""
    return os.environ.get("CI", "").lower() == "true"


def require_module(name: str) -> ModuleType:
    """`pytest.importorskip` locally; under ``CI=true`` a missing (or broken) dev dependency
    fails the test module instead of skipping it."""
    if not under_ci():
        return pytest.importorskip(name)
    try:
        return importlib.import_module(name)
    except ImportError as error:
        pytest.fail(f"{name} is a dev dependency and CI installs it, but it does not import: "
                    f"{error}", pytrace=False)


def find_shared_data(folder: Path = SHARED_DATA) -> Path:
    """The shared benchmark data; skipped where it is absent, a failure under CI."""
    if not folder.is_dir():
        message = "shared benchmark data not found at ../shared/data beside the checkout"
        if under_ci():
            pytest.fail(f"{message} (CI puts it there)", pytrace=False)
        pytest.skip(message)
    return folder


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return find_shared_data()


@pytest.fixture(scope="session")
def xquad_tree(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """The xquad-en corpus built once per session as the default build does; tests only read it."""
    from decisionrag import build_tree

    path = tmp_path_factory.mktemp("xquad") / "xquad.tree"
    build_tree([shared_data / "xquad-en" / "corpus.jsonl"], path)
    return path
