"""The updates stage: the structure of FullFT weight updates, RL against SFT.

Follows Mukherjee et al. (2025) and their critics. For each FullFT run at its best
learning rate, delta = after - before for every weight tensor, then:

- the share of parameters changed, three ways: exactly (delta != 0, fp32), beyond
  atol 1e-5 in fp32 (not isclose(delta, 0, atol=1e-5)), and after a bf16 cast of both
  sides (what a bf16 checkpoint would show; rounding hides small updates);
- per matrix: rank (`torch.linalg.matrix_rank`, fp32) against full rank, and the
  effective rank exp(H(s / sum s)) of the singular values;
- overlap of the changed sets (atol criterion) across seeds: Jaccard, against the
  Jaccard two independent sets of the same densities would have (pq / (p + q - pq)).

Reads run outputs only (base model folder and the run's safetensors).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import torch

from rankone.config import RunId, StudyConfig
from rankone.io import read_table
from rankone.paths import Layout

ATOL = 1e-5


def load_tensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for f in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(f))
    return {k: v.float() for k, v in tensors.items()}


def changed_masks(before: torch.Tensor, after: torch.Tensor) -> dict[str, torch.Tensor]:
    """Which parameters changed, three ways: exactly, beyond ATOL (fp32), after a bf16 cast."""
    delta = after - before
    return {
        "exact": delta != 0,
        "atol": ~torch.isclose(delta, torch.zeros_like(delta), rtol=0.0, atol=ATOL),
        "bf16": after.bfloat16() != before.bfloat16(),
    }


def changed_shares(before: torch.Tensor, after: torch.Tensor) -> dict[str, float]:
    return {k: float(mask.sum()) / mask.numel() for k, mask in changed_masks(before, after).items()}


def effective_rank(matrix: torch.Tensor) -> float:
    """exp of the entropy of the normalised singular values (Roy & Vetterli 2007)."""
    s = torch.linalg.svdvals(matrix.float())
    if s.sum() == 0:
        return 0.0
    p = s / s.sum()
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def matrix_stats(delta: torch.Tensor) -> dict[str, float]:
    return {
        "rank": int(torch.linalg.matrix_rank(delta.float())),
        "full_rank": min(delta.shape),
        "effective_rank": effective_rank(delta),
    }


def jaccard(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """Jaccard of two boolean masks, and its expectation for independent masks of the same densities."""
    union = float((a | b).sum())
    observed = float((a & b).sum()) / union if union else 1.0
    p, q = float(a.float().mean()), float(b.float().mean())
    chance = p * q / (p + q - p * q) if p + q > 0 else 1.0
    return observed, chance


def fullft_runs(cfg: StudyConfig, best: pd.DataFrame) -> list[RunId]:
    chosen = best[best.method == "fullft"]
    return [RunId(r.regime, r.model, "fullft", r.lr, seed) for r in chosen.itertuples() for seed in cfg.seeds]


def run(cfg: StudyConfig, at: Layout) -> None:
    best = read_table(at.table("best_lr.csv"))
    shares, matrices, masks = [], [], {}
    bases: dict[str, dict[str, torch.Tensor]] = {}
    for r in fullft_runs(cfg, best):
        base = bases.setdefault(r.model, load_tensors(at.model(r.model)))
        after = load_tensors(at.train(r) / "weights")
        totals = {"exact": 0.0, "atol": 0.0, "bf16": 0.0}
        n_params = 0
        run_masks = []
        for name, before in base.items():
            changed = changed_masks(before, after[name])
            for k in totals:
                totals[k] += float(changed[k].sum())
            n_params += before.numel()
            run_masks.append(changed["atol"].flatten())
            delta = after[name] - before
            if delta.ndim == 2 and "embed" not in name and "lm_head" not in name:
                matrices.append(
                    {
                        "regime": r.regime,
                        "model": r.model,
                        "seed": r.seed,
                        "matrix": name,
                        "shape": "x".join(map(str, delta.shape)),
                        **matrix_stats(delta),
                        "share_atol": float(changed["atol"].sum()) / before.numel(),
                    }
                )
        masks[(r.regime, r.model, r.seed)] = torch.cat(run_masks)
        shares.append(
            {
                "regime": r.regime,
                "model": r.model,
                "seed": r.seed,
                "lr": r.lr,
                "parameters": n_params,
                **{f"share_changed_{k}": v / n_params for k, v in totals.items()},
            }
        )
    overlaps = []
    for (regime, model), _ in itertools.groupby(sorted(masks), key=lambda k: k[:2]):
        seeds = sorted(s for (g, m, s) in masks if (g, m) == (regime, model))
        for a, b in itertools.combinations(seeds, 2):
            observed, chance = jaccard(masks[(regime, model, a)], masks[(regime, model, b)])
            overlaps.append(
                {
                    "regime": regime,
                    "model": model,
                    "seed_a": a,
                    "seed_b": b,
                    "jaccard": observed,
                    "jaccard_chance": chance,
                }
            )
    at.write_tables(
        {
            name: pd.DataFrame(rows)
            for name, rows in (
                ("update_shares.csv", shares),
                ("update_matrices.csv", matrices),
                ("update_overlap.csv", overlaps),
            )
        }
    )
