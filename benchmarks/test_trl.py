"""One RL step of rankone's trainer beside TRL's GRPOTrainer, in one run (`make benchmark`).

Same base model and data (the default study's qwen3-tiny, built here by the data and models
stages from config/default.yaml, and its arithmetic train split), each method at the default
study's best RL learning rate (reports/default/data/best_lr.csv), same batch (4 prompts x 8
samples, up to 5 new tokens, temperature 1), no KL, constant lr, one thread, FullFT and LoRA
r1, 100 steps each. rankone's step times come from its `timings.jsonl`, TRL's from a callback
around each optimizer step; both skip 5 warm-up steps. Each records its median step and
whether it learned (mean reward of the last 10 steps against the first 10); the TRL test
records the ratio rankone / TRL.

Also, as ratios from the same run: LoRA r1's step against FullFT's (whole step, and the update
alone) on both tiny models and on SmolLM2-135M; the model work of one step (sampling, the
learner's forward, backward, Adam, timed alone) against both trainers' steps; and a no-op
`snakemake -n` against the whole study, for the smoke study and the default study."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest
import torch

from rankone.config import RunId
from rankone.data import read_split
from rankone.train import TRAINERS
from rankone.tasks import task_of
from tests.conftest import ROOT, smollm2  # noqa: F401 - the SmolLM2 fixture

STEPS, WARMUP, PROMPTS, GROUP, TOKENS = 100, 5, 4, 8, 5


def best_rl_lrs() -> dict[tuple[str, str], float]:
    """The default study's best RL learning rate per (model, method), from its committed report."""
    import csv

    with (ROOT / "reports" / "default" / "data" / "best_lr.csv").open() as f:
        return {(r["model"], r["method"]): float(r["lr"]) for r in csv.DictReader(f) if r["regime"] == "rl"}


BEST = best_rl_lrs()
LR = {method: BEST["qwen3-tiny", method] for method in ("fullft", "lora-r1")}  # TRL runs on qwen3-tiny


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The default study's data and its two tiny base models (about 2 minutes each to warm-start)."""
    import yaml

    from rankone import data
    from rankone.config import validate
    from rankone.models.build import build
    from rankone.paths import Layout

    root = tmp_path_factory.mktemp("default")
    raw = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    cfg = validate(
        {
            **raw,
            "results_dir": str(root / "results"),
            "reports_dir": str(root / "reports"),
            "models": ["qwen3-tiny", "llama-tiny"],
        }
    )
    at = Layout(cfg)
    for regime in cfg.regimes:
        data.build(cfg, regime, at.data(regime))
    for model in cfg.models:
        build(cfg, model, at.data_root, at.model(model))
    return cfg, at


MEDIANS: dict[tuple, float] = {}  # median step seconds by (trainer or model, method[, part])


def bench_config(cfg, steps: int = STEPS, prompts: int = PROMPTS, group: int = GROUP, tokens: int = TOKENS):
    """`cfg` at one thread, `steps` RL steps of `prompts` x `group` samples of up to `tokens` new
    tokens at temperature 1, logged once, never checkpointed."""
    return cfg.model_copy(
        update={
            "threads": 1,
            "rl": cfg.rl.model_copy(
                update={
                    "steps": steps,
                    "prompts_per_step": prompts,
                    "group_size": group,
                    "log_every": steps,
                    "checkpoint_every": 10 * steps,
                }
            ),
            "rollout": cfg.rollout.model_copy(update={"max_new_tokens": tokens, "temperature": 1.0}),
        }
    )


def learned(rewards: list[float]) -> dict:
    first, last = sum(rewards[:10]) / 10, sum(rewards[-10:]) / 10
    return {"reward_first_10": first, "reward_last_10": last, "learned": last > first}


def step_medians(out: Path, warmup: int) -> tuple[float, float]:
    """Median seconds of a whole step and of its update (the step less sampling, scoring and the
    learner's forward: backward, optimizer, logging), after `warmup` steps."""
    timings = [json.loads(line) for line in (out / "timings.jsonl").read_text().splitlines()][warmup:]
    return (
        statistics.median(t["seconds"] for t in timings),
        statistics.median(t["seconds"] - t["sample_seconds"] for t in timings),
    )


def lora_over_fullft(benchmark, key: str, method: str, step: float, update: float) -> None:
    MEDIANS[key, method], MEDIANS[key, method, "update"] = step, update
    if method != "fullft" and (key, "fullft") in MEDIANS:
        benchmark.extra_info["lora_over_fullft_step"] = step / MEDIANS[key, "fullft"]
        benchmark.extra_info["lora_over_fullft_update"] = update / MEDIANS[key, "fullft", "update"]


@pytest.mark.parametrize("model", ["qwen3-tiny", "llama-tiny"])
@pytest.mark.parametrize("method", ["fullft", "lora-r1"])
def test_rankone_rl_step(benchmark, study, tmp_path, model, method):
    cfg, at = study
    cfg = bench_config(cfg)
    run = RunId("rl", model, method, BEST[model, method], 0)
    out = tmp_path / "run"

    def train():
        TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), out)

    benchmark.pedantic(train, rounds=1, iterations=1)
    rewards = [json.loads(line)["reward"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    step, update = step_medians(out, WARMUP)
    benchmark.extra_info.update(
        median_step_seconds=step,
        median_update_seconds=update,
        whole_run_seconds=benchmark.stats.stats.median,
        **learned(rewards),
    )
    lora_over_fullft(benchmark, "rankone" if model == "qwen3-tiny" else model, method, step, update)
    assert learned(rewards)["learned"], rewards


@pytest.mark.parametrize("method", ["fullft", "lora-r1"])
def test_real_checkpoint_rl_step(benchmark, smollm2, tmp_path, method):
    """SmolLM2-135M-Instruct at half the real-cpu study's batch (2 prompts x 4 samples, up to 16
    new tokens) and its lowest lr, one thread, 5 steps (the first skipped): LoRA r1's step
    against FullFT's.
    Timing only; 5 steps are too few to ask for learning."""
    from rankone.config import layered_files, validate

    cfg, at, _ = smollm2
    cfg = bench_config(cfg, steps=5, prompts=2, group=4, tokens=16)
    real_cpu = validate(
        layered_files([ROOT / "config" / "default.yaml", ROOT / "config" / "experiments" / "real-cpu.yaml"])
    )
    run = RunId("rl", "smollm2-135m", method, min(real_cpu.lr_grid("rl", method)), 0)
    out = tmp_path / "run"
    benchmark.pedantic(
        lambda: TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), out), rounds=1, iterations=1
    )
    step, update = step_medians(out, 1)
    benchmark.extra_info.update(median_step_seconds=step, median_update_seconds=update)
    lora_over_fullft(benchmark, "smollm2-135m", method, step, update)


@pytest.mark.parametrize("method", ["fullft", "lora-r1"])
def test_trl_grpo_step(benchmark, study, tmp_path, method):
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    cfg, at = study
    task = task_of(cfg.tasks["rl"])
    rows = read_split(at.data("rl"), "train")
    torch.set_num_threads(1)

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.seconds, self.rewards, self.logged = [], [], []

        def on_step_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self.t0)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                self.rewards.append(float(logs["reward"]))
            if logs and "step_time" in logs:  # TRL's own clock of a step
                self.logged.append(float(logs["step_time"]))

    def reward(prompts, completions, answer, **kwargs):
        return [task.reward(c, a) for c, a in zip(completions, answer)]

    times = StepTimes()
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        per_device_train_batch_size=PROMPTS * GROUP,
        num_generations=GROUP,
        max_completion_length=TOKENS,
        temperature=1.0,
        beta=0.0,
        scale_rewards="none",
        loss_type="dapo",
        learning_rate=LR[method],
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_steps=STEPS,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    peft_config = None
    if method != "fullft":
        from peft import LoraConfig

        peft_config = LoraConfig(r=1, lora_alpha=cfg.lora.alpha, target_modules="all-linear", lora_dropout=0.0)
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(at.model("qwen3-tiny"), dtype="float32"),
        reward_funcs=reward,
        args=args,
        train_dataset=Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows]),
        processing_class=AutoTokenizer.from_pretrained(at.model("qwen3-tiny")),
        peft_config=peft_config,
        callbacks=[times],
    )
    benchmark.pedantic(trainer.train, rounds=1, iterations=1)
    MEDIANS["trl", method] = median = statistics.median(times.seconds[WARMUP:])
    # The callback's clock and the whole run disagree (generation may fall outside the callback's
    # step): record the whole run's wall time and TRL's own logged step time beside it.
    benchmark.extra_info.update(
        median_step_seconds=median,
        whole_run_seconds=benchmark.stats.stats.median,
        trl_logged_median_step_seconds=statistics.median(times.logged[WARMUP:]) if len(times.logged) > WARMUP else None,
        **learned(times.rewards),
    )
    if ("rankone", method) in MEDIANS:
        benchmark.extra_info["rankone_over_trl_step"] = MEDIANS["rankone", method] / median
    assert learned(times.rewards)["learned"], times.rewards


def test_model_work_of_one_rl_step(benchmark, study):
    """The part of a FullFT step no trainer can skip: sampling (every forward of `sample`), the
    learner's forward, backward and the Adam step, each timed alone on one batch of the same
    shape (median of 50), summed. Against rankone's and TRL's median steps from this run, it
    says how much of each step is the trainer's own overhead, and the lowest rankone / TRL
    ratio a trainer with no overhead at all could reach on this machine."""
    from rankone.models.load import load_base
    from rankone.models.sequences import completion_logprobs, sample

    cfg, at = study
    torch.set_num_threads(1)
    model, tokenizer = load_base(at.model("qwen3-tiny"))
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=LR["fullft"], foreach=True)
    prompts = [row["prompt"] for row in read_split(at.data("rl"), "train")[:PROMPTS]]
    torch.manual_seed(0)
    samples = sample(model.eval(), tokenizer, prompts, GROUP, 1.0, TOKENS)
    model.train()
    advantages_B = torch.linspace(-1, 1, PROMPTS * GROUP)

    def learner_forward():
        return completion_logprobs(
            model, samples.prompt_ids_B_L, samples.prompt_mask_B_L, samples.completion_B_C, samples.completion_mask_B_C
        )

    def timed(part, setup=lambda: None, reps=50):
        seconds = []
        for _ in range(reps):
            arg = setup()
            started = time.perf_counter()
            part(arg)
            seconds.append(time.perf_counter() - started)
        return statistics.median(seconds)

    def sampling(_):
        with torch.no_grad():
            sample(model, tokenizer, prompts, GROUP, 1.0, TOKENS)

    def loss():
        optimizer.zero_grad(set_to_none=True)
        return -(learner_forward() * advantages_B[:, None]).sum()

    parts = {}

    def measure():
        model.eval()
        parts["sampling"] = timed(sampling)
        model.train()
        parts["learner_forward"] = timed(lambda _: learner_forward())
        parts["backward"] = timed(lambda value: value.backward(), setup=loss)
        parts["adam"] = timed(lambda _: optimizer.step(), setup=lambda: loss().backward())

    benchmark.pedantic(measure, rounds=1, iterations=1)
    floor = sum(parts.values())
    benchmark.extra_info.update(
        {f"{k}_seconds": v for k, v in parts.items()},
        model_work_seconds=floor,
        sampled_tokens_per_row=samples.completion_B_C.shape[1],
    )
    if ("rankone", "fullft") in MEDIANS:
        benchmark.extra_info["rankone_overhead_seconds"] = MEDIANS["rankone", "fullft"] - floor
    if ("trl", "fullft") in MEDIANS:
        benchmark.extra_info["model_work_over_trl_step"] = floor / MEDIANS["trl", "fullft"]


@pytest.mark.parametrize("experiment", ["smoke", "default"])
def test_noop_rerun_of_a_finished_study(benchmark, tmp_path, experiment):
    """`snakemake -n` on a finished study, against the time the study took: the smoke study, run
    here first (Snakemake's wall time), and the default study where `make study` has finished it
    in this clone (results/default; the span its runs recorded, first job start to last job end)."""
    from rankone.config import validate
    from rankone.paths import Layout
    from rankone.publish import provenance
    from tests.conftest import copy_workflow, snakemake

    if experiment == "smoke":
        workdir, configs = copy_workflow(tmp_path / "study"), ("config/smoke.yaml",)
        started = time.perf_counter()
        assert snakemake(workdir, configs=configs).returncode == 0
        full = time.perf_counter() - started
    else:
        import yaml

        workdir, configs = ROOT, ()
        cfg = validate(yaml.safe_load((ROOT / "config" / "default.yaml").read_text()))
        at = Layout(cfg.model_copy(update={"results_dir": str(ROOT / cfg.results_dir)}))
        if not (at.root / "analysis" / "verdicts.csv").is_file():
            pytest.skip("no finished default study in this clone: run `make study` first")
        full = provenance(at)["span_seconds"]

    def noop():
        out = snakemake(workdir, "-n", configs=configs)
        assert "Nothing to be done" in out.stdout + out.stderr, out.stdout + out.stderr

    benchmark.pedantic(noop, rounds=3, iterations=1)
    benchmark.extra_info.update(full_study_seconds=full, noop_over_full=benchmark.stats.stats.median / full)
