"""Running the app under uvicorn: one process, or `--workers N` sharing one socket."""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from .._errors import InputError
from ._connections import PROTOCOL, ConnectionLimits, GuardedH11Protocol
from ._logging import log_config
from ._settings import SETTINGS_ENV, ServeSettings
from ._workers import MASTER_ENV, TEMPORARY_ENV, remove_orphaned_folders, temporary_folder


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(settings: ServeSettings, host: str) -> str:
    """The start-up line about access; refuses a non-loopback address without keys."""
    if settings.api_key_file:
        return f"API keys from {settings.api_key_file}"
    if not is_loopback(host):
        raise InputError(
            f"refusing to listen on {host} without API keys: pass --api-key-file FILE "
            "(create one with `decisionrag keys add FILE --name NAME`), or bind 127.0.0.1")
    return "no API keys configured: serving without authentication, on loopback only"


def serve(
    settings: ServeSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    drain_seconds: float = 30.0,
    log_level: str = "info",
) -> None:
    access = check_binding(settings, host)
    os.environ[SETTINGS_ENV] = settings.to_json()
    common: dict[str, Any] = {
        "host": host, "port": port, "log_config": log_config(log_level), "access_log": False,
        "timeout_graceful_shutdown": drain_seconds, "server_header": False,
        "lifespan": "on", **guarded(settings),
    }
    banner = (f"decisionrag serve: trees {', '.join(name for name, _ in settings.trees)}; judge "
              f"{settings.judge}; preset {settings.preset}; http://{host}:{port} (docs at /docs"
              f"{', console at /ui' if settings.ui else ''}); {workers} worker{'s' * (workers > 1)}; "
              f"{access}{_state_line(settings)}")
    if workers > 1:
        _serve_workers(settings, workers, common, banner)
        return
    from ._app import create_app

    app = create_app(settings)  # the trees opened, the judge loaded (its key checked): then the banner
    print(banner, file=sys.stderr, flush=True)
    server = DrainingServer(uvicorn.Config(app, **common))
    server.run()
    if not server.started:
        raise InputError(f"could not listen on {host}:{port} (see the log above)")


def serve_console(
    settings: ServeSettings,
    *,
    port: int = 0,
    open_browser: bool = False,
    log_level: str = "warning",
    drain_seconds: int = 5,
) -> None:
    """`decisionrag ui`: one process on 127.0.0.1 (a free port unless `port`) serving
    `settings` with the console; once it listens, the console's address is printed on stdout
    (alone on its line, for scripts) and, with `open_browser`, opened."""
    access = check_binding(settings, "127.0.0.1")
    from ._app import create_app

    app = create_app(dataclasses.replace(settings, ui=True))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise InputError(f"could not listen on 127.0.0.1:{port} ({exc.strerror})") from exc
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/ui"
    names = ", ".join(name for name, _ in settings.trees)

    def announce() -> None:
        print(url, flush=True)
        print(f"decisionrag ui: trees {names}; judge {settings.judge}; {access}; Ctrl-C stops",
              file=sys.stderr, flush=True)
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    config = uvicorn.Config(app, log_config=log_config(log_level), access_log=False,
                            timeout_graceful_shutdown=drain_seconds, server_header=False,
                            lifespan="on", **guarded(settings))
    server = DrainingServer(config, on_started=announce)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def guarded(settings: ServeSettings) -> dict[str, Any]:
    """uvicorn options for `GuardedH11Protocol` under `settings`' connection limits (this
    process's; a worker sets its own from the same settings)."""
    GuardedH11Protocol.configure(ConnectionLimits.of(settings.limits))
    return {"http": PROTOCOL}


def _serve_workers(settings: ServeSettings, workers: int, common: dict[str, Any],
                   banner: str) -> None:
    from ._app import create_app

    remove_orphaned_folders()  # of masters killed before they could
    with temporary_folder("metrics") as metrics_dir, state_folder(settings) as (settings, state):
        create_app(dataclasses.replace(settings, warm=False))  # fail fast, here
        print(banner, file=sys.stderr, flush=True)
        os.environ[SETTINGS_ENV] = settings.to_json()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        os.environ[TEMPORARY_ENV] = os.pathsep.join(filter(None, (metrics_dir, state)))
        os.environ[MASTER_ENV] = str(os.getpid())
        config = uvicorn.Config("decisionrag._serve._app:app_from_environment", factory=True,
                                workers=workers, **common)
        Multiprocess(config, sockets=[config.bind_socket()]).run()


@contextlib.contextmanager
def state_folder(settings: ServeSettings) -> Iterator[tuple[ServeSettings, str | None]]:
    """`settings` with the folder the workers share: the one the user named (kept, so
    conversations survive a restart), else a new one removed when the server stops (and
    named second, as temporary); none with a shared Redis (`state_url`)."""
    if settings.state_url is not None:
        yield settings, None
        return
    if settings.state_dir is not None:
        Path(settings.state_dir).mkdir(parents=True, exist_ok=True)
        yield settings, None
        return
    with temporary_folder("state") as folder:
        yield dataclasses.replace(settings, state_dir=folder), folder


def _state_line(settings: ServeSettings) -> str:
    if settings.state_url is None:
        return ""
    from ._redis import redact

    return f"; conversations and key rates in {redact(settings.state_url)}"


class DrainingServer(uvicorn.Server):
    """uvicorn's server; on SIGTERM/SIGINT the app's /readyz turns 503 while in-flight
    requests finish (uvicorn stops accepting and waits for them). `on_started` runs once it
    listens."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self.on_started is not None:
            self.on_started()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        app = self.config.app
        state = getattr(app, "state", None)
        if state is not None:
            state.draining = True
        super().handle_exit(sig, frame)
