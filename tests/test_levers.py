"""The levers analysis on hand-made tables where the answer is known."""

import math

import pandas as pd
import pytest

from rankone.config import validate
from rankone.levers import compare_levers, summarize_efficiency, to_target, with_pass_at_k
from tests.conftest import smoke_dict


def test_target_is_the_first_window_whose_mean_reaches_it():
    rewards = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    seconds = [1.0] * 6
    episodes = [16, 32, 48, 64, 80, 96]
    assert to_target(rewards, seconds, episodes, 0.5, 2) == (64.0, 4.0)  # mean(0.4, 0.6) = 0.5
    assert to_target(rewards, seconds, episodes, 0.7, 3) == (96.0, 6.0)  # 3-step means: 0.2, 0.4, 0.6, 0.8
    assert all(math.isnan(v) for v in to_target(rewards, seconds, episodes, 0.95, 2))  # never


def runs(gaps: dict[int, float], base: float = 0.5, **columns) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": "m",
                "method": "fullft",
                "lr": 1e-3,
                "seed": s,
                "edge": "",
                "test_score": base + g,
                "test_pass_at_1": base + g,
                "test_pass_at_4": 0.9 + g / 2,
                **columns,
            }
            for s, g in gaps.items()
        ]
    )


def test_each_lever_is_paired_by_seed_with_plain_and_judged_by_the_equivalence_rule():
    cfg = validate(smoke_dict(rl={"group_size": 4}))
    plain = runs({0: 0.0, 1: 0.0, 2: 0.0})
    table = compare_levers(
        cfg,
        plain,
        {
            "same": runs({0: 0.001, 1: -0.001, 2: 0.0}),
            "worse": runs({0: -0.30, 1: -0.31, 2: -0.29}),
            "noisy": runs({0: -0.3, 1: 0.3, 2: 0.0}),
        },
    ).set_index(["lever", "metric"])
    assert list(table.loc["same"].index) == ["score", "pass_at_1", "pass_at_4"]
    assert table.loc[("same", "score"), "verdict"] == "parity"
    assert table.loc[("worse", "score"), "verdict"] == "worse"
    assert abs(table.loc[("worse", "score"), "gap"] + 0.30) < 1e-12
    assert table.loc[("worse", "pass_at_4"), "verdict"] == "worse"
    assert abs(table.loc[("worse", "pass_at_4"), "gap"] + 0.15) < 1e-12
    assert table.loc[("noisy", "score"), "verdict"] == "inconclusive"
    # Only the seeds both sides ran are paired.
    short = compare_levers(cfg, plain, {"two": runs({1: 0.1, 2: 0.1, 5: -1.0})})
    assert set(short.seeds) == {2} and abs(short.gap.iloc[0] - 0.1) < 1e-12


def test_lower_brier_and_calibration_error_count_as_better():
    cfg = validate(smoke_dict(rl={"group_size": 4}))
    plain = runs({0: 0.0, 1: 0.0, 2: 0.0}, test_brier=0.30, test_ece=0.20)
    lever = runs({0: 0.0, 1: 0.0, 2: 0.0}, test_brier=0.10, test_ece=0.40)
    lever["test_brier"] += [0.0, 0.01, -0.01]
    lever["test_ece"] += [0.0, 0.01, -0.01]
    table = compare_levers(cfg, plain, {"cal": lever}).set_index("metric")
    assert table.loc["brier", "verdict"] == "better" and abs(table.loc["brier", "gap"] - 0.2) < 1e-9
    assert table.loc["brier", "test_value"] == pytest.approx(0.1)  # values as measured, gaps point to better
    assert table.loc["ece", "verdict"] == "worse" and abs(table.loc["ece", "gap"] + 0.2) < 1e-9


def test_pass_at_k_columns_come_from_the_stages_own_table():
    table = pd.DataFrame(
        [
            {"model": "m", "method": "fullft", "lr": 1e-3, "seed": s, "k": k, "pass_at_k": s + k / 10}
            for s in (0, 1)
            for k in (1, 2, 4)
        ]
    )
    out = with_pass_at_k(runs({0: 0.0, 1: 0.0}), table, [1, 4]).set_index("seed")
    assert out.loc[1, "test_pass_at_1"] == 1.1 and out.loc[0, "test_pass_at_4"] == 0.4
    assert "test_pass_at_2" not in out


def test_efficiency_counts_the_seeds_that_reached_the_target():
    per_run = pd.DataFrame(
        [
            {
                "model": "m",
                "method": "fullft",
                "lr": 1e-3,
                "seed": 0,
                "steps": 10,
                "episodes": 160,
                "train_seconds": 2.0,
                "wasted_group_share": 0.5,
                "episodes_to_target": 64.0,
                "seconds_to_target": 1.0,
            },
            {
                "model": "m",
                "method": "fullft",
                "lr": 1e-3,
                "seed": 1,
                "steps": 8,
                "episodes": 160,
                "train_seconds": 4.0,
                "wasted_group_share": 0.0,
                "episodes_to_target": math.nan,
                "seconds_to_target": math.nan,
            },
        ]
    )
    row = summarize_efficiency(per_run, "filter").iloc[0]
    assert (row.lever, row.seeds, row.reached_target) == ("filter", 2, 1)
    assert row.episodes_to_target == 64.0 and row.steps == 9.0 and row.wasted_group_share == 0.25
