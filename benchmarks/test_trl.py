"""One RL step of rankone's trainer beside TRL's GRPOTrainer, in one run (`make benchmark`).

Same base model and data (the default study's qwen3-tiny, built here by the data and models
stages from config/default.yaml, and its arithmetic train split), each method at the default
study's best RL learning rate (reports/default/data/best_lr.csv),
same batch (4 prompts x 8 samples, up to 5 new tokens, temperature 1), no KL, constant lr,
one thread, FullFT and LoRA r1, 100 steps each. rankone's step times come from its
`timings.jsonl`, TRL's from a callback around each optimizer step; both skip 5 warm-up
steps. Each records its median step and whether it learned (mean reward of the last 10
steps against the first 10); the TRL test records the ratio rankone / TRL, and the
rankone test for LoRA r1 the ratio LoRA / FullFT. Needs envs/bench.txt (TRL).
"""

from __future__ import annotations

import json
import statistics
import time

import pytest
import torch

from rankone.config import RunId
from rankone.data import read_split
from rankone.train import TRAINERS
from tests.conftest import ROOT

STEPS, WARMUP, PROMPTS, GROUP, TOKENS = 100, 5, 4, 8, 5
LR = {"fullft": 1e-4, "lora-r1": 3e-4}  # the default study's best RL lrs for qwen3-tiny


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The default study's data and its qwen3-tiny base model (about 2 minutes to warm-start)."""
    import yaml

    from rankone import data
    from rankone.config import validate
    from rankone.models.build import build
    from rankone.paths import Layout

    root = tmp_path_factory.mktemp("default")
    raw = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    cfg = validate({**raw, "results_dir": str(root / "results"), "reports_dir": str(root / "reports"),
                    "models": ["qwen3-tiny"]})
    at = Layout(cfg)
    for regime in cfg.regimes:
        data.build(cfg, regime, at.data(regime))
    build(cfg, "qwen3-tiny", at.data_root, at.model("qwen3-tiny"))
    return cfg, at
MEDIANS: dict[tuple[str, str], float] = {}


def bench_config(cfg):
    return cfg.model_copy(update={
        "threads": 1,
        "rl": cfg.rl.model_copy(update={"steps": STEPS, "prompts_per_step": PROMPTS, "group_size": GROUP,
                                        "log_every": STEPS, "checkpoint_every": 10 * STEPS}),
        "rollout": cfg.rollout.model_copy(update={"max_new_tokens": TOKENS, "temperature": 1.0}),
    })


def learned(rewards: list[float]) -> dict:
    first, last = sum(rewards[:10]) / 10, sum(rewards[-10:]) / 10
    return {"reward_first_10": first, "reward_last_10": last, "learned": last > first}


@pytest.mark.parametrize("method", ["fullft", "lora-r1"])
def test_rankone_rl_step(benchmark, study, tmp_path, method):
    cfg, at = study
    cfg = bench_config(cfg)
    run = RunId("rl", "qwen3-tiny", method, LR[method], 0)
    out = tmp_path / "run"

    def train():
        TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), out)

    benchmark.pedantic(train, rounds=1, iterations=1)
    seconds = [json.loads(line)["seconds"] for line in (out / "timings.jsonl").read_text().splitlines()]
    rewards = [json.loads(line)["reward"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    MEDIANS["rankone", method] = median = statistics.median(seconds[WARMUP:])
    benchmark.extra_info.update(median_step_seconds=median, **learned(rewards))
    if method != "fullft" and ("rankone", "fullft") in MEDIANS:
        benchmark.extra_info["lora_over_fullft_step"] = median / MEDIANS["rankone", "fullft"]
    assert learned(rewards)["learned"], rewards


@pytest.mark.parametrize("method", ["fullft", "lora-r1"])
def test_trl_grpo_step(benchmark, study, tmp_path, method):
    trl = pytest.importorskip("trl", reason="TRL is a benchmark extra: pip install --no-deps -r envs/bench.txt")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    cfg, at = study
    task = cfg.tasks["rl"].task()
    rows = read_split(at.data("rl"), "train")
    torch.set_num_threads(1)

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.seconds, self.rewards = [], []

        def on_step_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self.t0)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                self.rewards.append(float(logs["reward"]))

    def reward(prompts, completions, answer, **kwargs):
        return [task.reward(c, a) for c, a in zip(completions, answer)]

    times = StepTimes()
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "trl"), per_device_train_batch_size=PROMPTS * GROUP, num_generations=GROUP,
        max_completion_length=TOKENS, temperature=1.0, beta=0.0, scale_rewards="none", loss_type="dapo",
        learning_rate=LR[method], lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_steps=STEPS,
        logging_steps=1, report_to="none", save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True,
        dataloader_num_workers=0,
    )
    peft_config = None
    if method != "fullft":
        from peft import LoraConfig

        peft_config = LoraConfig(r=1, lora_alpha=cfg.lora.alpha, target_modules="all-linear", lora_dropout=0.0)
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(at.model("qwen3-tiny"), dtype="float32"), reward_funcs=reward,
        args=args, train_dataset=Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows]),
        processing_class=AutoTokenizer.from_pretrained(at.model("qwen3-tiny")), peft_config=peft_config,
        callbacks=[times],
    )
    benchmark.pedantic(trainer.train, rounds=1, iterations=1)
    MEDIANS["trl", method] = median = statistics.median(times.seconds[WARMUP:])
    benchmark.extra_info.update(median_step_seconds=median, **learned(times.rewards))
    if ("rankone", method) in MEDIANS:
        benchmark.extra_info["rankone_over_trl_step"] = MEDIANS["rankone", method] / median
    assert learned(times.rewards)["learned"], times.rewards


def test_noop_rerun_of_a_finished_study(benchmark, tmp_path):
    """`snakemake -n` on a finished smoke study, against the time the study took."""
    from tests.conftest import copy_workflow, snakemake

    workdir = copy_workflow(tmp_path / "study")
    started = time.perf_counter()
    assert snakemake(workdir).returncode == 0
    full = time.perf_counter() - started

    def noop():
        out = snakemake(workdir, "-n")
        assert "Nothing to be done" in out.stdout + out.stderr

    benchmark.pedantic(noop, rounds=3, iterations=1)
    benchmark.extra_info.update(full_study_seconds=full, noop_over_full=benchmark.stats.stats.median / full)
