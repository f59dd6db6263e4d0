"""The paper-scale configs: their DAG builds here, offline, downloading nothing, and every
job that loads a model asks the scheduler for a GPU and memory."""

from __future__ import annotations

import re

import pytest

from rankone.config import RESOURCE_STAGES, load, validate
from rankone.models import PRESETS
from tests.conftest import ROOT, copy_workflow, snakemake

PAPER = ("config/experiments/paper.yaml",)
GSM8K = (*PAPER, "config/experiments/paper-gsm8k.yaml")


@pytest.mark.parametrize("configs, task", [(PAPER, "math"), (GSM8K, "gsm8k")], ids=["math", "gsm8k"])
def test_the_paper_dag_builds_offline_and_downloads_nothing(tmp_path, configs, task):
    workdir = copy_workflow(tmp_path / "repo")
    hf_home = tmp_path / "hf"
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(hf_home)}
    out = snakemake(workdir, "-n", configs=configs, cores=False, env=offline)
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", out.stdout.split("Job stats:")[1], re.M)}
    methods = 1 + 9  # FullFT and ranks 1, 2, 4, ..., 256
    assert jobs["train"] == 2 * (3 + 9 * 4) and jobs["evaluate"] == 2 * methods
    trains = re.findall(r"^rule train:$.*?^    wildcards: (.*?)$\n^    resources: (.*?)$", out.stdout, re.M | re.S)
    assert len(trains) == jobs["train"]
    for wildcards, resources in trains:
        # the planner's numbers: FullFT on a node of 8 GPUs (sharded), every LoRA rank on one
        wanted = r"gpu=8.*mem_mb=640000" if "method=fullft" in wildcards else r"gpu=1.*mem_mb=160000"
        assert re.search(wanted, resources), (wildcards, resources)
    assert not hf_home.exists() or not any(hf_home.rglob("*.*")), "the dry run wrote to the hub cache"
    cfg = validate(load_layers(configs))
    assert cfg.tasks["rl"].name == task and cfg.dtype == "bfloat16" and cfg.rollout.engine == "vllm"


def load_layers(configs):
    from rankone.config import layered_files

    return layered_files([ROOT / "config" / "default.yaml", *(ROOT / c for c in configs)], {})


def test_the_paper_models_are_the_pinned_8b_base_models():
    cfg = validate(load_layers(PAPER))
    assert {PRESETS[m].repo_id for m in cfg.models} == {"meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B-Base"}
    assert sorted(int(m.removeprefix("lora-r")) for m in cfg.methods if m != "fullft") == [2**i for i in range(9)]
    assert set(cfg.resources) == set(RESOURCE_STAGES)
    assert all(cfg.resources[s].gpu == 1 for s in RESOURCE_STAGES if s != "models")
    assert cfg.resources["train"].for_job("qwen3-8b-base", "fullft") == {"gpu": 8, "mem_mb": 640000, "runtime": 2880}
    assert cfg.resources["train"].for_job("qwen3-8b-base", "lora-r16") == {"gpu": 1, "mem_mb": 160000, "runtime": 2880}


def test_resources_are_scheduling_only_and_checked(tmp_path):
    from rankone.config import ConfigError

    base = load(ROOT / "config" / "smoke.yaml").model_dump()
    with pytest.raises(ConfigError, match="resources"):
        validate({**base, "resources": {"train": {"gpu": -1}}})
    with pytest.raises(ConfigError, match="resources"):
        validate({**base, "resources": {"report": {"gpu": 1}}})
