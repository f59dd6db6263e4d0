"""scripts/share-runs: a study's FullFT runs copied into a study that differs only in its other methods."""

from __future__ import annotations

import os
import subprocess
import sys

from rankone.cli import write_resolved
from rankone.config import layered_files, validate
from rankone.io import recorded_provenance
from rankone.status import SHARED_RECORD, own_provenance, shared_record
from tests.conftest import ROOT, venv_env

CROSSOVER = ["config/default.yaml", "config/experiments/crossover.yaml"]


def config(size: str) -> list[str]:
    return [str(ROOT / f) for f in [*CROSSOVER, f"config/experiments/crossover/{size}.yaml"]]


def share(source, dest, size: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts/share-runs"), str(source), str(dest), "--config", *config(size)],
        env=venv_env(),
        capture_output=True,
        text=True,
    )


def test_fullft_runs_are_copied_with_their_times_and_nothing_else(tmp_path):
    source = tmp_path / "results/crossover-n64-o_proj"
    write_resolved(validate(layered_files(config("n64-o_proj"))), source / "study.yaml")
    made = [
        "data/rl/manifest.json",
        "models/qwen3-tiny/config.json",
        "train/rl/qwen3-tiny/fullft/lr0.0001/seed0/run.json",
        "confirm/evaluate/sft/qwen3-tiny/fullft/metrics.jsonl",
        "logs/train/rl/qwen3-tiny/fullft/lr0.0001.log",
        "train/rl/qwen3-tiny/lora-r1-o_proj/lr0.0003/seed0/run.json",
        "analysis/verdicts.csv",
    ]
    for name in made:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text('{"provenance": {"started": "2026-12-06T00:00:00"}}' if "run.json" in name else name)
        os.utime(source / name, (1_000_000, 1_000_000))
    dest = tmp_path / "results/crossover-n64-mlp"

    out = share(source, dest, "n64-mlp")
    assert out.returncode == 0, out.stderr
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() and p.name != SHARED_RECORD)
    assert copied == sorted(made[:5])  # neither o_proj's runs nor the analysis
    record = shared_record(dest)
    assert record["source"] == "crossover-n64-o_proj" and record["methods"] == ["fullft"]
    assert own_provenance(dest) == [] and len(recorded_provenance(dest)) == 1  # the run's
    assert all((dest / name).stat().st_mtime == 1_000_000 for name in copied)  # Snakemake sees them done

    again = share(source, dest, "n64-mlp")
    assert again.returncode != 0 and "exists already: nothing copied" in again.stderr

    elsewhere = share(source, tmp_path / "results/crossover-n128-mlp", "n128-mlp")  # another table size
    assert elsewhere.returncode != 0 and "the data stage's config for rl" in elsewhere.stderr
    assert not (tmp_path / "results/crossover-n128-mlp").exists()
