"""The rollouts stage: how the base policy behaves before any training.

Per prompt pass rate, the share of zero-variance groups (all samples right or all
wrong: no policy-gradient signal), and unbiased pass@k, on train and val prompts.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from rankone.config import StudyConfig
from rankone.data import read_split
from rankone.io import atomic_path, log, provenance, seed_everything, write_json
from rankone.device import resolve
from rankone.models.load import load_base
from rankone.rollouts import make_engine
from rankone.tasks.confidence import calibration
from rankone.tasks import task_of


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def run(cfg: StudyConfig, model_dir: Path, data_dir: Path, out_dir: Path) -> dict:
    started = time.time()
    seed_everything(cfg.seed, cfg.threads)
    model, tokenizer = load_base(model_dir, cfg.dtype, resolve(cfg.device))
    r = cfg.rollout
    engine = make_engine(
        r.engine,
        model,
        tokenizer,
        r.temperature,
        r.max_new_tokens,
        model_dir,
        None,
        cfg.seed,
        dtype=cfg.dtype,
        options=r,
    )
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
    summary["provenance"] = provenance(cfg, "rollouts", cfg.seed, started)
    out_dir.mkdir(parents=True, exist_ok=True)
    import pandas as pd

    with atomic_path(out_dir / "per_prompt.csv") as tmp:
        pd.DataFrame(per_prompt).to_csv(tmp, index=False)
    write_json(out_dir / "summary.json", summary)
    return summary
