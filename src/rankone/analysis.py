"""The analysis stage: reads run outputs only (never training code) and decides.

- `runs.csv`: one row per run, with its val and test metrics (the final weights') and
  information counts, and its primary scores `val_score`, `test_score`, `val_greedy`,
  `test_greedy`: with `analysis.score: tail` (the default, fixed before the run) the mean
  over the late checkpoints of `evaluate.at`, with `final` the final weights' alone.
- `checkpoints.csv`: every run's score and greedy accuracy at each late checkpoint, and on a
  table of known bits its greedy recall of the whole table (`table_greedy`).
- `curves.csv`: the per-step learning curve of every run (RL reward, SFT loss), and for
  RL the per-step reward and advantage entropies and the cumulative information bound.
- `best_lr.csv`: the best learning rate per (regime, model, method), chosen on the **val**
  primary score.
- `trajectory.csv`: the verdict at every late checkpoint, at those learning rates; each
  verdict's `stable` says whether they all agree with it, and `by_step` lists them.
- `lr_optimum.csv`: each method's fitted optimum lr (a quadratic in log-lr over the sweep's
  runs, with a seed-bootstrap interval) and LoRA's over FullFT's, with its paired interval.
- `lr_vs_rank.csv`, `early_curves.csv`: best lr per rank against FullFT's, and how
  closely the ranks' early learning curves coincide at equal lr.
- `layers.csv`: attention-only and MLP-only LoRA against all-linear at equal rank.
- `verdicts.csv`: the gap to FullFT on **test** at each method's best learning rate,
  paired by seed, with a t confidence interval over seeds, TOST and difference p-values,
  corrected within the primary (Holm) and the secondary family (Benjamini-Hochberg), judged against the
  margin fixed in the config before the run (see `judge`), for the score and for greedy
  accuracy; a best lr on the edge of either side's grid is named.
- `plateau.csv`: whether each method's RL reward had stopped rising at its best lr
  (the slope over the late steps, with its interval over seeds).
- `sharpening.csv`: sharpening or learning: the base model's, the temperature control's
  and each RL method's greedy accuracy and pass@k on the whole test split, and each
  method's gain beyond the control (see `sharpening`).

Scores are oriented so higher is better: RL uses mean reward, SFT the negative NLL
(nats per answer token). Diverged runs are kept, marked, and never chosen as best.
"""

from __future__ import annotations

import gc
import math

import pandas as pd

from rankone.config import (
    CONTROL_METHODS,
    ConfigError,
    StudyConfig,
    architecture_of,
    lora_rank,
    lora_scope,
    method_kind,
    method_position,
)
from rankone.info import bits_recalled, bits_stored
from rankone.io import atomic_path, read_json, read_jsonl, read_table, write_json
from rankone.paths import Layout
from rankone.tasks import measures_storage, params_of, task_of

SCORE = {"rl": ("mean_reward", 1.0), "sft": ("nll", -1.0)}  # metric, sign (higher score is better)
# What each verdict compares: the score (chooses the lr), and greedy accuracy at that lr; both
# the run's primary value (analysis.score: the tail mean or the final checkpoint's).
METRICS = {"score": "score", "greedy_accuracy": "greedy"}
MAX_SEEDS = 1000  # seeds_to_decide is capped here
CURVE = {"rl": "reward", "sft": "loss"}
# RL's per-step information: entropy of the batch's rewards, mean entropy of a group's
# rewards (what its advantages carry), and the cumulative bound so far.
STEP_BITS = ("reward_entropy_bits", "advantage_entropy_bits", "info_bound_bits")
STEP_EXTRA = (*STEP_BITS, "unparseable_share")  # per-step columns of curves.csv beside the curve value


class IncompleteRunError(RuntimeError):
    """A run's outputs are missing or not marked complete."""


def checkpoint_rows(run, evaluated: dict) -> list[dict]:
    """One row per late checkpoint of a run: its step and, per split, the score and greedy accuracy."""
    metric, sign = SCORE[run.regime]
    return [
        {
            "regime": run.regime,
            "model": run.model,
            "method": run.method,
            "lr": run.lr,
            "seed": run.seed,
            "step": c["step"],
            **{
                f"{split}_{name}": value
                for split in ("val", "test")
                for name, value in (("score", sign * c[split][metric]), ("greedy", c[split]["greedy_accuracy"]))
            },
            # On a table of known bits: greedy recall of the whole table at this checkpoint.
            "table_greedy": c["table"]["greedy_accuracy"] if "table" in c else math.nan,
        }
        for c in evaluated.get("checkpoints", [])
    ]


def primary_checkpoints(cfg: StudyConfig, checkpoints: list) -> list:
    """The checkpoints a run's primary scores read: its late ones (analysis.score: tail) or its final one."""
    return checkpoints[-1:] if cfg.analysis.score == "final" else checkpoints


def primary(cfg: StudyConfig, checkpoints: list[dict]) -> dict:
    """The run's primary scores, `<split>_score` and `<split>_greedy`: the mean over its late
    checkpoints (analysis.score: tail) or its final checkpoint's (final); NaN when it has none."""
    chosen = primary_checkpoints(cfg, checkpoints)
    keys = [f"{split}_{name}" for split in ("val", "test") for name in ("score", "greedy")]
    if not chosen:
        return dict.fromkeys(keys, math.nan)
    return {k: sum(c[k] for c in chosen) / len(chosen) for k in keys}


def collect(cfg: StudyConfig, at: Layout) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Per run (runs.csv), per step (curves.csv) and per late checkpoint (checkpoints.csv)."""
    rows, curves, checkpoints = [], [], []
    evaluations: dict[str, dict] = {}
    for regime, model, method in {(r.regime, r.model, r.method) for r in cfg.runs()}:
        path = at.evaluation(regime, model, method)
        if not path.is_file():
            raise IncompleteRunError(f"{regime}/{model}/{method}: missing {path}")
        evaluations.update({e["run"]: e for e in read_jsonl(path)})
    for run in cfg.runs():
        trained_path = at.train(run) / "run.json"
        if not trained_path.is_file() or run.path not in evaluations:
            raise IncompleteRunError(f"{run.path}: not trained and evaluated")
        trained, evaluated = read_json(trained_path), evaluations[run.path]
        metric, sign = SCORE[run.regime]
        row = {
            **run.fields,
            "status": trained["status"],
            "trainable_parameters": trained["trainable_parameters"],
            "train_seconds": trained["train_seconds"],
            "steps_completed": trained["steps_completed"],
        }
        for key, value in evaluated.get("profile", {}).items():
            row[f"profile_{key}"] = value  # the final weights' sharpening profile (whole test split)
        for split in ("val", "test"):
            for key, value in evaluated.get(split, {}).items():
                row[f"{split}_{key}"] = value  # the final weights'
            value = evaluated.get(split, {}).get(metric)
            row[f"{split}_final_score"] = sign * value if value is not None else math.nan
        scored = checkpoint_rows(run, evaluated)
        row.update(primary(cfg, scored), tail_steps=" ".join(str(c["step"]) for c in scored))
        # On a table of known bits: greedy recall of the whole table, over the same checkpoints as the primary scores.
        table = primary_checkpoints(cfg, [c["table_greedy"] for c in scored if not math.isnan(c["table_greedy"])])
        row["table_greedy"] = sum(table) / len(table) if table else math.nan
        checkpoints += scored
        row["info_bound_bits"] = trained.get("info_bound_bits")
        row["format_collapse"] = trained.get("format_collapse", {}).get("flagged")
        row["bits_absorbed"] = evaluated.get("bits_absorbed")
        row["train_nll_bits_final"] = evaluated.get("train_nll_bits_final")
        steps = read_jsonl(at.train(run) / "metrics.jsonl")
        for s in steps:
            curves.append(
                {
                    "regime": run.regime,
                    "model": run.model,
                    "method": run.method,
                    "lr": run.lr,
                    "seed": run.seed,
                    "step": s["step"],
                    "value": s.get(CURVE[run.regime]),
                    **{k: s.get(k) for k in STEP_EXTRA},
                }
            )
        tail = steps[-max(1, len(steps) // 10) :]
        row["train_final"] = sum(s.get(CURVE[run.regime], math.nan) for s in tail) / len(tail) if tail else math.nan
        rows.append(row)
    return pd.DataFrame(rows), pd.DataFrame(curves), pd.DataFrame(checkpoints)


def best_learning_rates(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, model, method): the lr with the best mean val score over seeds (diverged = -inf).

    `edge` says whether it is the lowest or highest lr of the grid (the optimum may then lie
    outside the sweep: widen the grid before trusting the gap); empty when it is inside."""
    scored = runs.assign(val_score=runs["val_score"].fillna(-math.inf))
    by_lr = scored.groupby(["regime", "model", "method", "lr"], as_index=False).agg(
        val_score=("val_score", "mean"), diverged=("status", lambda s: int((s != "completed").sum()))
    )
    best = (
        by_lr.sort_values(["val_score", "lr"], ascending=[False, True])
        .groupby(["regime", "model", "method"], as_index=False)
        .head(1)
    )
    bounds = by_lr.groupby(["regime", "model", "method"])["lr"].agg(["min", "max", "count"])

    def edge(r) -> str:
        low, high, count = bounds.loc[(r.regime, r.model, r.method)]
        if count < 2:
            return ""
        return "low" if r.lr == low else "high" if r.lr == high else ""

    def beyond(r) -> float:
        """The next lr past the edge the best sits on: that edge's spacing continued (NaN inside)."""
        if not r.edge:
            return math.nan
        lrs = sorted(by_lr.lr[(by_lr.regime == r.regime) & (by_lr.model == r.model) & (by_lr.method == r.method)])
        near, inner = (lrs[0], lrs[1]) if r.edge == "low" else (lrs[-1], lrs[-2])
        return float(f"{near * near / inner:.3g}")

    best["edge"] = best.apply(edge, axis=1) if len(best) else pd.Series(dtype=str)
    best["at_grid_edge"] = best["edge"] != ""
    best["next_lr"] = best.apply(beyond, axis=1) if len(best) else pd.Series(dtype=float)
    return best.sort_values(["regime", "model", "method"]).reset_index(drop=True)


def interval(gaps: list[float], confidence: float) -> tuple[float, float, float]:
    """Mean and two-sided t interval; NaN bounds with fewer than two values."""
    n = len(gaps)
    mean = sum(gaps) / n
    if n < 2:
        return mean, math.nan, math.nan
    half = t_multiplier(n, confidence) * _sd(gaps) / math.sqrt(n)
    return mean, mean - half, mean + half


def t_multiplier(n: int, confidence: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, n - 1))


def _sd(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def p_values(gaps: list[float], margin: float) -> tuple[float, float]:
    """The two tests behind a verdict, on paired gaps (statsmodels' one-sample t tests):

    - `p_equivalence`: TOST (two one-sided t tests) of H0 |gap| >= margin; the larger of its two
      one-sided p-values. Below alpha/2 exactly when the two-sided `confidence` interval lies
      inside (-margin, +margin), alpha = 1 - confidence (so 0.025 a side at 95%).
    - `p_difference`: the two-sided t test of H0 gap = 0; below alpha exactly when that interval
      excludes 0.

    NaN with fewer than two gaps; with no spread at all, 0 or 1 by where the mean lies."""
    n = len(gaps)
    if n < 2 or not all(map(math.isfinite, gaps)):
        return math.nan, math.nan
    if _sd(gaps) == 0:  # the t statistics are infinite or 0/0: decide on the mean itself
        mean = gaps[0]
        return float(abs(mean) >= margin), float(mean == 0)
    from statsmodels.stats.weightstats import DescrStatsW

    stats = DescrStatsW(gaps)
    return float(stats.ttost_mean(-margin, margin)[0]), float(stats.ttest_mean(0.0)[1])


# The verdicts that keep up with FullFT (docs/protocol.md, "The verdict rule"):
MATCHES = ("parity", "small", "better")  # a method that keeps up with FullFT: no gap beyond the margin below it


def judge(
    gap: float, half_width: float, p_equivalence: float, p_difference: float, margin: float, confidence: float
) -> tuple[str, str]:
    """The verdict and its reason, from the two tests (see `p_values`), alpha = 1 - confidence:

    - `parity`: equivalent (TOST below alpha/2 a side: the interval inside +-margin) and no
      detected difference (the interval covers 0);
    - `small`: a detected difference (the interval excludes 0) whose estimate lies inside the
      margin: real, but smaller than what the study declared negligible before the run;
    - `worse` / `better`: a detected difference whose estimate lies beyond the margin;
    - `inconclusive`: neither test decides (with the reason); `diverged`: a run diverged.

    Why `worse` needs the estimate, not the whole interval, beyond the margin: the margin is the
    size of gap that matters; a gap detected and estimated beyond it is a loss that matters, while
    asking the interval to clear the margin too would leave large, well-measured gaps inconclusive
    at ten seeds. A gap inside the margin is never `worse`, however significant: it is `small`."""
    if not math.isfinite(gap):
        return "diverged", "a run diverged"
    if not (math.isfinite(p_equivalence) and math.isfinite(p_difference)):
        return "inconclusive", "one seed: no interval"
    alpha = 1 - confidence
    equivalent, differs = p_equivalence < alpha / 2, p_difference < alpha
    side = "above" if gap > 0 else "below"
    if differs and abs(gap) >= margin:
        return ("better" if gap > 0 else "worse"), "interval excludes 0, the gap beyond the margin"
    if differs:
        inside = "interval inside the margin" if equivalent else "interval reaching past the margin"
        return "small", f"significantly {side} 0, the gap inside the margin ({inside})"
    if equivalent:
        return "parity", "inside the margin"
    if half_width > margin:
        return "inconclusive", "underpowered"
    return "inconclusive", "interval covers 0 and reaches past the margin"


# Multiplicity, per family of verdicts: Holm's step-down (family-wise error) for the pre-registered
# primary family, Benjamini-Hochberg (false discovery rate) for every other family; both statsmodels'.
CORRECTION = {"primary": "holm"}
SECONDARY_CORRECTION = "fdr_bh"
CORRECTION_NAMES = {"holm": "Holm's correction", "fdr_bh": "Benjamini-Hochberg's correction"}


def corrected(table: pd.DataFrame, confidence: float, family: pd.Series | str = "all") -> pd.DataFrame:
    """`table` (rows of `compare`) judged again after a multiplicity correction within each family
    (statsmodels' `multipletests`: Holm for `primary`, Benjamini-Hochberg for any other family):
    `p_equivalence_adjusted` and `p_difference_adjusted`, the family, its size (rows with p-values)
    and `correction`, the verdict before correction (`verdict_uncorrected`) and after (`verdict`,
    `reason`). `family` names each row's family (a column or one name)."""
    from statsmodels.stats.multitest import multipletests

    out = table.copy()
    out["family"] = family
    adjusted = ("p_equivalence_adjusted", "p_difference_adjusted")
    if not len(out):
        return out.assign(
            family_size=pd.Series(dtype=int),
            correction=pd.Series(dtype=str),
            verdict_uncorrected=pd.Series(dtype=str),
            **{c: pd.Series(dtype=float) for c in adjusted},
        )
    out["verdict_uncorrected"] = out["verdict"]
    out["family_size"] = 0
    out["correction"] = out.family.map(lambda f: CORRECTION.get(f, SECONDARY_CORRECTION))
    for column in adjusted:
        out[column] = math.nan
    # statsmodels' Holm ends in gc.collect(): a full pass over every object of a process that has
    # imported torch took 0.3 s a call. Frozen objects are skipped (the same p-values, collected later).
    gc.freeze()
    try:
        for _, rows in out.groupby("family"):
            tested = rows[rows.p_equivalence.notna() & rows.p_difference.notna()]
            out.loc[rows.index, "family_size"] = len(tested)
            for column in ("p_equivalence", "p_difference"):
                if len(tested):
                    method = tested.correction.iloc[0]
                    out.loc[tested.index, f"{column}_adjusted"] = multipletests(tested[column], method=method)[1]
    finally:
        gc.unfreeze()
    judged = [
        judge(r.gap, r.half_width, r.p_equivalence_adjusted, r.p_difference_adjusted, r.margin, confidence)
        if math.isfinite(r.p_equivalence_adjusted)
        else (r.verdict, r.reason)
        for r in out.itertuples()
    ]
    out["verdict"] = [v for v, _ in judged]
    out["reason"] = [
        why
        if r.verdict_uncorrected == v or not math.isfinite(r.p_equivalence_adjusted)
        else (
            f"{r.verdict_uncorrected} before {CORRECTION_NAMES[r.correction]} over {r.family_size} comparisons "
            f"(adjusted p: equivalence {r.p_equivalence_adjusted:.3f}, difference {r.p_difference_adjusted:.3f})"
        )
        for (v, _), why, r in zip(judged, out.reason, out.itertuples())
    ]
    return out


def seeds_to_decide(gaps: list[float], margin: float, confidence: float) -> float:
    """Seeds the observed spread of the gaps would need for a decided verdict (the interval
    inside the margin, or excluding 0), if the mean and spread stayed as observed."""
    n = len(gaps)
    if n < 2:
        return math.nan
    mean, sd = sum(gaps) / n, _sd(gaps)
    target = max(margin - abs(mean), abs(mean))
    if sd == 0:
        return float(n)
    for k in range(2, MAX_SEEDS + 1):
        if t_multiplier(k, confidence) * sd / math.sqrt(k) < target:
            return float(k)
    return math.inf


def margin_of(cfg: StudyConfig, regime: str, metric: str) -> float:
    return cfg.analysis.parity_threshold[regime] if metric == "score" else cfg.analysis.greedy_margin


def paired_gaps(mine: pd.Series, base: pd.Series) -> dict:
    """`mine` minus `base` (values indexed by seed) for each seed both have, in seed order."""
    return {s: float(mine[s] - base[s]) for s in sorted(set(mine.index) & set(base.index))}


def compare(mine: pd.Series, base: pd.Series, margin: float, confidence: float) -> dict:
    """`mine` against `base` (values indexed by seed), paired by seed: the mean gap, its interval,
    the two tests' p-values and the verdict against `margin` (uncorrected for multiplicity: see
    `corrected`) with its reason and the seeds that would decide."""
    gaps = list(paired_gaps(mine, base).values())
    mean, low, high = interval(gaps, confidence) if gaps else (math.nan,) * 3
    p_equivalence, p_difference = p_values(gaps, margin)
    result, why = judge(mean, (high - low) / 2, p_equivalence, p_difference, margin, confidence)
    return {
        "gap": mean,
        "ci_low": low,
        "ci_high": high,
        "half_width": (high - low) / 2,
        "seeds": len(gaps),
        "margin": margin,
        "p_equivalence": p_equivalence,
        "p_difference": p_difference,
        "verdict": result,
        "reason": why,
        "seeds_to_decide": seeds_to_decide(gaps, margin, confidence),
    }


def verdicts(
    cfg: StudyConfig, runs: pd.DataFrame, best: pd.DataFrame, regimes: dict[tuple[str, str], str] | None = None
) -> pd.DataFrame:
    """Each method against FullFT, each at its own best lr, paired by seed, per metric, on the rows
    of `runs` (one per run: its primary scores, or one checkpoint's). `regimes`: what each (regime,
    model)'s verdicts are about (`about`, in column `about`); where FullFT gained nothing over the base
    the verdict is `not judged` and leaves the multiplicity families."""
    regimes = regimes or {}
    out = []
    by_method = best.set_index(["regime", "model", "method"])
    edges = by_method["edge"]
    # lrs the select stage tried past the config's grid (analysis.lr_extension); 0 without extension
    extended = by_method.get("extended", pd.Series(0, index=edges.index))
    chosen = runs.merge(best[["regime", "model", "method", "lr"]], on=["regime", "model", "method", "lr"])
    for (regime, model), group in chosen.groupby(["regime", "model"]):
        fullft = group[group.method == "fullft"].set_index("seed")
        if fullft.empty:
            continue
        for method, g in group.groupby("method"):
            if method == "fullft":
                continue
            mine = g.set_index("seed")
            for metric, name in METRICS.items():
                column = f"test_{name}"
                if column not in mine:
                    continue
                out.append(
                    {
                        "regime": regime,
                        "model": model,
                        "method": method,
                        "rank": lora_rank(method),
                        "metric": metric,
                        "lr": float(g["lr"].iloc[0]),
                        "lr_edge": edges[(regime, model, method)],
                        "fullft_lr": float(fullft["lr"].iloc[0]),
                        "fullft_lr_edge": edges[(regime, model, "fullft")],
                        "lr_extended": int(extended[(regime, model, method)]),
                        "fullft_lr_extended": int(extended[(regime, model, "fullft")]),
                        "test_value": float(mine[column].mean()),
                        "fullft_test_value": float(fullft[column].mean()),
                        **compare(
                            mine[column], fullft[column], margin_of(cfg, regime, metric), cfg.analysis.confidence
                        ),
                    }
                )
    table = pd.DataFrame(out)
    if not len(table):
        return table
    table["about"] = [regimes.get((r.regime, r.model), NOT_MEASURED) for r in table.itertuples()]
    table = not_judged(table)
    return corrected(table, cfg.analysis.confidence, family(table))


def not_judged(table: pd.DataFrame) -> pd.DataFrame:
    """The precondition: rows whose `about` is `not judged` (their FullFT did not gain over the base)
    get that verdict, and no p-values, so that no correction counts them."""
    out = table.copy()
    skip = out["about"] == "not judged"
    out.loc[skip, "verdict"] = "not judged"
    out.loc[skip, "reason"] = "FullFT gained nothing over the base on test (sharpening.csv): no learning to match"
    out.loc[skip, ["p_equivalence", "p_difference"]] = math.nan
    return out


def pooled(
    cfg: StudyConfig, runs: pd.DataFrame, best: pd.DataFrame, regimes: dict[tuple[str, str], str] | None = None
) -> pd.DataFrame:
    """Verdicts across base models (pooled.csv): for each model with replicas in the study ("<model>@<k>",
    each its own warm-start), each method against FullFT pooled over the replicas. Each replica's gaps
    are paired by seed at that replica's best lrs; the verdict (`compare`, `judge`) is taken on the
    replicas' mean gaps, so its t interval has one degree of freedom per base model but one (the base
    model is the unit a rerun on another base model samples). Beside it: `two_level_low/high`, the
    two-level bootstrap (base model, then seed: `two_level`), and `base_share`, the share of the gaps'
    variance that comes from the base model (`base_share`). `about` is the weakest of the replicas'
    readings (`regimes`, as in `verdicts`): a pool with a replica whose FullFT gained nothing is
    `not judged`. Corrected like verdicts.csv (its own families). Empty where no model has a replica."""
    regimes = regimes or {}
    replicas: dict[str, list[str]] = {}
    for m in cfg.confirm_models():
        replicas.setdefault(architecture_of(m), []).append(m)
    chosen = runs.merge(best[["regime", "model", "method", "lr"]], on=["regime", "model", "method", "lr"])
    out = []
    for regime in cfg.regimes:
        for model, members in replicas.items():
            cell = chosen[(chosen.regime == regime) & chosen.model.isin(members)]
            if len(members) < 2 or cell.empty:
                continue
            for method in sorted(set(cell.method) - {"fullft"}, key=method_position):
                for metric, name in METRICS.items():
                    gaps = replica_gaps(cell, members, method, f"test_{name}")
                    if gaps.empty or gaps.base.nunique() < 2:
                        continue
                    means = gaps.groupby("base", sort=False).gap.mean().reset_index(drop=True)
                    margin = margin_of(cfg, regime, metric)
                    result = compare(means, pd.Series(0.0, index=means.index), margin, cfg.analysis.confidence)
                    _, low, high = two_level(gaps, cfg.analysis.confidence)
                    out.append(
                        {
                            "regime": regime,
                            "model": model,
                            "method": method,
                            "metric": metric,
                            "base_models": len(means),
                            "runs": len(gaps),
                            **{k: v for k, v in result.items() if k != "seeds"},
                            "two_level_low": low,
                            "two_level_high": high,
                            "base_share": base_share(gaps),
                            "about": weakest(regimes.get((regime, m), NOT_MEASURED) for m in members),
                        }
                    )
    table = pd.DataFrame(out)
    if not len(table):
        return table
    return corrected(not_judged(table), cfg.analysis.confidence, family(table))


# What a verdict pooled over base models (pooled.csv) brings to verdicts.csv's row of its model.
POOLED_FIELDS = (
    "gap ci_low ci_high half_width margin p_equivalence p_difference reason seeds_to_decide about base_models "
    "two_level_low two_level_high base_share"
).split()


def over_base_models(table: pd.DataFrame, pools: pd.DataFrame, confidence: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """verdicts.csv and replicas.csv: where a model has base-model replicas (pooled.csv's rows, `pools`),
    its one verdict per metric is the pooled one, in place of one per replica, which go to replicas.csv.
    A pooled row keeps its model's own lrs and edges, `seeds` counts the paired runs over the base
    models, `stable` holds where every replica's is. The rows left are corrected again, so that the
    primary family counts each model once."""
    if not len(pools) or not len(table):
        return table, table.iloc[0:0]
    key = ["regime", "model", "method", "metric"]
    of = table.model.map(architecture_of)  # each row's model, a replica's its model's
    per_base = pd.Series(list(zip(table.regime, of)), index=table.index).isin(set(zip(pools.regime, pools.model)))
    replicas, of = table[per_base], of[per_base]
    rows = []
    for p in pools.itertuples():
        members = replicas[
            (replicas.regime == p.regime)
            & (of == p.model)
            & (replicas.method == p.method)
            & (replicas.metric == p.metric)
        ]
        own = members[members.model == p.model]
        first = (own if len(own) else members).iloc[0].to_dict()
        rows.append(
            first
            | {k: getattr(p, k) for k in key}
            | {k: getattr(p, k) for k in POOLED_FIELDS}
            | {
                "verdict_uncorrected": p.verdict_uncorrected,
                "seeds": p.runs,
                "test_value": members.test_value.mean(),
                "fullft_test_value": members.fullft_test_value.mean(),
                "stable": bool(members.stable.all()) if "stable" in members else True,
                "by_step": "",
                "seeds_to_stable": math.nan,
            }
        )
    order = {g: i for i, g in enumerate(dict.fromkeys(table.regime))}
    merged = pd.concat([table[~per_base], pd.DataFrame(rows)], ignore_index=True)
    merged = merged.sort_values("regime", key=lambda g: g.map(order), kind="stable", ignore_index=True)
    merged["verdict"] = merged["verdict_uncorrected"]  # judged again below, each family as it now stands
    return corrected(merged, confidence, family(merged)), replicas


def replica_gaps(cell: pd.DataFrame, members: list[str], method: str, column: str) -> pd.DataFrame:
    """`method`'s paired gaps to FullFT on `column`, one row per (replica `base`, seed)."""
    if column not in cell:
        return pd.DataFrame(columns=["base", "seed", "gap"])
    rows = []
    for model in members:
        here = cell[cell.model == model].set_index("seed")
        gaps = paired_gaps(here[here.method == method][column], here[here.method == "fullft"][column])
        rows += [{"base": model, "seed": seed, "gap": gap} for seed, gap in gaps.items()]
    return pd.DataFrame(rows, columns=["base", "seed", "gap"])


# The pre-registered primary family: rank 1 (all-linear) against FullFT on the score, per regime and
# model (Holm's correction). Every other comparison of verdicts.csv is the secondary family
# (Benjamini-Hochberg's).
PRIMARY = {"method": "lora-r1", "metric": "score"}


def family(table: pd.DataFrame) -> pd.Series:
    """Each verdict row's family: `primary` (see PRIMARY) or `secondary`."""
    primary = (table.method == PRIMARY["method"]) & (table.metric == PRIMARY["metric"])
    return primary.map({True: "primary", False: "secondary"})


VERDICT_KEY = ["regime", "model", "method", "metric"]


def trajectory(
    cfg: StudyConfig, checkpoints: pd.DataFrame, best: pd.DataFrame, regimes: dict | None = None
) -> pd.DataFrame:
    """The verdict at every late checkpoint: each method against FullFT on that step's test scores,
    at the learning rates the primary score chose (trajectory.csv); `regimes` as in `verdicts`."""
    frames = (
        [verdicts(cfg, g, best, regimes).assign(step=int(step)) for step, g in checkpoints.groupby("step")]
        if len(checkpoints)
        else []
    )
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=[*VERDICT_KEY, "step", "gap", "ci_low", "ci_high", "verdict"])
    return pd.concat(frames).sort_values([*VERDICT_KEY, "step"]).reset_index(drop=True)


def by_step(steps: list[int], labels: list[str]) -> str:
    """Runs of one verdict over consecutive checkpoints, e.g. "parity at 105-140, worse at 158-175"."""
    parts, start = [], 0
    for i in range(1, len(steps) + 1):
        if i == len(steps) or labels[i] != labels[start]:
            span = f"{steps[start]}" if i - 1 == start else f"{steps[start]}-{steps[i - 1]}"
            parts.append(f"{labels[start]} at {span}")
            start = i
    return ", ".join(parts)


def stability(table: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """`table` (verdicts.csv) with `stable` (the verdict at every late checkpoint agrees with the
    primary verdict), `by_step` (the verdicts at the checkpoints, in words) and `seeds_to_stable`
    (the seeds the observed spread would need to decide every inconclusive checkpoint; NaN when
    none is inconclusive)."""
    if not len(table):
        return table.assign(
            stable=pd.Series(dtype=bool), by_step=pd.Series(dtype=str), seeds_to_stable=pd.Series(dtype=float)
        )
    grouped = {key: g for key, g in steps.groupby(VERDICT_KEY)} if len(steps) else {}
    stable, words, need = [], [], []
    for r in table.itertuples():
        g = grouped.get((r.regime, r.model, r.method, r.metric))
        if g is None:
            stable.append(True)
            words.append("")
            need.append(math.nan)
            continue
        stable.append(bool((g.verdict == r.verdict).all()))
        words.append(by_step(g.step.tolist(), g.verdict.tolist()))
        open_ = g[g.verdict == "inconclusive"]
        need.append(float(open_.seeds_to_decide.max()) if len(open_) else math.nan)
    return table.assign(stable=stable, by_step=words, seeds_to_stable=need)


def plateau(cfg: StudyConfig, curves: pd.DataFrame, best: pd.DataFrame, regimes=("rl",)) -> pd.DataFrame:
    """Each method at its best lr: had its curve (RL reward, SFT loss) stopped improving?

    Per seed, the least-squares slope of the curve over its last 2 x `plateau_share` of steps
    (numpy's polyfit), as the improvement it would make over one more such share of steps
    (`rise`: reward gained, or loss lost); over seeds its mean and t interval. A method is at its
    plateau when the whole interval of `rise` lies below the regime's parity margin: another
    window of training would not gain what the study counts as a difference. With one seed
    there is no interval and no plateau. `change` (the late window's mean against the window
    before it) and `seed_spread` are kept for reading."""
    import numpy as np

    share = cfg.analysis.plateau_share
    chosen = curves[curves.regime.isin(regimes)].merge(best[["regime", "model", "method", "lr"]])
    rows = []
    for (regime, model, method, lr), g in chosen.groupby(["regime", "model", "method", "lr"]):
        steps = int(g.step.max()) + 1
        w = max(1, round(steps * share))
        sign = SCORE[regime][1]
        tail = g[g.step >= steps - 2 * w]
        rises = [
            float(sign * np.polyfit(s.step, s.value, 1)[0] * w) if s.step.nunique() > 1 else math.nan
            for _, s in tail.groupby("seed")
        ]
        rises = [r for r in rises if math.isfinite(r)]
        rise, low, high = interval(rises, cfg.analysis.confidence) if rises else (math.nan,) * 3
        late = g[g.step >= steps - w].groupby("seed").value.mean()
        early = g[(g.step >= steps - 2 * w) & (g.step < steps - w)].groupby("seed").value.mean()
        margin = cfg.analysis.parity_threshold[regime]
        rows.append(
            {
                "regime": regime,
                "model": model,
                "method": method,
                "lr": lr,
                "steps": steps,
                "window": w,
                "reward_before": float(early.mean()),
                "reward_last": float(late.mean()),
                "change": float(late.mean() - early.mean()),
                "seed_spread": _sd(early.tolist()) if len(early) > 1 else math.nan,
                "rise": rise,
                "rise_ci_low": low,
                "rise_ci_high": high,
                "margin": margin,
                "plateau": bool(math.isfinite(high) and high < margin),
            }
        )
    return pd.DataFrame(rows)


def sharpening(cfg: StudyConfig, judged: pd.DataFrame, best: pd.DataFrame, at: Layout) -> pd.DataFrame:
    """Sharpening or learning, per RL model (sharpening.csv): the sharpening profile on the whole test
    split (greedy accuracy, mean reward and pass@k: rankone.rollouts.profile) of the base model at the
    evaluation temperature, of the controls and of each method's final weights at its best lr (mean
    over the judged seeds, with t intervals).

    The controls: the base at the temperature with the best val reward (no training), and, where the
    grid has them, the trained controls of CONTROL_METHODS, each at its own best lr: `temperature`
    (RL of one scalar that scales the logits) and `majority` (FullFT RL rewarded for agreeing with its
    group's majority answer: entropy minimisation, which reads no answer). For each value the
    strongest control on test is the reference (`*_control` names it): `*_beyond_control` is the
    method's gain over it, the part of its gain over the base that sharpening does not give ("learned
    beyond sharpening"), with a t interval (Welch's, from statsmodels, against a trained control's
    seeds); `*_over_base` is the whole gain. A temperature moves no argmax, so the temperature
    controls' greedy accuracy is the base's; the majority reward can move it (onto the base's own
    mode). Empty without RL."""
    if "rl" not in cfg.regimes:
        return pd.DataFrame()
    ks = cfg.sharpening.pass_at
    values = ["greedy_accuracy", "mean_reward", *(f"pass_at_{k}" for k in ks)]
    chosen = judged[judged.regime == "rl"].merge(best[["regime", "model", "method", "lr"]])
    rows = []
    for model in cfg.confirm_models():
        summary = read_json(at.rollouts(model) / "summary.json")["sharpening"]
        by_t = summary["temperatures"]
        base = by_t[f"{summary['evaluation_temperature']:g}"]["test"]
        fixed = by_t[f"{summary['best_temperature']:g}"]["test"]
        rows.append(
            {
                "model": model,
                "method": "base",
                "temperature": summary["evaluation_temperature"],
                "seeds": 0,
                **{v: base[v] for v in values},
            }
        )
        rows.append(
            {
                "model": model,
                "method": "control: base at best temperature",
                "temperature": summary["best_temperature"],
                "seeds": 0,
                **{v: fixed[v] for v in values},
            }
        )
        mine = chosen[chosen.model == model]
        profiled = {m: g for m, g in mine.groupby("method") if f"profile_{values[0]}" in g}
        controls = {m: profiled[m] for m in CONTROL_METHODS if m in profiled}
        for method, g in sorted(profiled.items(), key=lambda kv: kv[0] not in CONTROL_METHODS):
            row = {
                "model": model,
                "method": method,
                "lr": float(g.lr.iloc[0]),
                "seeds": len(g),
                "temperature": summary["evaluation_temperature"],
            }
            for v in values:
                row[v] = float(g[f"profile_{v}"].mean())
            for v in ("greedy_accuracy", "mean_reward"):
                column = g[f"profile_{v}"].tolist()
                mean, low, high = interval([x - base[v] for x in column], cfg.analysis.confidence)
                row |= {f"{v}_over_base": mean, f"{v}_over_base_ci_low": low, f"{v}_over_base_ci_high": high}
                # the strongest control of this value (the fixed one on a tie), never the method itself
                candidates = [("base at best temperature", fixed[v])] + [
                    (CONTROL_METHODS[m], c[f"profile_{v}"].tolist()) for m, c in controls.items() if m != method
                ]
                name, reference = max(candidates, key=lambda c: pd.Series(c[1]).mean())
                mean, low, high = difference(column, reference, cfg.analysis.confidence)
                row |= {f"{v}_beyond_control": mean, f"{v}_beyond_control_ci_low": low}
                row |= {f"{v}_beyond_control_ci_high": high, f"{v}_control": name}
            row["reads"] = "control" if method in CONTROL_METHODS else reads(row)
            rows.append(row)
    return pd.DataFrame(rows)


def difference(values: list[float], reference: float | list[float], confidence: float) -> tuple[float, float, float]:
    """Mean of `values` minus `reference` with a t interval: one-sample against a fixed reference,
    Welch's (unequal variances; statsmodels' CompareMeans) against another set of runs. NaN bounds
    where either side has fewer than two values."""
    if not isinstance(reference, list):
        return interval([x - reference for x in values], confidence)
    mean = sum(values) / len(values) - sum(reference) / len(reference)
    if min(len(values), len(reference)) < 2:
        return mean, math.nan, math.nan
    from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

    low, high = CompareMeans(DescrStatsW(values), DescrStatsW(reference)).tconfint_diff(
        alpha=1 - confidence, usevar="unequal"
    )
    return mean, float(low), float(high)


def reads(row: dict) -> str:
    """What a trained method's gain over the base is: `learning` when its greedy accuracy beats the
    best sharpening control's with an interval above 0 (it changed which answers the policy gives),
    `sharpening` when only its sampled reward rose significantly above the base's, `no gain` else;
    `one seed` when there is no interval to tell."""
    if math.isnan(row["greedy_accuracy_beyond_control_ci_low"]):
        return "one seed"
    if row["greedy_accuracy_beyond_control_ci_low"] > 0:
        return "learning"
    if row["mean_reward_over_base_ci_low"] > 0:
        return "sharpening"
    return "no gain"


# What a regime's verdicts are about, from its strongest arm (FullFT) in sharpening.csv: an arm that
# gained nothing over the base cannot judge the weaker ones (`not judged`).
ABOUT = {"learning": "learning", "sharpening": "sharpening", "no gain": "not judged", "one seed": "one seed"}
NOT_MEASURED = "not measured"  # SFT, or RL with no FullFT profile
# What a pool of verdicts is about: its weakest member's reading, in this order.
READINGS = ("not judged", "one seed", NOT_MEASURED, "sharpening", "learning")


def weakest(readings) -> str:
    return min(readings, key=READINGS.index)


def about(sharp: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(regime, model) -> what its verdicts are about (ABOUT of FullFT's `reads` in sharpening.csv)."""
    if not len(sharp):
        return {}
    full = sharp[sharp.method == "fullft"]
    return {("rl", r.model): ABOUT[r.reads] for r in full.itertuples()}


BOOTSTRAP = 2000  # resamples of the seeds for the fitted optimum's interval


def lr_optimum(runs: pd.DataFrame, confidence: float, resamples: int = BOOTSTRAP) -> pd.DataFrame:
    """Each method's fitted optimum learning rate (lr_optimum.csv): a quadratic in log10(lr) fitted by
    least squares (numpy's polyfit) to every completed sweep run's val score, its vertex when the
    parabola opens downwards, and a percentile interval from resampling the seeds (each seed keeps its
    runs at every lr; the same resamples for every method of a (regime, model), so that LoRA's optimum
    over FullFT's, `ratio_to_fullft`, gets a paired interval). `interior` says whether the vertex lies
    inside the grid; `edge` whether the grid's best lr is on its edge (then the fit extrapolates).
    NaN where fewer than 3 learning rates completed or the fit has no maximum."""
    import numpy as np

    done = runs[(runs.status == "completed") & runs.val_score.notna()]
    rows = []
    for (regime, model), group in done.groupby(["regime", "model"]):
        seeds = sorted(group.seed.unique())
        rng = np.random.default_rng(0)
        draws = [rng.choice(seeds, size=len(seeds)) for _ in range(resamples)]
        vertex = {}
        for method, g in group.groupby("method"):
            by_seed = {s: d for s, d in g.groupby("seed")}
            x = np.log10(g.lr.to_numpy(float))
            point = _vertex(g)
            boot = np.array([_vertex(pd.concat([by_seed[s] for s in draw if s in by_seed])) for draw in draws])
            vertex[method] = (point, boot)
            low, high = _percentiles(boot, confidence)
            means = g.groupby("lr").val_score.mean()
            best = float(means.idxmax())
            rows.append(
                {
                    "regime": regime,
                    "model": model,
                    "method": method,
                    "grid": " ".join(f"{lr:g}" for lr in sorted(g.lr.unique())),
                    "best_lr": best,
                    "edge": "low" if best == means.index.min() else "high" if best == means.index.max() else "",
                    "fitted_lr": _power(point),
                    "fitted_lr_ci_low": _power(low),
                    "fitted_lr_ci_high": _power(high),
                    "interior": bool(math.isfinite(point) and x.min() <= point <= x.max()),
                    "no_maximum_share": float(np.isnan(boot).mean()),
                }
            )
        full = vertex.get("fullft")
        for row in rows:
            if (row["regime"], row["model"]) != (regime, model) or full is None or row["method"] == "fullft":
                continue
            point, boot = vertex[row["method"]]
            low, high = _percentiles(boot - full[1], confidence)
            row["ratio_to_fullft"] = _power(point - full[0])
            row["ratio_ci_low"], row["ratio_ci_high"] = _power(low), _power(high)
    return pd.DataFrame(rows)


def _vertex(runs: pd.DataFrame) -> float:
    """log10 of the lr at the maximum of a quadratic in log10(lr) fitted to `runs`' val scores; NaN
    with fewer than 3 learning rates or a fit that opens upwards."""
    import numpy as np

    x, y = np.log10(runs.lr.to_numpy(float)), runs.val_score.to_numpy(float)
    if len(set(x)) < 3:
        return math.nan
    a, b, _ = np.polyfit(x, y, 2)
    return float(-b / (2 * a)) if a < 0 else math.nan


def _power(decades: float) -> float:
    """10 ** decades; NaN when not finite or more than 30 decades out (a vertex of a nearly flat fit)."""
    return 10**decades if math.isfinite(decades) and abs(decades) < 30 else math.nan


def two_level(gaps: pd.DataFrame, confidence: float, resamples: int = BOOTSTRAP, seed: int = 0):
    """The mean gap over base models and its interval from a two-level bootstrap: resample the base
    models (column `base`) with replacement, then each drawn base model's seeds (rows, column `gap`)
    with replacement; the statistic is the mean of the base models' mean gaps (each base model
    weighs the same), the interval its central `confidence` percentiles. With one base model it is
    the seeds' bootstrap alone, which cannot see the base model's share of the variance."""
    import numpy as np

    rng = np.random.default_rng(seed)
    groups = [g["gap"].to_numpy(dtype=float) for _, g in gaps.groupby("base")]
    mean = float(np.mean([g.mean() for g in groups]))
    draws = np.empty(resamples)
    for i in range(resamples):
        picked = rng.integers(len(groups), size=len(groups))
        draws[i] = np.mean([rng.choice(groups[j], size=len(groups[j])).mean() for j in picked])
    low, high = _percentiles(draws, confidence)
    return mean, low, high


def base_share(gaps: pd.DataFrame) -> float:
    """The share of the gaps' variance that comes from the base model: a random intercept per base
    model (statsmodels' MixedLM, REML), its variance over that plus the residual (seed) variance.
    NaN with fewer than two base models, or when the fit fails."""
    import warnings

    if gaps["base"].nunique() < 2:
        return math.nan
    import numpy as np
    import statsmodels.formula.api as smf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a boundary fit (no base-model variance) warns; its share is 0
        try:
            fit = smf.mixedlm("gap ~ 1", gaps, groups=gaps["base"]).fit(reml=True)
        except (ValueError, np.linalg.LinAlgError):
            return math.nan
    between, within = float(fit.cov_re.iloc[0, 0]), float(fit.scale)
    total = between + within
    return between / total if total > 0 else math.nan


def _percentiles(values, confidence: float) -> tuple[float, float]:
    """The central `confidence` percentile interval of the finite `values`; NaN when more than a tenth
    of them are not finite (the fit had no maximum too often to trust an interval)."""
    import numpy as np

    finite = values[np.isfinite(values)]
    if len(finite) < 0.9 * len(values) or not len(finite):
        return math.nan, math.nan
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def lr_vs_rank(best: pd.DataFrame) -> pd.DataFrame:
    """Best lr per rank, its ratio to FullFT's best lr, and the spread of LoRA's best lrs (decades)."""
    rows = []
    for (regime, model), g in best.groupby(["regime", "model"]):
        full = g[g.method == "fullft"].lr
        lora = g[g.method.map(method_kind) == "lora"]
        spread = math.log10(lora.lr.max() / lora.lr.min()) if len(lora) else math.nan
        for r in lora.itertuples():
            rows.append(
                {
                    "regime": regime,
                    "model": model,
                    "method": r.method,
                    "best_lr": r.lr,
                    "fullft_best_lr": float(full.iloc[0]) if len(full) else math.nan,
                    "ratio_to_fullft": r.lr / float(full.iloc[0]) if len(full) else math.nan,
                    "lora_spread_decades": spread,
                }
            )
    return pd.DataFrame(rows)


def early_coincidence(curves: pd.DataFrame, early_steps: int) -> pd.DataFrame:
    """At each lr that every LoRA rank ran: the largest gap between the ranks' mean curves
    (over seeds) in the first `early_steps` steps. Small = ranks learn alike early (1/r scaling)."""
    rows = []
    lora = curves[(curves.method.map(method_kind) == "lora") & (curves.step < early_steps)]
    for (regime, model, lr), g in lora.groupby(["regime", "model", "lr"]):
        table = g.groupby(["step", "method"])["value"].mean().unstack("method")
        if table.shape[1] < 2:
            continue
        rows.append(
            {
                "regime": regime,
                "model": model,
                "lr": lr,
                "ranks": table.shape[1],
                "steps": len(table),
                "max_gap": float((table.max(axis=1) - table.min(axis=1)).max()),
                "mean_gap": float((table.max(axis=1) - table.min(axis=1)).mean()),
            }
        )
    return pd.DataFrame(rows)


def layers(cfg: StudyConfig, runs: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """Scoped LoRA (attention-only, MLP-only, one projection) against all-linear at the same rank, each
    at its best lr: the test-score gap, paired by seed, with a t interval (empty without scoped methods)."""
    chosen = runs.merge(best[["regime", "model", "method", "lr"]], on=["regime", "model", "method", "lr"])
    rows = []
    for (regime, model), group in chosen.groupby(["regime", "model"]):
        for method, g in group.groupby("method"):
            scope = cfg.scope(method)
            if lora_scope(method) is None:
                continue
            base = group[group.method == method.rsplit("-", 1)[0]].set_index("seed")["test_score"]
            mine = g.set_index("seed")["test_score"]
            if not set(mine.index) & set(base.index):
                continue
            result = compare(mine, base, cfg.analysis.parity_threshold[regime], cfg.analysis.confidence)
            rows.append(
                {
                    "regime": regime,
                    "model": model,
                    "rank": int(g["rank"].iloc[0]),
                    "scope": scope,
                    "method": method,
                    "lr": float(g["lr"].iloc[0]),
                    "test_score": float(mine.mean()),
                    "all_linear_test_score": float(base.mean()),
                    "gap_to_all_linear": result.pop("gap"),
                    **result,
                }
            )
    return corrected(pd.DataFrame(rows), cfg.analysis.confidence, "layers")


def information(cfg: StudyConfig, runs: pd.DataFrame, best: pd.DataFrame, at: Layout) -> pd.DataFrame:
    """Bits against trainable parameters, per (regime, model, method), at the best lr."""
    chosen = runs.merge(best[["regime", "model", "method", "lr"]], on=["regime", "model", "method", "lr"])
    table = chosen.groupby(["regime", "model", "method"], as_index=False).agg(
        trainable_parameters=("trainable_parameters", "first"),
        info_bound_bits=("info_bound_bits", "mean"),
        bits_absorbed=("bits_absorbed", "mean"),
        train_nll_bits_final=("train_nll_bits_final", "mean"),
        test_greedy_accuracy=("test_greedy_accuracy", "mean"),
    )
    table["capacity_bits"] = table["trainable_parameters"] * cfg.analysis.bits_per_param
    for regime in cfg.regimes:  # the same two estimates in both regimes, where the runs store a table
        if not measures_storage(cfg, regime):
            continue
        column, rows = f"{regime}_dataset_bits", table.regime == regime
        table[column] = read_json(at.data(regime) / "manifest.json")["information_bits"]
        table.loc[rows, "bits_stored"] = bits_stored(table[column][rows], table.train_nll_bits_final[rows])
        task = cfg.tasks[regime]
        if task_of(task).stores_table:  # recall of the probed facts, in bits (Fano), beside the NLL estimate
            p = params_of(task)
            table.loc[rows, "bits_recalled"] = table.test_greedy_accuracy[rows].map(
                lambda a: bits_recalled(p.n_facts, p.alphabet**p.digits, a)
            )
    return table


def select(cfg: StudyConfig, at: Layout, round_: int | None = None) -> pd.DataFrame:
    """The select stage: each method's best lr on val over the sweep and its edge-extension rounds
    (analysis.lr_extension), before any verdict. After every round: best_lr.csv, which the
    confirmation runs rerun exactly; after rounds 1..`round_` (0: the sweep alone) the table whose
    `next_lr` the next round runs (at.select_round). `extended` counts the lrs tried past the
    config's grid; a best lr still on an edge of best_lr.csv with lr_extension > 0 hit the cap."""
    cap = cfg.analysis.lr_extension
    if round_ is not None and not 0 <= round_ < cap:
        raise ConfigError(
            f"--round {round_}: the extension rounds before the last are 0..{cap - 1} (lr_extension {cap})"
        )
    runs = sweep(cfg, at, cap if round_ is None else round_)[0]
    best = best_learning_rates(runs)
    tried = runs.groupby(["regime", "model", "method"]).lr.unique()
    best.insert(
        best.columns.get_loc("edge"),
        "extended",
        [
            sum(lr not in cfg.lr_grid(r.regime, r.method) for lr in tried[r.regime, r.model, r.method])
            for r in best.itertuples()
        ],
    )
    path = at.table("best_lr.csv") if round_ is None else at.select_round(round_)
    text = best.to_csv(index=False)
    if not path.is_file() or path.read_text() != text:  # unchanged, it keeps its time: no confirmation rerun
        with atomic_path(path) as tmp:
            tmp.write_text(text)
    return best


def extension_lrs(at: Layout, round_: int) -> dict[tuple[str, str, str], float]:
    """The lrs edge-extension round `round_` runs: `next_lr` of each method whose best lr after the
    rounds before it sits on an edge (at.select_round(round_ - 1))."""
    path = at.select_round(round_ - 1)
    if not path.is_file():
        raise IncompleteRunError(f"missing {path}: run select --round {round_ - 1} first")
    table = read_table(path)
    return {(r.regime, r.model, r.method): float(r.next_lr) for r in table.itertuples() if pd.notna(r.next_lr)}


def sweep(cfg: StudyConfig, at: Layout, rounds: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """`collect`'s tables over the sweep's runs and those of its edge-extension rounds 1..`rounds`
    (default: every round, analysis.lr_extension)."""
    parts = [collect(cfg, at)]
    for k in range(1, (cfg.analysis.lr_extension if rounds is None else rounds) + 1):
        parts.append(collect(cfg.extension_study(extension_lrs(at, k)), at.extension(k)))
    return tuple(  # type: ignore[return-value]
        pd.concat([p[i] for p in parts if len(p[i])] or [parts[0][i]], ignore_index=True) for i in range(3)
    )


def read_best(at: Layout) -> pd.DataFrame:
    path = at.table("best_lr.csv")
    if not path.is_file():
        raise IncompleteRunError(f"missing {path}: run the select stage first (rankone select)")
    return read_table(path)


def chosen(at: Layout, best: pd.DataFrame | None = None) -> dict[tuple[str, str, str], float]:
    """(regime, model, method) -> the lr select chose for it (from `best`, when already read)."""
    best = read_best(at) if best is None else best
    return {(r.regime, r.model, r.method): float(r.lr) for r in best.itertuples()}


def with_replicas(cfg: StudyConfig, best: pd.DataFrame) -> pd.DataFrame:
    """`best` with a row for each base-model replica of the confirmation runs
    (confirmation.base_models), each its model's: a replica runs at the lr its model's sweep chose."""
    rows = [
        best[best.model == model].assign(model=replica)
        for model in cfg.models
        for replica in cfg.replicas_of(model)[1:]
    ]
    return pd.concat([best, *rows], ignore_index=True) if rows else best


def judged_on(table: pd.DataFrame, confirmed) -> pd.DataFrame:
    """`table` (verdicts) with the seeds each regime is judged on: its confirmation seeds, or the
    sweep's own (exploratory: the seeds that chose the lr also judge it)."""
    if not len(table):
        return table.assign(judged_on=pd.Series(dtype=str))
    return table.assign(judged_on=table.regime.map(lambda g: "confirmation seeds" if g in confirmed else "sweep seeds"))


def _without(frame: pd.DataFrame, regimes: list[str]) -> pd.DataFrame:
    return frame[~frame.regime.isin(regimes)] if len(frame) else frame


def judging(cfg: StudyConfig, at: Layout, best: pd.DataFrame, tables: tuple) -> tuple:
    """`tables`, the sweep's (runs, curves, checkpoints) as `collect` gives them, with each confirmed
    regime's rows replaced by its confirmation runs' (at the lrs `best` chose): the runs that judge."""
    confirmed = cfg.confirmed_regimes()
    if not confirmed:
        return tables
    parts = [collect(cfg.confirm_study(chosen(at, best), regime), at.confirm()) for regime in confirmed]
    return tuple(
        pd.concat([_without(table, confirmed), *(part[i] for part in parts)], ignore_index=True)
        for i, table in enumerate(tables)
    )


def run(cfg: StudyConfig, at: Layout) -> None:
    """Every table below from the sweep's runs, but the verdicts (and the trajectory and layers
    tables) from the runs that judge: with a confirmation section its fresh seeds, else the sweep's
    (with its edge-extension rounds')."""
    runs, curves, checkpoints = sweep(cfg, at)
    best = read_best(at)
    confirmed = cfg.confirmed_regimes()
    judged, _, judged_checkpoints = judging(cfg, at, best, (runs, curves, checkpoints))
    judged_best = with_replicas(cfg, best)  # the confirmation runs' replicas of a base model, at its lrs
    sharp = sharpening(cfg, judged, judged_best, at)
    regimes = about(sharp)
    steps = trajectory(cfg, judged_checkpoints, judged_best, regimes)
    pools = pooled(cfg, judged, judged_best, regimes)
    headline, per_base = over_base_models(
        judged_on(stability(verdicts(cfg, judged, judged_best, regimes), steps), confirmed),
        pools,
        cfg.analysis.confidence,
    )
    table = {
        "runs.csv": runs,
        **({"confirm_runs.csv": judged[judged.regime.isin(confirmed)]} if confirmed else {}),
        "curves.csv": curves,
        "checkpoints.csv": judged_checkpoints,
        "verdicts.csv": headline,
        "trajectory.csv": steps,
        "information.csv": information(cfg, runs, best, at),
        "lr_vs_rank.csv": lr_vs_rank(best),
        "lr_optimum.csv": lr_optimum(runs, cfg.analysis.confidence),
        "early_curves.csv": early_coincidence(curves, cfg.analysis.early_steps),
        "layers.csv": layers(cfg, judged, judged_best),
        "plateau.csv": plateau(cfg, curves, best),
        "sharpening.csv": sharp,
        "pooled.csv": pools,
        "replicas.csv": per_base,
    }
    at.write_tables(table)
    write_json(
        at.table("summary.json"),
        {
            "runs": len(runs),
            "confirmation_runs": int(judged.regime.isin(confirmed).sum()),
            "diverged": int((runs.status != "completed").sum()),
            "verdicts": table["verdicts.csv"].to_dict(orient="records"),
        },
    )
