"""Where `decisionrag eval` writes, under the one output rule (`decisionrag._files.check_output`).

Every output is checked before the evaluation runs (a refused path costs nothing) and again
as it is written: never a file the evaluation reads (the dataset, its queries and labels,
imported runs), a folder, a device or a link; an existing file is replaced when it is what
eval writes there (a JSON report, a TREC run, the report page or its Markdown), any other
only with ``force``. ``--save-runs`` and ``--report`` name folders: a file there is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import (
    HTML_PAGE,
    OutputKind,
    check_output,
    check_output_folder,
    starts_with,
    write_output,
)
from ._runs import TREC_RUN, run_file_name

_JSON_KEYS = ("dataset", "systems", "n_queries")
_MAX_JSON_CHECKED = 256 * 2**20  # bytes: a larger file is not read to see whether it is ours


def _is_report_json(path: Path) -> bool:
    try:
        if path.stat().st_size > _MAX_JSON_CHECKED:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and all(key in data for key in _JSON_KEYS)


EVAL_JSON = OutputKind("a JSON report of decisionrag eval", _is_report_json)
REPORT_MARKDOWN = OutputKind("a report decisionrag eval wrote",
                             lambda path: starts_with(path, b"## Metrics (%), difference", within=16_384))
REPORT_FILES: dict[str, OutputKind] = {"index.html": HTML_PAGE, "report.md": REPORT_MARKDOWN}


@dataclass
class EvalOutputs:
    """The files one evaluation writes and what they must not replace."""

    json_out: str | os.PathLike[str] | None = None
    runs_dir: str | os.PathLike[str] | None = None
    report_dir: str | os.PathLike[str] | None = None
    systems: Sequence[str] = ()
    inputs: list[Path] = field(default_factory=list)
    within: list[Path] = field(default_factory=list)
    force: bool = False

    @classmethod
    def of(cls, dataset: str | os.PathLike[str], read: Iterable[str | os.PathLike[str] | None],
           **options: Any) -> EvalOutputs:
        """Outputs of an evaluation of `dataset` (a file, or a folder whose files it reads)
        that also reads the files `read` (queries, labels, runs)."""
        given = Path(dataset)
        inputs = [Path(p) for p in read if p]
        within = [given] if given.is_dir() else []
        if not given.is_dir():
            inputs.append(given)
        return cls(inputs=inputs, within=within, **options)

    def _rule(self, kind: OutputKind, flag: str) -> dict[str, Any]:
        return {"inputs": self.inputs, "within": self.within, "force": self.force, "kind": kind,
                "flag": flag}

    def planned(self) -> list[tuple[Path, dict[str, Any]]]:
        """Every file this evaluation will write, with its rule."""
        files: list[tuple[Path, dict[str, Any]]] = []
        if self.json_out:
            files.append((Path(self.json_out), self._rule(EVAL_JSON, "--json")))
        if self.runs_dir:
            folder = check_output_folder(self.runs_dir, flag="--save-runs")
            files += [(folder / run_file_name(name), self._rule(TREC_RUN, "--save-runs"))
                      for name in self.systems]
        if self.report_dir:
            folder = check_output_folder(self.report_dir, flag="--report")
            files += [(folder / name, self._rule(kind, "--report"))
                      for name, kind in REPORT_FILES.items()]
        return files

    def check(self) -> None:
        for path, rule in self.planned():
            check_output(path, **rule)

    def write_json(self, report: Mapping[str, Any]) -> Path:
        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        return write_output(Path(self.json_out or ""), text, **self._rule(EVAL_JSON, "--json"))

    def run_rule(self) -> dict[str, Any]:
        return self._rule(TREC_RUN, "--save-runs")

    def report_rule(self, name: str) -> dict[str, Any]:
        return self._rule(REPORT_FILES[name], "--report")
