"""How much of a study's grid is done: every training run (the study's, its capacity and
lever sub-studies', its edge-extension rounds' and confirmation runs' once select has chosen
their lrs) is completed, diverged, failed, started or missing.

- completed / diverged: its `run.json` says so (written last, so a run without it is never
  counted complete, whatever else its folder holds);
- failed: no `run.json`, and the cell's train log ends in an error;
- started: no `run.json`, but the run folder exists (running now, or interrupted; a rerun
  resumes it from its checkpoint);
- missing: nothing yet.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rankone.config import RunId, StudyConfig
from rankone import substudies
from rankone.io import recorded_provenance
from rankone.paths import Layout

STATES = ("completed", "diverged", "failed", "started", "missing")

# What scripts/share-runs writes in a study's results folder when it seeds the study with another
# study's runs: the source study, the methods and the folders copied. Those runs keep their own
# provenance; the study's time from first job to last counts only its own jobs (own_provenance).
# Kept out of the stages' common code (rankone.stages.COMMON), so that it moves no job's digest.
SHARED_RECORD = "shared.json"
PROVENANCE_FILES = ("manifest.json", "rankone.json", "run.json")  # what recorded_provenance reads


def shared_record(root: str | Path) -> dict:
    """What scripts/share-runs copied into a study's results folder from another study (source,
    methods, folders), or {} when nothing was."""
    path = Path(root) / SHARED_RECORD
    return json.loads(path.read_text()) if path.is_file() else {}


def own_provenance(root: str | Path) -> list[dict]:
    """The provenance records of a study's outputs (rankone.io.recorded_provenance), less those of
    the outputs it copied from another study (shared_record): the jobs it ran itself."""
    copied = set()
    for folder in shared_record(root).get("folders", []):
        for path in (Path(root) / folder).rglob("*.json"):
            if path.name in PROVENANCE_FILES:
                with contextlib.suppress(json.JSONDecodeError, OSError):
                    copied.add(json.dumps(json.loads(path.read_text()).get("provenance") or {}, sort_keys=True))
    return [r for r in recorded_provenance(root) if json.dumps(r, sort_keys=True) not in copied]


@dataclass(frozen=True)
class RunStatus:
    sub_study: str  # "" for the study's own runs, else "capacity n64", "lever calibration", ...
    run: RunId
    state: str
    log: Path | None  # the train log, where one was written


def _failed(log: Path) -> bool:
    if not log.is_file():
        return False
    tail = log.read_text(errors="replace")[-4000:]
    return "Traceback (most recent call last)" in tail or " ERROR " in tail or "rankone invalid" in tail


def run_state(at: Layout, run: RunId) -> str:
    folder = at.train(run)
    record = folder / "run.json"
    if record.is_file():
        try:
            return "diverged" if json.loads(record.read_text()).get("status") == "diverged" else "completed"
        except json.JSONDecodeError:
            return "started"  # a torn write: not complete
    if _failed(at.train_log(run)):
        return "failed"
    return "started" if folder.is_dir() else "missing"


def grid(cfg: StudyConfig, parts: list[tuple] | None = None) -> list[RunStatus]:
    """Every training run of the study and its sub-studies (rankone.substudies), with its state;
    `parts`: the (sub-study, its config) pairs where the caller has built them already."""
    at = Layout(cfg)
    if parts is None:
        parts = substudies.with_configs(cfg, at)
    parts = list(parts) + substudies.extension_rounds(cfg, at) + substudies.confirmations(cfg, at)
    scopes = [("", cfg, at)] + [(s.label, study, s.layout(at)) for s, study in parts]
    out = []
    for label, study, where in scopes:
        if study.awaits_choice:  # its lrs, and so its runs, are not known until select has run
            continue
        for run in study.runs():
            state = run_state(where, run)
            log = where.train_log(run)
            out.append(RunStatus(label, run, state, log if log.is_file() else None))
    return out


def summary(statuses: list[RunStatus]) -> dict[str, int]:
    counts = Counter(s.state for s in statuses)
    return {state: counts.get(state, 0) for state in STATES}


def describe(counts: dict[str, int], always: tuple[str, ...] = ()) -> str:
    """'3 completed, 1 failed, ...': the states with runs (and those in `always`, even at 0)."""
    return ", ".join(f"{n} {state}" for state, n in counts.items() if n or state in always)


def table(statuses: list[RunStatus]) -> list[dict]:
    """One row per (sub-study, regime, model, method): how many runs are in each state."""
    rows: dict[tuple, Counter] = {}
    for s in statuses:
        key = (s.sub_study or "study", s.run.regime, s.run.model, s.run.method)
        rows.setdefault(key, Counter())[s.state] += 1
    return [
        {"part": k[0], "regime": k[1], "model": k[2], "method": k[3], **{state: c.get(state, 0) for state in STATES}}
        for k, c in rows.items()
    ]
