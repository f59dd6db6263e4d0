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

from rankone.analysis import best_learning_rates, collect, verdicts
from rankone.config import StudyConfig
from rankone.info import bits_stored
from rankone.io import atomic_path, read_json
from rankone.paths import Layout

def size_table(sub: StudyConfig, at: Layout, n_facts: int) -> pd.DataFrame:
    """One table size: every method at its best lr, with bits stored and the gap to FullFT."""
    runs, _, _ = collect(sub, at)
    best = best_learning_rates(runs)
    chosen = runs.merge(best[["regime", "model", "method", "lr", "at_grid_edge"]],
                        on=["regime", "model", "method", "lr"])
    table = chosen.groupby(["model", "method"], as_index=False).agg(
        rank=("rank", "first"), lr=("lr", "first"), at_grid_edge=("at_grid_edge", "first"),
        trainable_parameters=("trainable_parameters", "first"), seeds=("seed", "count"),
        bits_absorbed=("bits_absorbed", "mean"), train_nll_bits_final=("train_nll_bits_final", "mean"),
        test_score=("test_score", "mean"),
        test_greedy_accuracy=("test_greedy_accuracy", "mean"),
    )
    table.insert(1, "n_facts", n_facts)
    table["dataset_bits"] = read_json(at.data("sft") / "manifest.json")["information_bits"]
    gaps = verdicts(sub, runs, best)
    gaps = gaps[gaps.metric == "score"] if len(gaps) else gaps
    columns = ["model", "method", "gap", "ci_low", "ci_high", "margin", "verdict", "reason", "seeds_to_decide"]
    return table.merge(gaps[columns] if len(gaps) else pd.DataFrame(columns=columns), on=["model", "method"],
                       how="left")


def capacity_table(cfg: StudyConfig, at: Layout) -> pd.DataFrame:
    table = pd.concat([size_table(cfg.capacity_study(n), at.capacity(n), n) for n in cfg.capacity.n_facts],
                      ignore_index=True)
    table["bits_stored"] = bits_stored(table.dataset_bits, table.train_nll_bits_final)
    table["share_stored"] = table.bits_stored / table.dataset_bits
    table["bits_per_parameter"] = table.bits_stored / table.trainable_parameters
    table["falls_off"] = table.verdict == "worse"  # the equivalence rule; FullFT itself has no verdict
    return table.sort_values(["model", "n_facts", "rank"], na_position="last").reset_index(drop=True)


def falloff(table: pd.DataFrame) -> pd.DataFrame:
    """Per (model, size): which LoRA ranks fall off FullFT, the largest (fall-off rank), the smallest that keeps up."""
    rows = []
    for (model, n_facts), g in table.groupby(["model", "n_facts"]):
        lora = g[g["rank"].notna()].sort_values("rank")
        full = g[g.method == "fullft"]
        off = [int(r) for r in lora[lora.falls_off]["rank"]]
        up = [int(r) for r in lora[lora.verdict.isin(["parity", "better"])]["rank"]]
        rows.append({
            "model": model, "n_facts": n_facts, "dataset_bits": g.dataset_bits.iloc[0],
            "fullft_bits_stored": float(full.bits_stored.iloc[0]) if len(full) else math.nan,
            "ranks_falling_off": " ".join(map(str, off)) or "none",
            "falloff_rank": max(off) if off else math.nan,
            "smallest_rank_keeping_up": min(up) if up else math.nan,
            "ranks_inconclusive": " ".join(str(int(r)) for r in lora[lora.verdict == "inconclusive"]["rank"]) or "none",
        })
    return pd.DataFrame(rows)


def chart_points(cfg: StudyConfig, table: pd.DataFrame, at: Layout) -> pd.DataFrame:
    """SFT capacity runs (bits stored) and the study's RL runs (information bound) in one table."""
    sft = table.assign(regime="sft", bits=table.bits_stored, kind="bits stored (table bits - final train NLL)")
    columns = ["regime", "model", "method", "n_facts", "trainable_parameters", "bits", "kind"]
    frames = [sft[columns]]
    if "rl" in cfg.regimes:
        info = pd.read_csv(at.analysis / "information.csv")
        rl = info[info.regime == "rl"].assign(n_facts=math.nan, bits=lambda d: d.info_bound_bits,
                                              kind="RL information bound (episodes x reward entropy)")
        frames.append(rl[columns])
    return pd.concat(frames, ignore_index=True)


def run(cfg: StudyConfig, at: Layout) -> None:
    table = capacity_table(cfg, at)
    outputs = {
        "capacity.csv": table,
        "capacity_falloff.csv": falloff(table),
        "capacity_chart.csv": chart_points(cfg, table, at),
    }
    at.analysis.mkdir(parents=True, exist_ok=True)
    for name, frame in outputs.items():
        with atomic_path(at.analysis / name) as tmp:
            frame.to_csv(tmp, index=False)
