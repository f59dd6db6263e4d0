"""`rankone plan`: shapes against the hub's config.json, FLOPs against a hand count, predicted
memory against a measured RL step, and jobs that cannot fit refused before anything runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from rankone import checks, plan
from rankone.config import ConfigError, layered_files, validate
from rankone.io import InputError
from rankone.models import PRESETS, HubPreset, Shape
from tests.conftest import ROOT, copy_workflow, real_config, snakemake

HUB_CONFIGS = ROOT / "tests/fixtures/hub/configs"
FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "tie_word_embeddings",
)


@pytest.mark.parametrize("name", [n for n, p in PRESETS.items() if isinstance(p, HubPreset)])
def test_each_hub_preset_carries_its_config_json_numbers(name):
    spec = PRESETS[name]
    hub = json.loads((HUB_CONFIGS / spec.repo_id.replace("/", "--") / "config.json").read_text())
    assert {f: getattr(spec.shape, f) for f in FIELDS} == {f: hub[f] for f in FIELDS}
    assert spec.shape.head_dim == hub.get("head_dim", hub["hidden_size"] // hub["num_attention_heads"])
    assert spec.shape.config_class == hub["architectures"][0].replace("ForCausalLM", "Config")


def test_the_gguf_preset_shape_is_the_converted_checkpoints(smollm2):
    cfg, at, _ = smollm2
    converted = json.loads((at.model("smollm2-135m") / "config.json").read_text())
    shape = PRESETS["smollm2-135m"].shape
    assert {f: getattr(shape, f) for f in FIELDS} == {f: converted[f] for f in FIELDS}
    assert (
        plan.counts(cfg, shape, None)[0]
        == json.loads((at.model("smollm2-135m") / "rankone.json").read_text())["parameters"]
    )


def test_flops_match_a_hand_count():
    # 2 blocks of width 8 (2 query heads, 1 key/value head of 4), MLP 16, vocabulary 10, untied.
    shape = Shape("LlamaConfig", 8, 16, 2, 2, 1, 4, 10, False)
    linears = sum(m.weight.numel() for m in plan.meta_model(shape).modules() if isinstance(m, torch.nn.Linear))
    per_block = 8 * 8 + 8 * 4 + 8 * 4 + 8 * 8 + 3 * 8 * 16  # q, k, v, o; gate, up, down
    assert linears == 2 * per_block + 8 * 10 == 1232  # the blocks and the LM head, on the meta model
    assert plan.forward_flops_per_token(shape, 0) == 2 * 1232  # 2 FLOPs a multiply-add
    # Three causal tokens attend to 1, 2 and 3 positions: scores and values, 2 x 8 x context
    # multiply-adds per block.
    assert plan.sequence_flops(shape, 3) == 3 * 2 * 1232 + 2 * 2 * (2 * 8 * (1 + 2 + 3))


# One RL step as a run's second step takes it (Adam's state already there): forward and
# backward on fixed tokens, then the Adam step, at each batch size in turn (one process, one
# model load); peak RSS above the process's after importing
# torch, transformers and peft (the libraries are not the job's). The peak is VmHWM, this
# process's own (getrusage's ru_maxrss keeps the parent's across fork and exec: under pytest it
# read 1,347 MiB for an 881 MiB step). Every large block is mmapped (MALLOC_MMAP_THRESHOLD_), so
# a freed tensor leaves RSS as it leaves a GPU allocator's live bytes: glibc's heap otherwise
# keeps some, and one step's peak moved 912-1,094 MiB between runs.
STEP = r"""
import resource, sys
import torch, transformers, peft
from rankone.config import LoraConfig
from rankone.models.load import load_base, make_policy
from rankone.models.sequences import completion_logprobs
model_dir, method, L, C, *batches = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
torch.set_num_threads(1)
base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
torch.manual_seed(0)
model, _ = load_base(model_dir)
policy = make_policy(model, method, None if method == "fullft" else LoraConfig(), "all-linear").train()
optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-6)
for p in optimizer.param_groups[0]["params"]:
    p.grad = torch.zeros_like(p)
optimizer.step()
optimizer.zero_grad(set_to_none=True)
V = model.config.vocab_size
for B in batches:  # smallest first: the high-water mark after each step is that step's peak
    prompt, completion = torch.randint(0, V, (B, L)), torch.randint(0, V, (B, C))
    logprobs = completion_logprobs(policy, prompt, torch.ones_like(prompt), completion, torch.ones_like(completion))
    (-logprobs.mean()).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    del logprobs
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
    print(int(hwm.split()[1]) * 1024 - base)
"""


@pytest.mark.parametrize("method", ["fullft", "lora-r1"])
def test_predicted_peak_of_an_rl_step_is_within_30_percent_of_the_measured(smollm2, tmp_path, method):
    cfg, at, _ = smollm2
    L, C, batches = 32, 64, (2, 8)
    out = subprocess.run(
        [sys.executable, "-c", STEP, str(at.model("smollm2-135m")), method, str(L), str(C), *map(str, batches)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"},
    )
    peaks = [int(line) for line in out.stdout.strip().splitlines()[-len(batches) :]]
    for B, peak in zip(batches, peaks):
        study = validate(
            real_config(
                tmp_path,
                dtype="float32",
                rl={"steps": 1, "prompts_per_step": B // 2, "group_size": 2},
                rollout={"max_new_tokens": C},
                plan={"prompt_tokens": L},
            )
        )
        e = plan.estimate(study, "train", "smollm2-135m", method)
        predicted = e.weights + e.optimizer + e.update()  # no sampling in this step
        print(f"\n{method} B={B}: predicted {predicted / 2**20:.0f} MiB, measured {peak / 2**20:.0f} MiB")
        assert 0.7 * peak <= predicted <= 1.3 * peak, (B, predicted / 2**20, peak / 2**20)


def paper(**resources) -> dict:
    data = layered_files([ROOT / "config/default.yaml", ROOT / "config/experiments/paper.yaml"])
    if resources:
        data["resources"] = {**data["resources"], **resources}
    return data


def test_fullft_8b_on_one_80_gb_gpu_is_refused_lora_rank_1_is_not():
    one_gpu = validate(paper(train={"gpu": 1, "mem_mb": 160000, "runtime": 2880}))
    assert one_gpu.plan.gpu_memory_gb == 80
    with pytest.raises(InputError) as refused:
        plan.check(one_gpu)
    assert "train llama-3.1-8b fullft: needs" in str(refused.value)
    assert "train qwen3-8b-base fullft: needs" in str(refused.value)
    assert "lora" not in str(refused.value)  # every rank up to 256 fits one GPU
    estimates = plan.check(validate(paper()))  # as committed: FullFT on a node of 8 (sharded), LoRA on one
    fullft = next(e for e in estimates if e.stage == "train" and e.method == "fullft")
    lora = next(e for e in estimates if e.stage == "train" and e.method == "lora-r1")
    assert fullft.gpus_given == 8 and 1 < fullft.gpus_needed <= 8 and lora.gpus_given == lora.gpus_needed == 1
    assert fullft.parameters == fullft.trainable > 8e9 and lora.trainable < 1e-3 * lora.parameters


SMALL_GPU = "resources:\n  train: {gpu: 1, by_method: {lora: {gpu: 2}}}\nplan: {gpu_memory_gb: 0.001}\n"


def test_rankone_plan_names_the_job_that_cannot_fit(tmp_path):
    (tmp_path / "small-gpu.yaml").write_text(SMALL_GPU)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rankone",
            "plan",
            "--config",
            "config/default.yaml",
            "config/smoke.yaml",
            str(tmp_path / "small-gpu.yaml"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 1, out.stderr[-2000:]
    assert "| train | llama-tiny | lora-r1 |" in out.stdout and "GPU-hours" in out.stdout
    assert "cannot fit: train llama-tiny fullft: needs" in out.stderr
    assert "it fits no number of GPUs" in out.stderr  # and no setting would: nothing is suggested


def test_snakemake_refuses_a_study_whose_jobs_cannot_fit_before_running_any(tmp_path):
    workdir = copy_workflow(tmp_path / "repo")
    (workdir / "small-gpu.yaml").write_text(SMALL_GPU)
    out = snakemake(workdir, "-n", configs=("config/smoke.yaml", "small-gpu.yaml"))
    said = out.stdout + out.stderr
    assert out.returncode != 0 and "Job stats" not in said
    assert "train llama-tiny fullft: needs" in said and "resources.train gives 1 x" in said, said[-3000:]
    assert "train llama-tiny lora-r1: needs" in said and "gives 2 x" in said


def test_plan_names_the_setting_that_makes_a_job_fit_and_the_24_gb_config_fits():
    """gpu-1.yaml on a 24 GB card: Qwen3-0.6B's train jobs do not fit, and the message names the
    micro-batch that would make each fit (with the peak it would need); config/experiments/gpu-24gb.yaml
    takes it and every job fits."""
    files = [ROOT / "config/default.yaml", ROOT / "config/experiments/gpu-1.yaml"]
    small = validate(layered_files(files, {"plan": {"gpu_memory_gb": 24}}))
    lines = plan.misfits(small, plan.plan(small))
    qwen = next(line for line in lines if line.startswith("train qwen3-0.6b fullft"))
    assert re.search(r"it fits with rl\.micro_batch: \d+ \(\d+ GB\)", qwen), qwen
    micro = int(re.search(r"rl\.micro_batch: (\d+)", qwen)[1])
    fixed = validate(
        layered_files(files, {"plan": {"gpu_memory_gb": 24}, "models": ["qwen3-0.6b"], "rl": {"micro_batch": micro}})
    )
    assert plan.misfits(fixed, plan.plan(fixed)) == []
    config = validate(layered_files([*files, ROOT / "config/experiments/gpu-24gb.yaml"]))
    assert plan.check(config) and config.plan.gpu_memory_gb == 24


def test_the_one_gpu_profile_gives_snakemake_one_gpu(tmp_path):
    workdir = copy_workflow(tmp_path / "repo")
    out = snakemake(workdir, "-n", "--workflow-profile", "workflow/profiles/gpu-1", cores=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Using workflow specific profile workflow/profiles/gpu-1" in out.stdout + out.stderr


def test_the_one_gpu_study_fits_one_gpu_and_its_dag_builds_offline(tmp_path):
    configs = ("config/experiments/gpu-1.yaml",)
    cfg = validate(layered_files([ROOT / "config/default.yaml", *(ROOT / c for c in configs)]))
    estimates = plan.check(cfg)
    assert {e.gpus_given for e in estimates} == {e.gpus_needed for e in estimates} == {1}
    assert cfg.models == ["qwen3-0.6b", "llama-3.2-1b"] and cfg.tasks["rl"].name == "gsm8k"
    workdir = copy_workflow(tmp_path / "repo")
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = snakemake(workdir, "-n", configs=configs, cores=False, env=offline)
    assert out.returncode == 0, out.stderr[-3000:]
    train = int(re.search(r"^train\s+(\d+)$", out.stdout, re.M)[1])
    assert train == 2 * (3 + 4 * 4)  # per model: FullFT's 3 lrs, 4 ranks x 4 lrs (a job trains a cell's seeds)


def test_vllm_takes_what_the_learner_leaves_and_plan_counts_its_sampling_waves():
    from rankone.device import sampler_share

    GB = 1e9
    assert sampler_share(60 * GB, 80 * GB, 8 * GB, 0.9) == 0.55  # free, less Adam to come, less the headroom
    assert sampler_share(5 * GB, 80 * GB, 8 * GB) == 0.05  # never less than 5%
    left = plan.check(validate(paper()))  # rollout.gpu_memory_utilization unset
    data = paper()
    data["rollout"] = {**data["rollout"], "gpu_memory_utilization": 0.3}  # the old default
    fixed = plan.check(validate(data))

    def lora(estimates):
        return next(e for e in estimates if e.stage == "train" and e.method == "lora-r1")

    assert lora(left).max_num_seqs == 512  # paper.yaml's whole step: 32 prompts x 16 samples
    assert lora(fixed).waves(1) > 2 * lora(left).waves(1) >= 2, (lora(fixed).waves(1), lora(left).waves(1))
    usable = 0.9 * 80 * GB  # what the learner leaves fills the usable memory, and no more
    assert lora(left).resident() + lora(left).sampler_at(1) == pytest.approx(usable)
    assert any("sampling waves a step" in note for note in lora(fixed).notes)


def hub_cache(root, repo_id: str, revision: str):
    """A Hugging Face hub cache holding one checkpoint's config.json (the fixture's) at `revision`,
    laid out as huggingface_hub lays it out: nothing downloaded."""
    snapshot = root / f"models--{repo_id.replace('/', '--')}" / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text((HUB_CONFIGS / repo_id.replace("/", "--") / "config.json").read_text())
    return root


def test_a_hub_model_named_in_the_config_plans_as_its_preset(tmp_path, monkeypatch):
    """hub_models: a repo id and revision, its shape read from config.json in the hub cache (offline),
    sizes every job as the registry's preset of the same checkpoint does; a revision the cache lacks
    is a one-line error naming the entry."""
    from rankone import presets

    qwen = PRESETS["qwen3-0.6b"]
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache(tmp_path / "hub", qwen.repo_id, qwen.revision)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    presets.hub_shape.cache_clear()
    data = layered_files([ROOT / "config/default.yaml", ROOT / "config/experiments/gpu-1.yaml"])
    by_preset = plan.check(validate({**data, "models": ["qwen3-0.6b"]}))
    mine = {"my-qwen": {"repo_id": qwen.repo_id, "revision": qwen.revision}}
    by_config = plan.check(validate({**data, "models": ["my-qwen"], "hub_models": mine}))
    assert presets.hub_shape(qwen.repo_id, qwen.revision) == qwen.shape
    assert [(e.stage, e.method, e.parameters, e.peak()) for e in by_config] == [
        (e.stage, e.method, e.parameters, e.peak()) for e in by_preset
    ]
    missing = {"my-qwen": {"repo_id": qwen.repo_id, "revision": "0" * 40}}
    with pytest.raises(ConfigError, match=r"hub_models\.my-qwen: no config.json for Qwen/Qwen3-0.6B-Base@0{40}"):
        checks.validate({**data, "models": ["my-qwen"], "hub_models": missing})
    with pytest.raises(ConfigError, match=r"unknown model 'their-qwen'.*hub_models"):
        checks.validate({**data, "models": ["their-qwen"]})
