"""Live tracking of training runs (the config's `tracking`). With `trackio`, each run's recorded
steps (the rows of its metrics.jsonl, with the step's seconds) go to trackio's local store
(TRACKIO_DIR, default ~/.cache/huggingface/trackio; no network), one trackio run per rankone run,
named by its path, in a project named after the experiment: `trackio show --project <experiment>`
opens the dashboard. A run resumed from its checkpoint resumes its trackio run; a fresh start opens
a new one. Nothing the study computes reads it back."""

from __future__ import annotations

import math
import numbers

from rankone.config import RunId, StudyConfig
from rankone.io import InputError


class Tracker:
    """Sends a run's recorded steps to trackio, from the main process only; a no-op where tracking is off."""

    def __init__(self, cfg: StudyConfig, run: RunId, main: bool, steps_done: int):
        self.sent = steps_done  # steps a resumed run recorded before: its trackio run has them
        self.trackio = None
        if cfg.tracking != "trackio" or not main:
            return
        try:
            import trackio
        except ImportError:
            raise InputError("tracking: trackio needs the trackio package (in envs/cpu.lock.txt: make env)") from None
        trackio.init(
            project=cfg.experiment,
            name=run.path,
            group=f"{run.regime}/{run.model}/{run.method}",
            config={**run.fields, "experiment": cfg.experiment},
            resume="allow" if steps_done else "never",
        )
        self.trackio = trackio

    def send(self, metrics: list[dict], timings: list[dict]) -> None:
        """The steps recorded since the last call (their numeric values; a NaN or None is left out)."""
        if self.trackio is not None:
            for row, timing in zip(metrics[self.sent :], timings[self.sent :]):
                values = {
                    k: v
                    for k, v in {**row, "seconds": timing.get("seconds")}.items()
                    if k != "step" and isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
                }
                self.trackio.log(values, step=row["step"])
        self.sent = len(metrics)

    def finish(self, metrics: list[dict], timings: list[dict]) -> None:
        self.send(metrics, timings)
        if self.trackio is not None:
            self.trackio.finish()
            self.trackio = None
