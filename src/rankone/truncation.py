"""The truncation stage: how much rank a FullFT RL update actually uses.

For every FullFT RL run (every lr and seed), delta = trained - base of each weight
matrix is cut to its top-k singular directions, k = 1, 2, 4, ... up to full rank, and
base + truncated delta is scored on the test split with the evaluate stage's own
scorer: same prompts, same sampling seed, same answer checker. At full rank the model
is the trained one itself (no SVD round trip), so that row reproduces the evaluate
stage's test score. The share of FullFT's gain over the base that rank k keeps is

    kept_k = (score_k - score_base) / (score_full - score_base),

paired by seed (the base is scored with each run's sampling seed). 1-D tensors (norm
weights) keep their whole update; every 2-D tensor, embeddings and output head
included, is truncated. `energy_kept` is the share of the update's squared Frobenius
norm, summed over the matrices, that the top k directions hold.

Reads run outputs only: the base model folder, the run's weights, the test split and
best_lr.csv (to mark each model's best lr).
"""

from __future__ import annotations

import math
import time

import pandas as pd
import torch

from rankone.analysis import interval
from rankone.config import RunId, StudyConfig
from rankone.data import read_split
from rankone.io import log, provenance, read_table, seed_everything, write_json
from rankone.paths import Layout
from rankone.updates import load_tensors
from rankone.tasks import task_of


def truncate(delta: torch.Tensor, k: int) -> torch.Tensor:
    """The best rank-k approximation of `delta` (Eckart-Young): its top-k singular directions."""
    return _top(torch.linalg.svd(delta, full_matrices=False), k)


def _top(svd, k: int) -> torch.Tensor:
    u, s, vh = svd
    return (u[:, :k] * s[:k]) @ vh[:k]


def default_ranks(shapes: list[tuple[int, ...]]) -> list[int]:
    """1, 2, 4, ... below the largest full rank of the 2-D tensors, then that full rank."""
    full = max(min(s) for s in shapes if len(s) == 2)
    ranks = [2**i for i in range(full.bit_length()) if 2**i < full]
    return ranks + [full]


class Truncator:
    """One run's update, factored once; `weights(k)` is base + each matrix's update cut to rank k."""

    def __init__(self, base: dict[str, torch.Tensor], trained: dict[str, torch.Tensor]):
        self.base, self.trained = base, trained
        self.svd = {}
        for name, before in base.items():
            if before.ndim == 2:
                self.svd[name] = torch.linalg.svd(trained[name] - before, full_matrices=False)

    def weights(self, k: int) -> dict[str, torch.Tensor]:
        out = {}
        for name, before in self.base.items():
            if name not in self.svd or k >= min(before.shape):
                out[name] = self.trained[name]
            else:
                out[name] = before + _top(self.svd[name], k)
        return out

    def energy_kept(self, k: int) -> float:
        """Share of the updates' squared Frobenius norm (all matrices together) in their top k directions."""
        top = sum(float((s[:k] ** 2).sum()) for _, s, _ in self.svd.values())
        total = sum(float((s**2).sum()) for _, s, _ in self.svd.values())
        return top / total if total else math.nan


def gain_kept(score: float, base: float, full: float) -> float:
    """Share of FullFT's gain over the base that a truncated update keeps (NaN when there was no gain)."""
    return (score - base) / (full - base) if full != base else math.nan


def fullft_rl_runs(cfg: StudyConfig) -> list[RunId]:
    return [r for r in cfg.runs() if r.regime == "rl" and r.method == "fullft"]


def score_runs(cfg: StudyConfig, at: Layout, model_name: str, runs: list[RunId], ranks: list[int] | None) -> list[dict]:
    """Score the base and every truncation of each run's update on test."""
    from rankone.evaluate import score, scoring_engine
    from rankone.device import resolve
    from rankone.models.load import load_base

    model, tokenizer = load_base(at.model(model_name), cfg.dtype, resolve(cfg.device))
    model.eval()
    engine = scoring_engine(cfg, model, tokenizer)  # samples the module whose weights are swapped below
    task = task_of(cfg.tasks["rl"])
    rows_test = read_split(at.data("rl"), "test")[: cfg.evaluate.n_prompts]
    base = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}  # the SVDs run on the CPU
    ks = default_ranks([tuple(v.shape) for v in base.values()])
    full_rank = ks[-1]
    ks = [k for k in (ranks or ks) if k < full_rank]
    base_scores: dict[int, dict] = {}

    def scored(weights: dict[str, torch.Tensor], seed: int) -> dict:
        model.load_state_dict(weights)
        seed_everything(seed, cfg.threads)
        return score(cfg, engine, task, rows_test, seed)

    out = []
    for run in runs:
        trained = load_tensors(at.train(run) / "weights")
        if set(trained) != set(base):
            raise ValueError(f"{run.path}: its weights do not match the base model's tensors")
        cut = Truncator(base, trained)
        if run.seed not in base_scores:
            base_scores[run.seed] = scored(base, run.seed)
        b = base_scores[run.seed]
        results = {k: scored(cut.weights(k), run.seed) for k in ks}
        results[full_rank] = scored(trained, run.seed)
        for k, s in sorted(results.items()):
            out.append(
                {
                    "model": run.model,
                    "lr": run.lr,
                    "seed": run.seed,
                    "k": k,
                    "full": k == full_rank,
                    "energy_kept": 1.0 if k == full_rank else cut.energy_kept(k),
                    "mean_reward": s["mean_reward"],
                    "greedy_accuracy": s["greedy_accuracy"],
                    "base_mean_reward": b["mean_reward"],
                    "base_greedy_accuracy": b["greedy_accuracy"],
                    "full_mean_reward": results[full_rank]["mean_reward"],
                    "full_greedy_accuracy": results[full_rank]["greedy_accuracy"],
                }
            )
        log.info(
            "%s: kept reward share by k %s",
            run.path,
            {
                k: round(gain_kept(s["mean_reward"], b["mean_reward"], results[full_rank]["mean_reward"]), 3)
                for k, s in sorted(results.items())
            },
        )
    return out


def table(rows: list[dict], best: pd.DataFrame) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for metric in ("mean_reward", "greedy_accuracy"):
        df[f"kept_{metric}"] = [
            gain_kept(s, b, f) for s, b, f in zip(df[metric], df[f"base_{metric}"], df[f"full_{metric}"])
        ]
    chosen = best[(best.regime == "rl") & (best.method == "fullft")][["model", "lr"]]
    marks = {(m, float(lr)) for m, lr in chosen.itertuples(index=False)}
    df["best_lr"] = [(m, float(lr)) in marks for m, lr in zip(df.model, df.lr)]
    return df


def summary(df: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model and k, at FullFT's best lr: mean share of the gain kept, with a t interval over seeds."""
    rows = []
    for (model, k), g in df[df.best_lr].groupby(["model", "k"]):
        for metric in ("mean_reward", "greedy_accuracy"):
            values = [v for v in g[f"kept_{metric}"] if math.isfinite(v)]
            mean, low, high = interval(values, confidence) if values else (math.nan,) * 3
            rows.append(
                {
                    "model": model,
                    "k": k,
                    "metric": metric,
                    "seeds": len(values),
                    "kept": mean,
                    "low": low,
                    "high": high,
                    "gain": float((g[f"full_{metric}"] - g[f"base_{metric}"]).mean()),
                    "energy_kept": float(g.energy_kept.mean()),
                }
            )
    return pd.DataFrame(rows)


def run(cfg: StudyConfig, at: Layout) -> None:
    started = time.time()
    best = read_table(at.table("best_lr.csv"))
    rows = []
    for model in cfg.models:
        runs = [r for r in fullft_rl_runs(cfg) if r.model == model]
        rows += score_runs(cfg, at, model, runs, cfg.truncation.ranks)
    df = table(rows, best)
    at.write_tables({"truncation.csv": df, "truncation_summary.csv": summary(df, cfg.analysis.confidence)})
    write_json(
        at.table("truncation.json"),
        {
            "runs": len(df.groupby(["model", "lr", "seed"])),
            "provenance": provenance(cfg, "truncation", None, started, "rl"),
        },
    )
