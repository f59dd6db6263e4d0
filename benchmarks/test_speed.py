"""Speed, not correctness: `make benchmark` (pytest-benchmark). Ratios, measured in one run.

Times rollout sampling (tokens/s) and one SFT optimizer step per method on the tiny
presets, built from config/default.yaml's architecture, rollout sampling on the real
SmolLM2-135M-Instruct checkpoint with a rank-1 adapter (hf against vLLM), and a train
job of the smoke study's five seeds run as one process per cell against one process per seed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import yaml

from rankone.config import validate
from rankone.models import PRESETS, build_tokenizer
from rankone.models.load import make_policy
from rankone.models.sequences import completion_logprobs, encode_completions, encode_prompts
from rankone.rollouts import make_engine
from tests.conftest import ROOT, smollm2, smoke_dict, study  # noqa: F401 - the smoke study and SmolLM2 fixtures

DEFAULT = validate(yaml.safe_load((ROOT / "config/default.yaml").read_text()))


def tiny(model_name: str):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    torch.set_num_threads(1)
    tokenizer = build_tokenizer()
    config = PRESETS[model_name].make_config(
        DEFAULT.architecture, len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    )
    return AutoModelForCausalLM.from_config(config), tokenizer


PROMPTS = [f"{a:02d}+{b:02d}=" for a, b in zip(range(10, 74, 8), range(5, 69, 8))]


@pytest.mark.parametrize("engine_name", ["hf", "vllm"])
@pytest.mark.parametrize("model_name", ["llama-tiny", "qwen3-tiny"])
def test_sampling_tokens_per_second(benchmark, tmp_path, model_name, engine_name):
    """Same model, prompts and sampling settings for both engines: one RL step's rollouts."""
    if engine_name == "vllm":
        pytest.importorskip("vllm")
    model, tokenizer = tiny(model_name)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    engine = make_engine(engine_name, model, tokenizer, 1.0, DEFAULT.rollout.max_new_tokens, tmp_path, None, 0)
    prompts = PROMPTS[: DEFAULT.rl.prompts_per_step]
    samples = benchmark.pedantic(engine.sample, (prompts, DEFAULT.rl.group_size), rounds=20, warmup_rounds=2)
    tokens = int(samples.completion_mask_B_C.sum())
    benchmark.extra_info["tokens_per_call"] = tokens
    benchmark.extra_info["tokens_per_second"] = tokens / benchmark.stats.stats.mean
    engine.close()


REAL = validate(
    {
        **yaml.safe_load((ROOT / "config/default.yaml").read_text()),
        **yaml.safe_load((ROOT / "config/experiments/real-cpu.yaml").read_text()),
    }
)


@pytest.mark.parametrize("engine_name", ["hf", "vllm"])
def test_real_checkpoint_sampling_tokens_per_second(benchmark, smollm2, engine_name):
    """SmolLM2-135M-Instruct with a rank-1 adapter (as in `make real`): one RL step's rollouts of
    the real-cpu study (prompts per step x group size, up to its max_new_tokens, temperature 1)."""
    if engine_name == "vllm":
        pytest.importorskip("vllm")
    from rankone.data import read_split
    from rankone.models.load import load_base

    cfg, at, _ = smollm2
    torch.set_num_threads(1)
    model, tokenizer = load_base(at.model("smollm2-135m"))
    policy = make_policy(model, "lora-r1", REAL.lora, "all-linear")
    r = REAL.rollout
    engine = make_engine(engine_name, policy, tokenizer, 1.0, r.max_new_tokens, at.model("smollm2-135m"), 1, 0)
    prompts = [row["prompt"] for row in read_split(at.data("rl"), "train")[: REAL.rl.prompts_per_step]]
    torch.manual_seed(0)
    samples = benchmark.pedantic(engine.sample, (prompts, REAL.rl.group_size), rounds=5, warmup_rounds=1)
    tokens = int(samples.completion_mask_B_C.sum())
    benchmark.extra_info["tokens_per_call"] = tokens
    benchmark.extra_info["tokens_per_second"] = tokens / benchmark.stats.stats.mean
    engine.close()


@pytest.mark.parametrize("method", ["fullft", "lora-r1", "lora-r64"])
def test_sft_step(benchmark, method):
    model, tokenizer = tiny("qwen3-tiny")
    policy = make_policy(model, method, DEFAULT.lora, "all-linear")
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-3)
    rows = [(f"key{i % 26:02d}:", f"{i:04d}") for i in range(DEFAULT.sft.batch_size)]
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [p for p, _ in rows])
    completion, mask = encode_completions(tokenizer, [a for _, a in rows])

    def step():
        loss = -completion_logprobs(policy, prompt_ids, prompt_mask, completion, mask).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    benchmark(step)


SEEDS = [0, 1, 2, 3, 4]
CELL = "rl/qwen3-tiny/lora-r1/lr0.01"


@pytest.mark.parametrize("jobs", ["process per seed", "process per cell"])
def test_train_job_processes(benchmark, study, tmp_path, jobs):
    """What one process per (regime, model, method, lr) saves: imports and set-up paid once
    instead of once per seed. Compare the two means of this run."""
    cfg, _ = study
    config = tmp_path / "cell.yaml"
    config.write_text(
        yaml.safe_dump(
            smoke_dict(results_dir=cfg.results_dir, experiment=cfg.experiment, seeds=SEEDS, rl={"steps": 40})
        )
    )
    runs = [CELL] if jobs == "process per cell" else [f"{CELL}/seed{s}" for s in SEEDS]

    def train():
        for run in runs:
            subprocess.run(
                [sys.executable, "-m", "rankone", "train", "--config", str(config), "--run", run],
                check=True,
                capture_output=True,
            )

    benchmark.pedantic(train, rounds=2, warmup_rounds=0)
    benchmark.extra_info["processes"] = len(runs)
