"""The data stage: a task's train/val/test splits, deterministic from the seed.

Writes `<split>.jsonl` and `manifest.json` with each split's size and sha256 and, where
the task knows it, the information content of the training answers in bits.
"""

from __future__ import annotations

import time
from pathlib import Path

from rankone.config import StudyConfig
from rankone.io import atomic_path, provenance, read_json, read_jsonl, sha256_file, write_json, write_jsonl
from rankone.tasks.base import SPLITS


class DataError(ValueError):
    """A dataset on disk that does not match its manifest."""


def build(cfg: StudyConfig, regime: str, out_dir: Path) -> dict:
    started = time.time()
    task_cfg = cfg.tasks[regime]
    task, params = task_cfg.task(), task_cfg.typed_params()
    splits = task.splits(params, cfg.seed)
    with atomic_path(out_dir) as tmp:
        for split, rows in splits.items():
            write_jsonl(tmp / f"{split}.jsonl", rows)
        manifest = {
            "task": task.name,
            "params": params.model_dump(),
            "seed": cfg.seed,
            "splits": {s: {"rows": len(splits[s]), "sha256": sha256_file(tmp / f"{s}.jsonl")} for s in SPLITS},
            "information_bits": task.information_bits(params, splits["train"]),
            "provenance": provenance(cfg, "data", cfg.seed, started, regime),
        }
        write_json(tmp / "manifest.json", manifest)
    return manifest


def verify(data_dir: Path) -> dict:
    """Check every split against the manifest; raise DataError naming the bad file."""
    manifest_path = data_dir / "manifest.json"
    if not manifest_path.is_file():
        raise DataError(f"{manifest_path} is missing; rerun the data stage")
    manifest = read_json(manifest_path)
    for split, meta in manifest["splits"].items():
        path = data_dir / f"{split}.jsonl"
        if not path.is_file():
            raise DataError(f"{path} is missing")
        if sha256_file(path) != meta["sha256"]:
            raise DataError(f"{path}: checksum mismatch with manifest.json (file changed or truncated)")
        rows = read_jsonl(path)
        if len(rows) != meta["rows"]:
            raise DataError(f"{path}: {len(rows)} rows, manifest says {meta['rows']}")
    return manifest
