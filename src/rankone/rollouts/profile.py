"""A policy's sharpening profile on a split: greedy accuracy and unbiased pass@k.

Read together they tell sharpening from learning. Sharpening lowers the entropy onto answers
the policy already gives: sampled pass@1 rises towards greedy accuracy while greedy accuracy
and pass@k at large k stay where they were. Learning changes which answers the policy gives:
greedy accuracy rises, and pass@k at large k rises above the base model's (answers the base
did not sample). The base model's profile is the rollouts stage's; every RL run's final
weights get one in the evaluate stage, on the same whole split, with the same k.
"""

from __future__ import annotations

import math

import torch


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are right (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def sample_all(engine, prompts: list[str], n: int, batch_prompts: int, greedy: bool = False) -> list[str]:
    """Completion texts of `n` samples per prompt, `batch_prompts` prompts per engine call."""
    return [
        t
        for i in range(0, len(prompts), batch_prompts)
        for t in engine.sample(prompts[i : i + batch_prompts], n, greedy).texts
    ]


def greedy_accuracy(engine, task, rows: list[dict], batch_prompts: int) -> float:
    """Share of `rows` whose greedy completion `engine`'s policy gets right."""
    greedy = sample_all(engine, [r["prompt"] for r in rows], 1, batch_prompts, greedy=True)
    return sum(task.reward(t, r["answer"]) for t, r in zip(greedy, rows)) / len(rows)


def profile(engine, task, rows: list[dict], samples: int, ks: list[int], sequences: int, seed: int) -> dict:
    """Greedy accuracy, mean reward and unbiased pass@k (each k in `ks`) from `samples` samples
    per prompt of `rows` at the engine's temperature; about `sequences` sequences per engine call."""
    prompts = [r["prompt"] for r in rows]
    accuracy = greedy_accuracy(engine, task, rows, max(1, sequences))
    torch.manual_seed(seed)
    sampled = sample_all(engine, prompts, samples, max(1, sequences // samples))
    rewards = [task.reward(t, rows[i // samples]["answer"]) for i, t in enumerate(sampled)]
    correct = [sum(r > 0 for r in rewards[i * samples : (i + 1) * samples]) for i in range(len(rows))]
    return {
        "prompts": len(rows),
        "samples": samples,
        "greedy_accuracy": accuracy,
        "mean_reward": sum(rewards) / len(rewards),
        **{f"pass_at_{k}": sum(pass_at_k(samples, c, k) for c in correct) / len(rows) for k in ks},
    }
