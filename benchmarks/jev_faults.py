"""The fault matrix: what each System One backend does with every `jevcompat mock --fault`.

For each fault the script starts `jevcompat mock --fault NAME` on 127.0.0.1, asks the
jev-compatible (httpx) and typesafe (official SDK) judges one binary request (3 questions),
one choice (4 options) and one choice of 100 options, and compares every answer with the
clean mock's. A fourth probe asks for a model the server does not serve, to show error bodies.
Each cell is ``same`` (the answer equals the clean server's: the fault does not
touch this request, or a documented repair applies), ``Error: message`` (a JudgeError), or
``DIFFERENT`` (a silently different answer: expected only for the faults that change what
the fake model answers, which no single response reveals).

    .venv/bin/python benchmarks/jev_faults.py [--markdown]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from decisionrag._errors import JudgeError
from decisionrag._judges import BinaryRequest, ChoiceRequest, Judge, load_judge

JEVCOMPAT = shutil.which("jevcompat") or str(Path(sys.executable).with_name("jevcompat"))
CONTEXT = "Query: how do I renew a passport?\n[1] Passport renewal\n[2] Tax credits\n[3] Visas"
PROBES: dict[str, BinaryRequest | ChoiceRequest] = {
    "binary": BinaryRequest(CONTEXT, tuple(f"Is it on Page {i}?" for i in (1, 2, 3))),
    "choice": ChoiceRequest(CONTEXT, "Which page?", ("Page 1", "Page 2", "Page 3", "Page 4")),
    "choice-100": ChoiceRequest(CONTEXT, "Which passage?", tuple(f"P{i}" for i in range(100))),
}


def start(*args: str) -> tuple[str, subprocess.Popen[bytes]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([JEVCOMPAT, "mock", "--port", str(port), *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return f"http://127.0.0.1:{port}", process
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("jevcompat mock did not start")


def judges(url: str, model: str, key: str | None) -> dict[str, Judge]:
    os.environ["TYPESAFE_API_KEY"] = key or "any-key"
    os.environ["TYPESAFE_BASE_URL"] = url
    quick: dict[str, object] = {"max_attempts": 2, "backoff_initial": 0.01, "timeout": 10}
    if key:
        quick["api_key"] = key
    return {"jev-compatible": load_judge(f"jev-compatible:{url}", model=model, **quick),
            "typesafe (SDK)": load_judge(f"typesafe:{model}", compression=False, **quick)}


async def ask(judge: Judge, request: BinaryRequest | ChoiceRequest) -> list[float] | JudgeError:
    try:
        if isinstance(request, BinaryRequest):
            return (await judge.binary(request)).probabilities
        return (await judge.choice(request)).probabilities
    except JudgeError as exc:
        return exc


async def run(url: str, key: str | None = None) -> dict[str, dict[str, Outcome]]:
    """Every probe on both paths, plus the binary probe for a model the server lacks."""
    found: dict[str, dict[str, Outcome]] = {}
    for path, judge in judges(url, "jev-latest", key).items():
        found[path] = {name: await ask(judge, request) for name, request in PROBES.items()}
        await judge.aclose()
    for path, judge in judges(url, "no-such-model", key).items():
        found[path]["bad-model"] = await ask(judge, PROBES["binary"])
        await judge.aclose()
    return found


Outcome = list[float] | JudgeError
_URL = re.compile(r"(POST )?https?://\S+: ")


def describe(error: JudgeError) -> str:
    message = _URL.sub("", str(error).split(": ", 1)[-1]).replace("|", "/")
    status = getattr(error, "status", None)
    kind = type(error).__name__ + (f"({status})" if status else "")
    return f"{kind}: {message[:60]}"


def cell(got: Outcome, clean: Outcome) -> str:
    if isinstance(got, JudgeError):
        if isinstance(clean, JudgeError) and describe(got) == describe(clean):
            return "same"
        return describe(got)
    return "same" if got == clean else "DIFFERENT"


def summarise(row: dict[str, Outcome], clean: dict[str, Outcome]) -> str:
    """Probes with the same kind of outcome grouped: ``binary, choice: X (others same)``."""
    groups: dict[str, list[str]] = {}
    for name in row:
        text = cell(row[name], clean[name])
        key = next((g for g in groups if g[:40] == text[:40]), text)
        groups.setdefault(key, []).append(name)
    if len(groups) == 1:
        return f"all: {next(iter(groups))}"
    parts = [f"{', '.join(names)}: {text}" for text, names in groups.items() if text != "same"]
    return "; ".join(parts) + (" (others same)" if "same" in groups else "")


def faults() -> list[tuple[str, str]]:
    listing = subprocess.run([JEVCOMPAT, "mock", "--list-faults"], capture_output=True,
                             text=True, check=True).stdout
    return [(line.split()[0], line.split()[2]) for line in listing.splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    url, process = start()
    clean = asyncio.run(run(url))
    process.terminate()
    header = ["fault", "breaks", "jev-compatible (httpx)", "typesafe (SDK)"]
    rows = []
    for fault, requirement in faults():
        # the auth faults only show on a server that requires a key (which we then send)
        key = "k-123" if fault.startswith("auth-") and fault != "auth-rejects-header" else None
        url, process = start("--fault", fault, *(["--key", key] if key else []))
        try:
            found = asyncio.run(run(url, key))
        finally:
            process.terminate()
            process.wait()
        rows.append([fault, requirement] + [summarise(found[p], clean[p]) for p in found])
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in [header, *rows]:
            print("  ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
