"""The capacity stage: how many bits each method stores as the facts table grows.

Reads the capacity sub-studies' outputs only (capacity/n<size>/: data manifests,
run.json, evaluations), the same way the analysis stage reads the main study's, and
the main study's `analysis/information.csv` for the RL runs that go on the same chart.

- `capacity.csv`: per (model, table size, method), at the method's best lr (on val):
  the table's bits, the bits stored (the table's bits minus the final total train NLL
  in bits, at least 0), the bits absorbed (drop in total train NLL from the base model,
  which also counts format the base model unlearns), the share of the table stored,
  bits stored per trainable parameter, and the test-score gap to FullFT
  (-NLL per answer token, nats, paired by seed) with its verdict under the analysis
  stage's equivalence rule. A LoRA rank **falls off** at a size when that verdict is
  `worse`: the interval over seeds lies below 0 and not inside the SFT margin (so a
  fall-off needs at least 2 seeds; the experiment's config uses 3).
- `capacity_falloff.csv`: per (model, table size): the ranks that fall off, the
  largest of them (the fall-off rank) and the smallest rank that keeps up.
- `capacity_chart.csv`: the points of the capacity chart: stored bits (SFT capacity
  runs) and the information bound (RL runs) against trainable parameters.
"""

from __future__ import annotations

import math

import pandas as pd

from rankone.analysis import MATCHES, best_learning_rates, collect, compare, interval, plateau, verdicts
from rankone.config import StudyConfig, lora_rank
from rankone.info import bits_recalled, bits_stored
from rankone.io import read_json, read_table
from rankone.paths import Layout
from rankone.substudies import SubStudy
from rankone.tasks import params_of


def size_runs(sub: StudyConfig, at: Layout) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One table size's runs, curves and best lr per (regime, model, method)."""
    runs, curves, _ = collect(sub, at)
    return runs, curves, best_learning_rates(runs)


def size_table(sub: StudyConfig, at: Layout, n_facts: int, runs: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """One table size: every (regime, method) at its best lr, with bits stored and the gap to FullFT."""
    chosen = runs.merge(
        best[["regime", "model", "method", "lr", "at_grid_edge"]], on=["regime", "model", "method", "lr"]
    )
    table = chosen.groupby(["regime", "model", "method"], as_index=False).agg(
        rank=("rank", "first"),
        lr=("lr", "first"),
        at_grid_edge=("at_grid_edge", "first"),
        trainable_parameters=("trainable_parameters", "first"),
        seeds=("seed", "count"),
        bits_absorbed=("bits_absorbed", "mean"),
        train_nll_bits_final=("train_nll_bits_final", "mean"),
        test_score=("test_score", "mean"),
        test_greedy_accuracy=("test_greedy_accuracy", "mean"),
    )
    table.insert(2, "n_facts", n_facts)
    # Every regime of a size trains on the same table (the config checks it): its first regime's data.
    table["dataset_bits"] = read_json(at.data(sub.regimes[0]) / "manifest.json")["information_bits"]
    gaps = verdicts(sub, runs, best)
    gaps = gaps[gaps.metric == "score"] if len(gaps) else gaps
    columns = [
        "regime",
        "model",
        "method",
        "gap",
        "ci_low",
        "ci_high",
        "margin",
        "verdict",
        "reason",
        "seeds_to_decide",
    ]
    return table.merge(
        gaps[columns] if len(gaps) else pd.DataFrame(columns=columns), on=["regime", "model", "method"], how="left"
    )


def capacity_table(cfg: StudyConfig, sizes: dict[int, tuple]) -> pd.DataFrame:
    table = pd.concat(
        [size_table(sub, where, n, runs, best) for n, (sub, where, runs, _, best) in sizes.items()], ignore_index=True
    )
    table["bits_stored"] = bits_stored(table.dataset_bits, table.train_nll_bits_final)
    table["share_stored"] = table.bits_stored / table.dataset_bits
    table["bits_per_parameter"] = table.bits_stored / table.trainable_parameters
    table["falls_off"] = table.verdict == "worse"  # the equivalence rule; FullFT itself has no verdict
    return table.sort_values(["regime", "model", "n_facts", "rank"], na_position="last").reset_index(drop=True)


def falloff(table: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, model, size): which LoRA ranks fall off FullFT, the largest (fall-off rank), the smallest
    that keeps up."""
    rows = []
    for (regime, model, n_facts), g in table.groupby(["regime", "model", "n_facts"]):
        lora = g[g["rank"].notna()].sort_values("rank")
        full = g[g.method == "fullft"]
        off = [int(r) for r in lora[lora.falls_off]["rank"]]
        up = [int(r) for r in lora[lora.verdict.isin(MATCHES)]["rank"]]
        rows.append(
            {
                "regime": regime,
                "model": model,
                "n_facts": n_facts,
                "dataset_bits": g.dataset_bits.iloc[0],
                "fullft_bits_stored": float(full.bits_stored.iloc[0]) if len(full) else math.nan,
                "ranks_falling_off": " ".join(map(str, off)) or "none",
                "falloff_rank": max(off) if off else math.nan,
                "smallest_rank_keeping_up": min(up) if up else math.nan,
                "ranks_inconclusive": " ".join(str(int(r)) for r in lora[lora.verdict == "inconclusive"]["rank"])
                or "none",
            }
        )
    return pd.DataFrame(rows)


def chart_points(cfg: StudyConfig, table: pd.DataFrame, at: Layout) -> pd.DataFrame:
    """SFT capacity runs (bits stored) and the study's RL runs (information bound) in one table."""
    sft = table[table.regime == "sft"].assign(
        bits=lambda d: d.bits_stored, kind="bits stored (table bits - final train NLL)"
    )
    columns = ["regime", "model", "method", "n_facts", "trainable_parameters", "bits", "kind"]
    frames = [sft[columns]]
    if "rl" in cfg.regimes:
        info = read_table(at.table("information.csv"))
        rl = info[info.regime == "rl"].assign(
            n_facts=math.nan, bits=lambda d: d.info_bound_bits, kind="RL information bound (episodes x reward entropy)"
        )
        frames.append(rl[columns])
    return pd.concat(frames, ignore_index=True)


# A curve at its ceiling has stopped rising whatever its noise: RL reward (pass rate) and SFT loss (nats).
CEILING = {"rl": lambda v: v >= 0.99, "sft": lambda v: v <= 0.01}
SIGN = {"rl": 1.0, "sft": -1.0}  # reward rises, loss falls


def mean_curve(curves: pd.DataFrame, best: pd.DataFrame, regime: str, method: str) -> pd.Series:
    """A method's curve at its best lr, mean over seeds, indexed by step."""
    lr = best[(best.regime == regime) & (best.method == method)].lr
    g = curves[(curves.regime == regime) & (curves.method == method) & (curves.lr == float(lr.iloc[0]))]
    return g.groupby("step").value.mean()


def first_reach(curve: pd.Series, level: float, sign: float, window: int) -> float:
    """The first step whose trailing mean over `window` steps reaches `level` (NaN if none does)."""
    smooth = curve.rolling(window, min_periods=1).mean()
    hit = smooth[sign * (smooth - level) >= 0]
    return float(hit.index[0]) if len(hit) else math.nan


def examples_per_step(cfg: StudyConfig, regime: str) -> int:
    """What one training step of `regime` reads: RL episodes (prompts x group) or an SFT batch."""
    return cfg.rl.prompts_per_step * cfg.rl.group_size if regime == "rl" else cfg.sft.batch_size


def recalled_bits(n_facts: int, symbols: int, recalls, confidence: float) -> tuple[float, float, float]:
    """The bits (Fano) each seed's greedy recall of a table of `n_facts` keys tells: mean and t interval."""
    return interval([bits_recalled(n_facts, symbols, a) for a in recalls], confidence)


def locked_wrong(runs: pd.DataFrame, confidence: float) -> dict:
    """How sure a method's wrong answers are, from its final weights on the test keys: `wrong` (greedy
    wrong), `locked_wrong` (no sample of `locked_samples` right, 1 - pass@k at the largest k; its t
    interval over seeds in `locked_low`/`locked_high`). A key answered wrong with certainty gets no
    policy gradient (every sample scores alike), so under RL it stays wrong; SFT's cross-entropy still
    corrects it. Empty where the evaluation kept no pass@k."""
    ks = sorted(int(c.rsplit("_", 1)[1]) for c in runs.columns if c.startswith("test_pass_at_"))
    if not ks or "test_greedy_accuracy" not in runs:
        return {}
    mean, low, high = interval(list(1 - runs[f"test_pass_at_{ks[-1]}"]), confidence)
    return {
        "wrong": float(1 - runs.test_greedy_accuracy.mean()),
        "locked_wrong": mean,
        "locked_low": max(low, 0.0),
        "locked_high": min(high, 1.0),
        "locked_samples": ks[-1],
    }


def crossover_rows(
    cfg: StudyConfig,
    sub: StudyConfig,
    n_facts: int,
    runs: pd.DataFrame,
    curves: pd.DataFrame,
    best: pd.DataFrame,
    lr_from: str | None = None,
) -> list[dict]:
    """One table size, per (regime, model, method) at its lr: bits recalled (greedy recall of the whole table,
    Fano) with its interval over seeds, its curve's late slope (`rise`, analysis.plateau: the score another
    window of steps would add), FullFT's plateau test, episodes to 50% and 90% of FullFT's gain, and the
    equivalence verdict on table recall against FullFT (paired by seed, margin analysis.greedy_margin; judged
    only where FullFT reached its plateau). `lr_from` says where the lrs came from (default: the capacity
    section's learning_rates)."""
    params = params_of(sub.tasks[sub.regimes[0]])  # one table in every regime (the config checks it)
    symbols = params.alphabet**params.digits
    tests = plateau(sub, curves, best, regimes=sub.regimes).set_index(["regime", "model", "method"])
    chosen = runs.merge(best[["regime", "model", "method", "lr", "at_grid_edge"]])
    rows = []
    for (regime, model), group in chosen.groupby(["regime", "model"]):
        full_recall = group[group.method == "fullft"].set_index("seed")["table_greedy"]
        per_step = examples_per_step(sub, regime)
        # Each method's plateau test (analysis.plateau), where it has one: FullFT's goal and every slope.
        tested = {m: tests.loc[(regime, model, m)] for m in group.method.unique() if (regime, model, m) in tests.index}
        full_test = tested.get("fullft")
        sign, steps = SIGN[regime], sub.rl.steps if regime == "rl" else sub.sft.steps
        full_curve = mean_curve(curves, best, regime, "fullft") if full_test is not None else None
        start = float(full_curve.iloc[0]) if full_curve is not None else math.nan
        window = max(1, round(steps * 0.05))
        for method, g in group.groupby("method"):
            # Greedy recall of the whole table at the checkpoints the primary score reads (tail or final).
            mean, low, high = recalled_bits(
                n_facts, symbols, g.sort_values("seed").table_greedy, cfg.analysis.confidence
            )
            table_bits = n_facts * math.log2(symbols)
            row = {
                "regime": regime,
                "model": model,
                "n_facts": n_facts,
                "table_bits": table_bits,
                "method": method,
                "rank": lora_rank(method),
                "lr": float(g.lr.iloc[0]),
                "lr_at_grid_edge": g.at_grid_edge.iloc[0],
                "lr_from": lr_from
                or ("select on the study's runs" if cfg.capacity.learning_rates == "chosen" else "this size"),
                "seeds": len(g),
                "episodes": steps * per_step,
                "table_recall": float(g.table_greedy.mean()),
                "bits_recalled": mean,
                "bits_recalled_low": low,
                "bits_recalled_high": high,
                "bits_stored": float(bits_stored(table_bits, g.train_nll_bits_final).mean()),
                "info_bound_bits": float(g.info_bound_bits.mean()) if regime == "rl" else math.nan,
                **locked_wrong(g, cfg.analysis.confidence),
            }
            own = tested.get(method)
            if own is not None:  # still improving at the last step? (analysis.plateau's slope, per method)
                row.update(
                    rise=float(own.rise),
                    rise_ci_low=float(own.rise_ci_low),
                    rise_ci_high=float(own.rise_ci_high),
                    rise_window=int(own.window),
                )
            if full_test is not None:
                goal = float(full_test.reward_last)
                mine = mean_curve(curves, best, regime, method)
                for share in (0.5, 0.9):
                    step = first_reach(mine, start + share * (goal - start), sign, window)
                    episodes = (step + 1) * per_step if math.isfinite(step) else math.nan
                    row[f"episodes_to_{round(share * 100)}"] = episodes
                row["fullft_plateau"] = bool(full_test.plateau or CEILING[regime](goal))
            else:
                row.update(episodes_to_50=math.nan, episodes_to_90=math.nan, fullft_plateau=False)
            if method != "fullft" and len(full_recall):
                v = compare(
                    g.set_index("seed")["table_greedy"],
                    full_recall,
                    cfg.analysis.greedy_margin,
                    cfg.analysis.confidence,
                )
                row.update(
                    gap=v["gap"],
                    ci_low=v["ci_low"],
                    ci_high=v["ci_high"],
                    margin=v["margin"],
                    verdict=v["verdict"] if row["fullft_plateau"] else "not judged (FullFT not at a plateau)",
                )
            rows.append(row)
    return rows


LEARNED_RECALL, OVER_RANK1 = 0.9, 2.0  # issue #40's precondition on FullFT under RL, per table size
NOT_LEARNED = "not judged (FullFT did not learn it)"


def rl_precondition(cross: pd.DataFrame) -> pd.DataFrame:
    """The crossover's precondition: an RL size is judged only where FullFT under RL recalled at least
    LEARNED_RECALL of the table's keys (greedy recall) or OVER_RANK1 x rank 1's SFT capacity in bits
    (Fano), whichever is easier (a size FullFT could not learn by RL cannot tell whether rank 1
    saturates). Rank 1's SFT capacity is the most bits rank 1 recalled by SFT at any size of the same
    study (`rank1_sft_bits`; without an SFT rank 1, the recall bar alone). Adds `rl_bar_bits` and
    `fullft_learned` to the RL rows; their LoRA verdicts read NOT_LEARNED where FullFT missed both."""
    if not len(cross) or "rl" not in set(cross.regime):
        return cross
    sft_rank1 = cross[(cross.regime == "sft") & (cross["rank"] == 1)]
    capacity = sft_rank1.groupby("model").bits_recalled.max()
    cross = cross.copy()
    rl = cross.regime == "rl"
    cross["rank1_sft_bits"] = cross.model.map(capacity)
    cross["rl_bar_bits"] = (OVER_RANK1 * cross.rank1_sft_bits).where(rl)
    full = cross[rl & (cross.method == "fullft")].set_index(["model", "n_facts"])
    size = pd.Series(list(zip(cross.model, cross.n_facts)), index=cross.index)
    by_recall = size.map(full.table_recall) >= LEARNED_RECALL
    by_bits = size.map(full.bits_recalled) >= cross.rl_bar_bits  # False where there is no SFT rank 1
    cross["fullft_learned"] = (by_recall | by_bits).where(rl)
    cross.loc[rl & cross["rank"].notna() & cross.fullft_learned.eq(False), "verdict"] = NOT_LEARNED
    return cross


def run(cfg: StudyConfig, at: Layout) -> None:
    sizes = {}
    for n in cfg.capacity.n_facts:
        part = SubStudy("capacity", str(n))
        sub, where = part.study(cfg, at), part.layout(at)
        sizes[n] = (sub, where, *size_runs(sub, where))
    table = capacity_table(cfg, sizes)
    cross = rl_precondition(
        pd.DataFrame(
            [
                row
                for n, (sub, _, runs, curves, best) in sizes.items()
                for row in crossover_rows(cfg, sub, n, runs, curves, best)
            ]
        )
    )
    outputs = {
        "capacity.csv": table,
        "capacity_falloff.csv": falloff(table),
        "capacity_chart.csv": chart_points(cfg, table, at),
        "crossover.csv": cross.sort_values(["regime", "model", "n_facts", "rank"], na_position="last"),
    }
    at.write_tables(outputs)
