"""The levers stage: each RL lever against plain RL, at equal episodes.

A lever (config `levers.variants`) is an RL sub-study under levers/<name>/: the study's
RL runs with some `rl` fields changed (PSR/NSR, the variance filter, the controls'
rewards), each with its own learning-rate sweep. Every lever run samples the episodes
a plain run samples (the variance filter stops at that budget), so the comparison is
at equal episodes. Per (lever, model, method), each side at its own best lr on val:

- `levers_pass_at_k.csv`: test pass@k for k = 1 .. rl.group_size of every chosen run,
  lever and plain alike, scored here with the evaluate stage's scorer at group_size
  samples per prompt (same prompts, seeds and answer checker);
- `levers.csv`: the test gap to plain RL, paired by seed, judged by the equivalence
  rule (`rankone.analysis.compare`), for the score (mean reward, from the evaluate
  stage), pass@1 and pass@group_size (the claim for NSR is that negatives keep pass@k);
- `levers_efficiency.csv`: per side, the episodes and wall-clock seconds each run took
  to reach `levers.target_reward` (training reward, task checker, mean over
  `rl.format_collapse_window` steps), how many seeds reached it, the share of sampled
  groups whose rewards were all equal (wasted: no gradient), steps and episodes used;
- `levers_calibration.csv` (header only unless the task states a confidence): per step of
  every chosen run, the sampled batch's Brier score and expected calibration error, so
  the calibration lever (`rl.calibration_alpha`) is seen against plain RL over training;
  its final test Brier and ECE join `levers.csv` (gaps: plain minus lever, lower is better).

Reads run outputs only: the study's analysis tables, base models and test split, each
lever's runs and evaluations.
"""

from __future__ import annotations

import math

import pandas as pd

from rankone.analysis import best_learning_rates, collect, compare, corrected
from rankone.config import RunId, StudyConfig
from rankone.data import read_split
from rankone.io import log, read_jsonl, read_table, seed_everything
from rankone.paths import Layout
from rankone.substudies import SubStudy
from rankone.tasks import task_of

KEYS = ["model", "method"]
LOWER_IS_BETTER = ("brier", "ece")
CALIBRATION_COLUMNS = [
    "lever",
    "model",
    "method",
    "lr",
    "seed",
    "step",
    "episodes",
    "reward",
    "brier",
    "ece",
    "confidence_stated",
]


def to_target(
    rewards: list[float], seconds: list[float], episodes: list[int], target: float, window: int
) -> tuple[float, float]:
    """(episodes, seconds) when the mean reward over the last `window` steps first reaches
    `target` (NaN, NaN when it never does)."""
    for i in range(window - 1, len(rewards)):
        if sum(rewards[i - window + 1 : i + 1]) / window >= target:
            return float(episodes[i]), float(sum(seconds[: i + 1]))
    return math.nan, math.nan


def efficiency(cfg: StudyConfig, study: StudyConfig, at: Layout, runs: pd.DataFrame) -> pd.DataFrame:
    """Per run in `runs` (of `study`, under `at`): episodes and seconds to the target, wasted groups."""
    rows = []
    for r in runs.itertuples():
        run = RunId("rl", r.model, r.method, r.lr, r.seed)
        steps = read_jsonl(at.train(run) / "metrics.jsonl")
        timings = read_jsonl(at.train(run) / "timings.jsonl")
        episodes, seconds = to_target(
            [s["reward"] for s in steps],
            [t["seconds"] for t in timings],
            [s["episodes"] for s in steps],
            cfg.levers.target_reward,
            cfg.rl.format_collapse_window,
        )
        sampled = [s.get("groups_sampled", study.rl.prompts_per_step) for s in steps]
        wasted = sum(s["zero_variance_share"] * n for s, n in zip(steps, sampled)) / sum(sampled)
        rows.append(
            {
                "model": r.model,
                "method": r.method,
                "lr": r.lr,
                "seed": r.seed,
                "steps": len(steps),
                "episodes": steps[-1]["episodes"],
                "train_seconds": sum(t["seconds"] for t in timings),
                "wasted_group_share": wasted,
                "episodes_to_target": episodes,
                "seconds_to_target": seconds,
            }
        )
    return pd.DataFrame(rows)


def pass_at_k(cfg: StudyConfig, at: Layout, where: Layout, runs: pd.DataFrame) -> pd.DataFrame:
    """Test pass@k, k = 1 .. group_size, of every run in `runs` (trained under `where`)."""
    from rankone.evaluate import score, scoring_engine
    from rankone.device import resolve
    from rankone.models.load import load_policy

    G = cfg.rl.group_size
    scorer = cfg.model_copy(update={"evaluate": cfg.evaluate.model_copy(update={"samples_per_prompt": G})})
    test = read_split(at.data("rl"), "test")[: cfg.evaluate.n_prompts]
    task, rows = task_of(cfg.tasks["rl"]), []
    for r in runs.itertuples():
        run = RunId("rl", r.model, r.method, r.lr, r.seed)
        seed_everything(run.seed, cfg.threads)
        model, tokenizer = load_policy(
            at.model(run.model), where.train(run) / "weights", run.method, cfg.dtype, resolve(cfg.device)
        )
        result = score(scorer, scoring_engine(scorer, model, tokenizer), task, test, run.seed)
        rows += [
            {
                "model": r.model,
                "method": r.method,
                "lr": r.lr,
                "seed": r.seed,
                "k": k,
                "pass_at_k": result[f"pass_at_{k}"],
            }
            for k in range(1, G + 1)
        ]
    return pd.DataFrame(rows)


def chosen(runs: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """The runs at each (model, method)'s best lr."""
    return runs.merge(best[["regime", "model", "method", "lr", "edge"]], on=["regime", "model", "method", "lr"])


def with_pass_at_k(runs: pd.DataFrame, table: pd.DataFrame, ks: list[int]) -> pd.DataFrame:
    """`runs` with a test_pass_at_<k> column per k in `ks`, from a pass@k table."""
    wide = table[table.k.isin(ks)].pivot_table(index=["model", "method", "lr", "seed"], columns="k", values="pass_at_k")
    wide.columns = [f"test_pass_at_{k}" for k in wide.columns]
    return runs.drop(columns=wide.columns, errors="ignore").merge(
        wide.reset_index(), on=["model", "method", "lr", "seed"]
    )


def compare_levers(cfg: StudyConfig, plain: pd.DataFrame, levers: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Each lever's runs at its best lr against plain RL's at its best lr, paired by seed, per metric.
    Gaps point the way that is better: lever minus plain, but plain minus lever for the metrics
    where lower is better (Brier score and calibration error, on tasks that state a confidence)."""
    G = cfg.rl.group_size
    metrics = {"score": "test_score", "pass_at_1": "test_pass_at_1", f"pass_at_{G}": f"test_pass_at_{G}"}
    metrics |= {metric: f"test_{metric}" for metric in LOWER_IS_BETTER if f"test_{metric}" in plain}
    margin = cfg.analysis.parity_threshold["rl"]
    out = []
    for name, runs in levers.items():
        for (model, method), mine in runs.groupby(KEYS):
            base = plain[(plain.model == model) & (plain.method == method)].set_index("seed")
            mine = mine.set_index("seed")
            for metric, column in metrics.items():
                sign = -1 if metric in LOWER_IS_BETTER else 1
                out.append(
                    {
                        "lever": name,
                        "model": model,
                        "method": method,
                        "metric": metric,
                        "lr": float(mine.lr.iloc[0]),
                        "lr_edge": mine.edge.iloc[0],
                        "plain_lr": float(base.lr.iloc[0]),
                        "plain_lr_edge": base.edge.iloc[0],
                        "test_value": float(mine[column].mean()),
                        "plain_test_value": float(base[column].mean()),
                        **compare(sign * mine[column], sign * base[column], margin, cfg.analysis.confidence),
                    }
                )
    return corrected(pd.DataFrame(out), cfg.analysis.confidence, "levers")


def calibration_curves(at: Layout, runs: pd.DataFrame, side: str) -> pd.DataFrame:
    """Per step of every run in `runs` (trained under `at`): the sampled batch's Brier score,
    calibration error, share of completions stating a confidence and task reward."""
    rows = []
    for r in runs.itertuples():
        for s in read_jsonl(at.train(RunId("rl", r.model, r.method, r.lr, r.seed)) / "metrics.jsonl"):
            rows.append(
                {
                    "lever": side,
                    "model": r.model,
                    "method": r.method,
                    "lr": r.lr,
                    "seed": r.seed,
                    "step": s["step"],
                    "episodes": s["episodes"],
                    "reward": s["reward"],
                    **{k: s[k] for k in ("brier", "ece", "confidence_stated")},
                }
            )
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)


def summarize_efficiency(runs: pd.DataFrame, side: str) -> pd.DataFrame:
    """Mean over seeds per (model, method); the target columns over the seeds that reached it."""
    g = runs.groupby(KEYS)
    table = g.agg(
        lr=("lr", "first"),
        seeds=("seed", "count"),
        steps=("steps", "mean"),
        episodes=("episodes", "mean"),
        train_seconds=("train_seconds", "mean"),
        wasted_group_share=("wasted_group_share", "mean"),
        reached_target=("episodes_to_target", lambda s: int(s.notna().sum())),
        episodes_to_target=("episodes_to_target", "mean"),
        seconds_to_target=("seconds_to_target", "mean"),
    ).reset_index()
    return table.assign(lever=side)


def run(cfg: StudyConfig, at: Layout) -> None:
    lv = cfg.levers
    plain_all = read_table(at.table("runs.csv"))
    plain_best = read_table(at.table("best_lr.csv"))
    plain_best = plain_best[plain_best.regime == "rl"]
    plain = chosen(plain_all, plain_best)
    plain = plain[plain.method.isin(lv.methods) & plain.seed.isin(lv.seeds)]
    ks = [1, cfg.rl.group_size]
    passes = [pass_at_k(cfg, at, at, plain).assign(lever="plain")]
    effs = [summarize_efficiency(efficiency(cfg, cfg, at, plain), "plain")]
    confident = cfg.tasks["rl"].confidence
    curves = [calibration_curves(at, plain, "plain")] if confident else []
    tables = {}
    for name in lv.variants:
        part = SubStudy("lever", name)
        study, where = part.study(cfg, at), part.layout(at)
        runs, _, _ = collect(study, where)
        picked = chosen(runs, best_learning_rates(runs))
        passes.append(pass_at_k(cfg, at, where, picked).assign(lever=name))
        tables[name] = with_pass_at_k(picked, passes[-1], ks)
        effs.append(summarize_efficiency(efficiency(cfg, study, where, picked), name))
        curves += [calibration_curves(where, picked, name)] if confident else []
        log.info("lever %s: %d runs at their best lr scored", name, len(picked))
    plain = with_pass_at_k(plain, passes[0], ks)
    at.write_tables(
        {
            "levers.csv": compare_levers(cfg, plain, tables),
            "levers_efficiency.csv": pd.concat(effs, ignore_index=True),
            "levers_pass_at_k.csv": pd.concat(passes, ignore_index=True),
            "levers_calibration.csv": pd.concat(
                curves or [pd.DataFrame(columns=CALIBRATION_COLUMNS)], ignore_index=True
            ),
        }
    )
