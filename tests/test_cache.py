"""Snakemake's between-workflow cache: the study in another checkout reuses each base model, its
own, unless the library code the stage runs has changed; a report-only change leaves training
alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rankone.stages import source_digest
from tests.conftest import ROOT, venv_env

pytestmark = pytest.mark.slow
MODELS = {"llama-tiny": "LlamaForCausalLM", "qwen3-tiny": "Qwen3ForCausalLM"}


def checkout(dest: Path) -> Path:
    dest.mkdir()
    for item in ("workflow", "config", "src", "envs"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / item)
    return dest


def build_models(workdir: Path, cache: Path, experiment: str, models=tuple(MODELS)) -> subprocess.CompletedProcess:
    env = venv_env(SNAKEMAKE_OUTPUT_CACHE=str(cache))
    targets = [f"results/{experiment}/models/{m}" for m in models]
    # 20 warm-start steps, not the smoke's 150: what is tested is which model comes back, not how good it is.
    # (A file, not --config: Snakemake reads a nested --config value as a string.)
    (workdir / "config" / "warm.yaml").write_text("pretrain:\n  steps: 20\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            *targets,
            "--cores",
            "2",
            "--cache",
            "data",
            "models",
            "--configfile",
            "config/smoke.yaml",
            "config/warm.yaml",
            "--config",
            f"experiment={experiment}",
        ],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def built(workdir: Path, experiment: str, model: str) -> tuple[str, bytes, str]:
    """A built model's architecture, its provenance bytes (host, times), and its build log."""
    folder = workdir / "results" / experiment / "models" / model
    architecture = json.loads((folder / "config.json").read_text())["architectures"][0]
    log = (workdir / "results" / experiment / "logs" / "models" / f"{model}.log").read_text()
    return architecture, (folder / "rankone.json").read_bytes(), log


def test_a_second_checkout_reuses_each_cached_model_its_own_until_the_code_changes(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    first = checkout(tmp_path / "first")
    build_models(first, cache, "smoke")
    originals = {}
    for model, architecture in MODELS.items():
        arch, provenance, log = built(first, "smoke", model)
        assert arch == architecture and log, f"the first study builds {model} as a {architecture}"
        originals[model] = provenance

    # The same study in another checkout: every model from the cache, each its own architecture
    # (both once shared one cache key, and qwen3-tiny came back a Llama).
    second = checkout(tmp_path / "second")
    out = build_models(second, cache, "smoke")
    for model, architecture in MODELS.items():
        assert f"results/smoke/models/{model}/model.safetensors from cache" in out.stderr
        arch, provenance, log = built(second, "smoke", model)
        assert arch == architecture, f"{model} came from the cache as a {arch}"
        assert provenance == originals[model] and not log, f"{model} must be reused, not rebuilt"

    # Another experiment: its study config (a param) is another file, so it builds its own models.
    out = build_models(second, cache, "smoke-b", models=("qwen3-tiny",))
    assert built(second, "smoke-b", "qwen3-tiny")[0] == MODELS["qwen3-tiny"]

    third = checkout(tmp_path / "third")
    with open(third / "src/rankone/models/build.py", "a") as f:
        f.write("\n# a change to the library\n")
    out = build_models(third, cache, "smoke", models=("qwen3-tiny",))
    assert "results/smoke/models/qwen3-tiny/model.safetensors from cache" not in out.stderr
    arch, provenance, log = built(third, "smoke", "qwen3-tiny")
    assert log and provenance != originals["qwen3-tiny"], "changed model code must rebuild, not reuse the cache"


def smoke_study():
    from rankone.config import layered_files, validate

    return validate(layered_files([ROOT / "config/default.yaml", ROOT / "config/smoke.yaml"]))


def test_code_digests_follow_each_stage_only(tmp_path):
    package = tmp_path / "rankone"
    shutil.copytree(ROOT / "src/rankone", package)
    cfg = smoke_study()
    stages = ("data", "models", "train", "analysis", "report")
    before = {stage: source_digest(stage, cfg, package) for stage in stages}
    with open(package / "report.py", "a") as f:
        f.write("\n# report change\n")
    after = {stage: source_digest(stage, cfg, package) for stage in before}
    assert after["report"] != before["report"]
    assert {k: after[k] for k in ("data", "models", "train", "analysis")} == {
        k: before[k] for k in ("data", "models", "train", "analysis")
    }
    with open(package / "train/rl.py", "a") as f:
        f.write("\n# trainer change\n")
    assert source_digest("train", cfg, package) != before["train"]
    assert source_digest("models", cfg, package) == before["models"]


def test_a_change_to_one_task_reruns_only_the_studies_that_name_it(tmp_path):
    """The math checker's module is run by reasoning-gym (and the hub and dataset tasks), not by
    the arithmetic and facts tasks the smoke study names: a fix to it moves only the first's
    digests; a change to the folder's shared code moves every study's."""
    from rankone.stages import task_files

    package = tmp_path / "rankone"
    shutil.copytree(ROOT / "src/rankone", package)
    smoke = smoke_study()
    assert {t.name for t in smoke.tasks.values()} <= {"arithmetic", "facts"}
    real = smoke.model_copy(update={"tasks": {"rl": smoke.tasks["rl"].model_copy(update={"name": "reasoning-gym"})}})
    tasks = package / "tasks"
    assert tasks / "math_answers.py" in task_files(["reasoning-gym"], package)
    assert tasks / "math_answers.py" not in task_files(["arithmetic", "facts"], package)
    assert task_files(["dataset"], package) == sorted(
        tasks / name for name in ("__init__.py", "base.py", "confidence.py", "dataset.py", "hub.py", "math_answers.py")
    )
    before = {study: source_digest("train", cfg, package) for study, cfg in (("smoke", smoke), ("real", real))}
    with open(tasks / "math_answers.py", "a") as f:
        f.write("\n# a checker fix\n")
    assert source_digest("train", smoke, package) == before["smoke"]
    assert source_digest("train", real, package) != before["real"]
    with open(tasks / "base.py", "a") as f:
        f.write("\n# a change every task runs\n")
    assert source_digest("train", smoke, package) != before["smoke"]
