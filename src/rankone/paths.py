"""Where each stage writes: results/<experiment>/<stage>/..., reports/<experiment>/ (a table's
stage folder is its module's: rankone.outputs.TABLES).

The Snakemake rules declare the same layout (workflow/rules/common.smk reads it from here).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING

from rankone.config import RunId, StudyConfig
from rankone.io import atomic_path
from rankone.outputs import TABLES

if TYPE_CHECKING:  # a train or models job never reads a table: pandas (0.5 s to import) stays out of it
    import pandas as pd

SNAPSHOTS = "snapshots"  # in a run's folder: the weights at each late checkpoint


def snapshot(run_dir: Path, step: int) -> Path:
    """A run's weights after `step` updates, at a late checkpoint before its last (evaluate.at)."""
    return run_dir / SNAPSHOTS / f"step{step}"


class Layout:
    def __init__(self, cfg: StudyConfig):
        self.root = Path(cfg.results_dir) / cfg.experiment
        self.runs_root = self.root  # where train/ is: an extension round's runs are the sweep's own
        self.report = Path(cfg.reports_dir) / cfg.experiment
        self.models = self.root / "models"
        self.data_root = self.root / "data"
        self.logs = self.root / "logs"  # the rules' logs; a sub-study's under logs/<its parts>/

    def capacity(self, n_facts: int | str) -> Layout:
        """The capacity sub-study at one table size (capacity/n<n_facts>/; the workflow passes
        its "{n_facts}" wildcard, so the folder names are written here only)."""
        return self._sub("capacity", f"n{n_facts}")

    def lever(self, name: str) -> Layout:
        """The levers sub-study of one lever (levers/<name>/)."""
        return self._sub("levers", name)

    def confirm(self) -> Layout:
        """The confirmation sub-study (confirm/): its own runs and evaluations, the study's data and
        base models."""
        sub = self._sub("confirm")
        sub.data_root = self.data_root
        return sub

    def extension(self, round_: int | str) -> Layout:
        """An edge-extension round (extend/r<round>/; analysis.lr_extension): its own evaluations; its runs
        are more of the sweep's, under the study's train/ beside the grid's; the study's data and base models."""
        sub = self._sub("extend", f"r{round_}")
        sub.data_root, sub.runs_root, sub.logs = self.data_root, self.runs_root, self.logs
        return sub

    def select_round(self, round_: int) -> Path:
        """The select stage's table after extension rounds 1..`round_` (round 0: the sweep alone), which
        round `round_` + 1 extends; the last round's is best_lr.csv."""
        return self.table("best_lr.csv").parent / "rounds" / f"best_lr.r{round_}.csv"

    def _sub(self, *parts: str) -> Layout:
        """A sub-study: its own data, runs and evaluations under `parts`, the study's base models."""
        sub = copy.copy(self)
        sub.root = sub.runs_root = self.root.joinpath(*parts)
        sub.data_root = sub.root / "data"
        sub.logs = self.logs.joinpath(*parts)
        return sub

    @property
    def study_config(self) -> Path:
        return self.root / "study.yaml"

    def data(self, regime: str) -> Path:
        return self.data_root / regime

    def model(self, model: str) -> Path:
        return self.models / model

    def rollouts(self, model: str) -> Path:
        return self.root / "rollouts" / model

    def train(self, run: RunId) -> Path:
        return self.runs_root / "train" / run.path

    def train_log(self, run: RunId) -> Path:
        """The train job's log (one job trains every seed of the run's cell)."""
        return self.logs / "train" / f"{run.cell}.log"

    def evaluation(self, regime: str, model: str, method: str) -> Path:
        """One JSON line per run of (regime, model, method)."""
        return self.root / "evaluate" / regime / model / method / "metrics.jsonl"

    @property
    def analysis(self) -> Path:
        """The folder of rankone.analysis' tables (the select and analysis stages')."""
        return self.root / "analysis"

    def table(self, name: str) -> Path:
        """A table, in the results folder of the stage module that writes it (rankone.outputs.TABLES:
        analysis/, updates/, capacity/, truncation/ or levers/)."""
        return self.root / TABLES[name].stage / name

    def write_tables(self, frames: dict[str, pd.DataFrame]) -> None:
        """Each table (CSV) to its folder, each written whole or not at all."""
        for name, frame in frames.items():
            with atomic_path(self.table(name)) as tmp:
                frame.to_csv(tmp, index=False)
