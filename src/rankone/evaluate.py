"""The evaluate stage: every trained run on val and test.

One job per (regime, model, method) evaluates all its learning rates and seeds, so
data, tokenizer and base model load once (a process per run cost more than the
evaluation itself). Greedy accuracy, sampled pass@1 and mean reward for both regimes (and, on a
task that states a confidence, the sampled completions' Brier score and calibration error); for SFT also the
negative log-likelihood of the answers (test NLL); for SFT, and for RL on a table of
known entropy (facts), the final total NLL of the training set and the bits absorbed:
its drop from the base model to the trained one.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from rankone.config import RunId, StudyConfig
from rankone.info import NATS_TO_BITS
from rankone.data import read_split
from rankone.io import log, provenance, read_json, seed_everything, write_jsonl
from rankone.models.load import load_base, load_policy
from rankone.models.sequences import completion_logprobs, encode_completions, encode_prompts, sample
from rankone.tasks.confidence import calibration


@torch.no_grad()
def answer_nll_nats(model, tokenizer, rows: list[dict], batch_size: int = 512) -> tuple[float, int]:
    """Total NLL (nats) of the answers (+<eos>) given the prompts, and the token count."""
    total, tokens = 0.0, 0
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        prompt_ids_B_L, prompt_mask_B_L = encode_prompts(tokenizer, [r["prompt"] for r in chunk])
        completion_B_C, mask_B_C = encode_completions(tokenizer, [r["answer"] for r in chunk])
        logprobs_B_C = completion_logprobs(model, prompt_ids_B_L, prompt_mask_B_L, completion_B_C, mask_B_C)
        total -= float(logprobs_B_C.sum())
        tokens += int(mask_B_C.sum())
    return total, tokens


def score(cfg: StudyConfig, model, tokenizer, task, rows: list[dict], seed: int) -> dict:
    e = cfg.evaluate
    prompts, answers = [r["prompt"] for r in rows], [r["answer"] for r in rows]
    greedy = sample(model, tokenizer, prompts, 1, 1.0, cfg.rollout.max_new_tokens, greedy=True)
    torch.manual_seed(seed)
    n = e.samples_per_prompt
    sampled = sample(model, tokenizer, prompts, n, e.temperature, cfg.rollout.max_new_tokens)
    rewards = [task.reward(t, answers[i // n]) for i, t in enumerate(sampled.texts)]
    correct = [sum(r > 0 for r in rewards[i * n : (i + 1) * n]) for i in range(len(rows))]
    return {
        "prompts": len(rows),
        "greedy_accuracy": sum(task.reward(t, a) for t, a in zip(greedy.texts, answers)) / len(rows),
        "pass_at_1": sum(r > 0 for r in rewards) / len(rewards),
        **{f"pass_at_{k}": sum(pass_at_k(n, c, k) for c in correct) / len(rows) for k in range(2, n + 1)},
        "mean_reward": sum(rewards) / len(rewards),
        **(calibration(sampled.texts, rewards) if task.states_confidence else {}),
    }


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are right (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    from math import comb

    return 1.0 - comb(n - c, k) / comb(n, k)


def evaluate_run(cfg: StudyConfig, run: RunId, model_dir: Path, splits: dict, base_train_nats: float | None,
                 train_dir: Path) -> dict:
    seed_everything(run.seed, cfg.threads)
    trained = read_json(train_dir / "run.json")
    result: dict = {"run": run.path, "status": trained["status"]}
    if trained["status"] != "completed":
        return result
    model, tokenizer = load_policy(model_dir, train_dir / "weights", run.method, cfg.dtype)
    task = cfg.tasks[run.regime].task()
    for split in ("val", "test"):
        rows = splits[split]
        result[split] = score(cfg, model, tokenizer, task, rows, run.seed)
        if run.regime == "sft":
            nats, tokens = answer_nll_nats(model, tokenizer, rows)
            result[split]["nll"] = nats / tokens
            result[split]["nll_bits_per_token"] = nats / tokens * NATS_TO_BITS
    if base_train_nats is not None:
        final_nats, _ = answer_nll_nats(model, tokenizer, splits["train"])
        result["train_nll_bits_base"] = base_train_nats * NATS_TO_BITS
        result["train_nll_bits_final"] = final_nats * NATS_TO_BITS
        result["bits_absorbed"] = (base_train_nats - final_nats) * NATS_TO_BITS
    log.info("%s: val %s", run.path, result["val"])
    return result


def run(cfg: StudyConfig, regime: str, model: str, method: str, at) -> list[dict]:
    """Evaluate every run of (regime, model, method); write one JSON line per run."""
    started = time.time()
    runs = [r for r in cfg.runs() if (r.regime, r.model, r.method) == (regime, model, method)]
    if not runs:
        raise ValueError(f"no runs for {regime}/{model}/{method} in the study's grid")
    data_dir, model_dir = at.data(regime), at.model(model)
    splits = {s: read_split(data_dir, s)[: cfg.evaluate.n_prompts] for s in ("val", "test")}
    base_train_nats = None
    if cfg.measures_storage(regime):  # bits stored, the same estimator in both regimes
        splits["train"] = read_split(data_dir, "train")
        base, tokenizer = load_base(model_dir, cfg.dtype)
        base_train_nats, _ = answer_nll_nats(base, tokenizer, splits["train"])
    results = [evaluate_run(cfg, r, model_dir, splits, base_train_nats, at.train(r)) for r in runs]
    prov = provenance(cfg, "evaluate", None, started, regime)
    write_jsonl(at.evaluation(regime, model, method), [{**r, "provenance": prov} for r in results])
    return results
