"""The data stage: a task's train/val/test splits, deterministic from the seed.

Each split goes through `datasets`: a `Dataset` of {"prompt", "answer"} rows (string
features), written as `<split>.parquet`. `manifest.json` records each split's size,
sha256 and the dataset's fingerprint and, where the task knows it, the information
content of the training answers in bits. Stages read splits back with `read_split`.
"""

from __future__ import annotations

import time
from pathlib import Path

from rankone.config import StudyConfig
from rankone.io import atomic_path, provenance, read_json, sha256_file, write_json
from rankone.tasks.base import SPLITS
from rankone.tasks import params_of, task_of


class DataError(ValueError):
    """A dataset on disk that does not match its manifest."""


def build(cfg: StudyConfig, regime: str, out_dir: Path) -> dict:
    started = time.time()
    task_cfg = cfg.tasks[regime]
    task, params = task_of(task_cfg), params_of(task_cfg)
    splits = task.splits(params, cfg.seed)
    task.check_references(splits)
    with atomic_path(out_dir) as tmp:
        fingerprints = {split: write_split(tmp / f"{split}.parquet", splits[split]) for split in SPLITS}
        manifest = {
            "task": task.name,
            "params": params.model_dump(),
            "seed": cfg.seed,
            "splits": {
                s: {"rows": len(splits[s]), "sha256": sha256_file(tmp / f"{s}.parquet"), "fingerprint": fingerprints[s]}
                for s in SPLITS
            },
            "information_bits": task.information_bits(params, splits["train"]),
            "provenance": provenance(cfg, "data", cfg.seed, started, regime),
        }
        write_json(tmp / "manifest.json", manifest)
    return manifest


def write_split(path: Path, rows: list[dict]) -> str:
    """One split as a `datasets.Dataset` written to Parquet; returns the dataset's fingerprint."""
    import datasets

    datasets.disable_progress_bars()
    features = datasets.Features({"prompt": datasets.Value("string"), "answer": datasets.Value("string")})
    dataset = datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in features}, features=features)
    dataset.to_parquet(str(path))
    return dataset._fingerprint


def read_split(data_dir: Path, split: str) -> list[dict]:
    """The rows of one split written by the data stage (read straight from its Parquet: no cache files;
    one file, so no pyarrow.dataset, which imports pandas)."""
    import pyarrow.parquet as pq

    path = Path(data_dir) / f"{split}.parquet"
    if not path.is_file():
        raise DataError(f"{path} is missing; run the data stage first")
    return pq.ParquetFile(path).read().to_pylist()


def verify(data_dir: Path) -> dict:
    """Check every split against the manifest; raise DataError naming the bad file."""
    manifest_path = data_dir / "manifest.json"
    if not manifest_path.is_file():
        raise DataError(f"{manifest_path} is missing; rerun the data stage")
    manifest = read_json(manifest_path)
    for split, meta in manifest["splits"].items():
        path = data_dir / f"{split}.parquet"
        if not path.is_file():
            raise DataError(f"{path} is missing")
        if sha256_file(path) != meta["sha256"]:
            raise DataError(f"{path}: checksum mismatch with manifest.json (file changed or truncated)")
        rows = read_split(data_dir, split)
        if len(rows) != meta["rows"]:
            raise DataError(f"{path}: {len(rows)} rows, manifest says {meta['rows']}")
    return manifest
