"""The rollouts stage: how the base policy behaves before any training.

Per prompt pass rate, the share of zero-variance groups (all samples right or all
wrong: no policy-gradient signal), and unbiased pass@k, on train and val prompts; and
the base model's sharpening profile (greedy accuracy, pass@k up to `sharpening.samples`)
on the whole val and test splits at each temperature of the sharpening control.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from rankone.config import StudyConfig
from rankone.data import read_split
from rankone.io import atomic_path, log, provenance, seed_everything, write_json
from rankone.device import resolve
from rankone.models.load import load_base
from rankone.rollouts import make_engine
from rankone.rollouts.profile import pass_at_k, profile
from rankone.tasks.confidence import calibration
from rankone.tasks import task_of


def run(cfg: StudyConfig, model_dir: Path, data_dir: Path, out_dir: Path) -> dict:
    started = time.time()
    seed_everything(cfg.seed, cfg.threads)
    model, tokenizer = load_base(model_dir, cfg.dtype, resolve(cfg.device))
    r = cfg.rollout
    engine = base_engine(cfg, model, tokenizer, model_dir, r.temperature)
    task = task_of(cfg.tasks["rl"])
    summary: dict = {"model": model_dir.name, "samples_per_prompt": r.samples_per_prompt}
    per_prompt = []
    for split in ("train", "val"):
        rows = read_split(data_dir, split)[: r.n_prompts]
        torch.manual_seed(cfg.seed)
        samples = engine.sample([row["prompt"] for row in rows], r.samples_per_prompt)
        n = r.samples_per_prompt
        rewards = [task.reward(t, rows[i // n]["answer"]) for i, t in enumerate(samples.texts)]
        correct = [int(sum(rewards[i * n : (i + 1) * n])) for i in range(len(rows))]
        for row, c in zip(rows, correct):
            per_prompt.append({"split": split, "prompt": row["prompt"], "correct": c, "pass_rate": c / n})
        summary[split] = {
            "prompts": len(rows),
            "pass_at_1": sum(correct) / (n * len(rows)),
            **{f"pass_at_{k}": sum(pass_at_k(n, c, k) for c in correct) / len(rows) for k in (1, 2, 4, n) if k <= n},
            "zero_variance_share": sum(c in (0, n) for c in correct) / len(rows),
            "stop_share": samples.finish_reasons.count("stop") / len(samples.finish_reasons),
            **(calibration(samples.texts, rewards) if task.states_confidence else {}),
        }
        log.info(
            "%s %s: pass@1 %.3f, zero-variance groups %.2f",
            model_dir.name,
            split,
            summary[split]["pass_at_1"],
            summary[split]["zero_variance_share"],
        )
    engine.close()
    summary["sharpening"] = base_profile(cfg, model, tokenizer, model_dir, data_dir, task)
    summary["provenance"] = provenance(cfg, "rollouts", cfg.seed, started)
    out_dir.mkdir(parents=True, exist_ok=True)
    import pandas as pd

    with atomic_path(out_dir / "per_prompt.csv") as tmp:
        pd.DataFrame(per_prompt).to_csv(tmp, index=False)
    write_json(out_dir / "summary.json", summary)
    return summary


def base_engine(cfg: StudyConfig, model, tokenizer, model_dir: Path, temperature: float):
    """The configured rollout engine serving the base model (no adapter) at `temperature`."""
    r = cfg.rollout
    return make_engine(
        r.engine, model, tokenizer, temperature, r.max_new_tokens, model_dir, None, cfg.seed, dtype=cfg.dtype, options=r
    )


def base_profile(cfg: StudyConfig, model, tokenizer, model_dir: Path, data_dir: Path, task) -> dict:
    """The base model's sharpening profile (rankone.rollouts.profile) on the whole val and test
    splits at each temperature of `sharpening.temperatures` and at the evaluation temperature, and
    the sharpening control at its tuned setting: the temperature with the best val mean reward
    (ties: the one nearest the evaluation temperature). No training."""
    s = cfg.sharpening
    splits = {split: read_split(data_dir, split) for split in ("val", "test")}
    sequences = cfg.evaluate.batch_prompts * cfg.evaluate.samples_per_prompt
    temperatures = sorted({*s.temperatures, cfg.evaluate.temperature})
    at = {}
    for temperature in temperatures:
        engine = base_engine(cfg, model, tokenizer, model_dir, temperature)
        at[f"{temperature:g}"] = {
            split: profile(engine, task, rows, s.samples, s.pass_at, sequences, cfg.seed)
            for split, rows in splits.items()
        }
        engine.close()
        log.info("%s at T=%g: test %s", model_dir.name, temperature, at[f"{temperature:g}"]["test"])
    best = max(temperatures, key=lambda t: (at[f"{t:g}"]["val"]["mean_reward"], -abs(t - cfg.evaluate.temperature)))
    return {"temperatures": at, "evaluation_temperature": cfg.evaluate.temperature, "best_temperature": best}
