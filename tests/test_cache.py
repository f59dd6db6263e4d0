"""Snakemake's between-workflow cache: a second checkout reuses the base model, unless the
library code the stage runs has changed; a report-only change leaves training alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rankone.stages import source_digest
from tests.conftest import ROOT, venv_env

pytestmark = pytest.mark.slow
TARGET = "results/smoke/models/qwen3-tiny"
LOG = "results/smoke/logs/models/qwen3-tiny.log"


def checkout(dest: Path) -> Path:
    dest.mkdir()
    for item in ("Snakefile", "workflow", "config", "src", "envs"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / item)
    return dest


def build_model(workdir: Path, cache: Path) -> subprocess.CompletedProcess:
    env = venv_env(SNAKEMAKE_OUTPUT_CACHE=str(cache))
    out = subprocess.run([sys.executable, "-m", "snakemake", TARGET, "--cores", "2", "--cache", "data", "models",
                          "--configfile", "config/smoke.yaml"],
                         cwd=workdir, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_second_checkout_reuses_the_cached_model_until_the_code_changes(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    first = checkout(tmp_path / "first")
    build_model(first, cache)
    assert (first / LOG).read_text(), "the first checkout builds the model"
    built = (first / TARGET / "rankone.json").read_bytes()  # provenance: host, start and end time

    second = checkout(tmp_path / "second")
    out = build_model(second, cache)
    assert f"{TARGET}/model.safetensors from cache" in out.stderr
    assert not (second / LOG).read_text(), "the second checkout must not rebuild the model"
    assert (second / TARGET / "rankone.json").read_bytes() == built

    third = checkout(tmp_path / "third")
    with open(third / "src/rankone/models/build.py", "a") as f:
        f.write("\n# a change to the library\n")
    out = build_model(third, cache)
    assert f"{TARGET}/model.safetensors from cache" not in out.stderr
    assert (third / LOG).read_text(), "changed model code must rebuild, not reuse the cache"
    assert (third / TARGET / "rankone.json").read_bytes() != built


def test_code_digests_follow_each_stage_only(tmp_path):
    package = tmp_path / "rankone"
    shutil.copytree(ROOT / "src/rankone", package)
    before = {stage: source_digest(stage, package) for stage in ("data", "models", "train", "analysis", "report")}
    with open(package / "report.py", "a") as f:
        f.write("\n# report change\n")
    after = {stage: source_digest(stage, package) for stage in before}
    assert after["report"] != before["report"]
    assert {k: after[k] for k in ("data", "models", "train", "analysis")} == {
        k: before[k] for k in ("data", "models", "train", "analysis")}
    with open(package / "train/rl.py", "a") as f:
        f.write("\n# trainer change\n")
    assert source_digest("train", package) != before["train"]
    assert source_digest("models", package) == before["models"]
