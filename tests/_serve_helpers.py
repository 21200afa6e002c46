"""A small corpus tree and a real uvicorn server on 127.0.0.1 (a free port) for the serve tests."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from _processes import free_socket, http_ok, wait_until
from decisionrag._judges import Judge
from decisionrag._serve import ServeLimits, ServeSettings
from decisionrag._serve._app import create_app
from decisionrag._tree import DocumentSpec, PassageSpec, TreeWriter

CORPUS_A = {
    "Travel": {
        "https://example.org/passports": ("Passports", [
            (("Renew",), "Renew your passport online with a photo and the old passport."),
            (("Lost",), "Report a lost or stolen passport before you apply for a new one."),
        ]),
        "visas": ("Visas", [(("Apply",), "Apply for a visa at the embassy of the country you visit.")]),
    },
    "Money": {
        "taxes": ("Income tax", [
            (("Deadlines",), "The income tax return is due on the last day of January."),
            (("Refunds",), "Claim a tax refund if you paid too much income tax."),
        ]),
        "benefits": ("Benefits", [(("Eligibility",), "Check eligibility for housing benefit and carers.")]),
    },
}
CORPUS_B = {
    "Garden": {
        "roses": ("Roses", [(("Pruning",), "Prune roses in late winter before new growth starts.")]),
        "lawns": ("Lawns", [(("Mowing",), "Mow the lawn weekly in summer and keep the blades sharp.")]),
    },
}


def write_tree(path: Path, corpus: dict[str, Any] = CORPUS_A) -> Path:
    """Write `corpus` (group -> doc key -> (title, [(section, text)])) to `path` atomically."""
    with TreeWriter(path) as writer:
        for group, docs in corpus.items():
            for key, (title, passages) in docs.items():
                specs = [PassageSpec(text, section=section, key=f"{key}#p{i}", meta={"lang": "en"})
                         for i, (section, text) in enumerate(passages)]
                writer.add_document(DocumentSpec(title, specs, key=key, groups=(group,),
                                                 meta={"source": key}))
    return path


def settings(trees: dict[str, Path], **changes: Any) -> ServeSettings:
    limits = changes.pop("limits", ServeLimits())
    return ServeSettings(trees=tuple((name, str(path)) for name, path in trees.items()),
                         judge="scripted", limits=limits, reload_seconds=changes.pop("reload_seconds", 0.0),
                         **changes)


class Live(str):
    """A live server's base URL, with the app it serves (`.app`, in this process)."""

    app: Any


@contextmanager
def live_server(serve_settings: ServeSettings, judge: Judge | None = None) -> Iterator[Live]:
    """The real app under uvicorn in a thread, on a free loopback port; yields its base URL."""
    app = create_app(serve_settings, judge=judge)
    sock = free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    live = Live(f"http://127.0.0.1:{port}")
    live.app = app
    try:
        yield live
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def start_cli_server(
    args: list[str], port: int, *, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`python -m decisionrag serve ARGS --port PORT` in a subprocess; returns once /readyz is 200."""
    full_env = {**os.environ, **(env or {})}
    process = subprocess.Popen(
        [sys.executable, "-m", "decisionrag", "serve", *args, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    wait_until(process, http_ok(f"http://127.0.0.1:{port}/readyz"), what="serve", timeout=60,
               log=lambda: process.stderr.read() if process.stderr else "")
    return process


@contextmanager
def answering_server(folder: Path, generator_url: str) -> Iterator[Live]:
    """A live server over the small corpus whose answer model is the chat stand-in at
    `generator_url` (so `POST /v1/answer` exists)."""
    tree = write_tree(folder / "docs.tree")
    with live_server(settings({"docs": tree}, generator="openai-compatible:stand-in",
                              generator_base_url=generator_url)) as url:
        yield url


def library_tree(path: Path) -> Path:
    """Six books under Old and New, each with a year, a language and (all but one) tags;
    every first passage carries a page number (metadata for the filter and console tests)."""
    books = [("Dune", 1965, "en", ["sf"]), ("Solaris", 1961, "pl", ["sf"]),
             ("Emma", 1815, "en", ["novel"]), ("Ubik", 1969, "en", ["sf", "novel"]),
             ("Candide", 1759, "fr", ["satire"]), ("Walden", 1854, "en", [])]
    with TreeWriter(path) as writer:
        for title, year, lang, tags in books:
            meta: dict[str, Any] = {"year": year, "lang": lang, **({"tags": tags} if tags else {})}
            passages = [PassageSpec(f"{title} opens with a chapter.", key=f"{title}#p0", meta={"page": 1}),
                        PassageSpec(f"{title} ends with another chapter.", key=f"{title}#p1")]
            writer.add_document(DocumentSpec(title, passages, key=title.lower(), meta=meta,
                                             groups=("Old" if year < 1900 else "New",)))
    return path


def console_trees(folder: Path) -> dict[str, Path]:
    """docs (the default), books (metadata to filter on) and garden, for the console tests."""
    return {"docs": write_tree(folder / "docs.tree"), "books": library_tree(folder / "books.tree"),
            "garden": write_tree(folder / "garden.tree", CORPUS_B)}
