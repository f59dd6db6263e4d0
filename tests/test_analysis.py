"""The decisions analysis makes, on small tables with known answers."""

import math

import pandas as pd
import pytest

from rankone.analysis import best_learning_rates, interval, verdict


def runs(rows):
    return pd.DataFrame(rows, columns=["regime", "model", "method", "lr", "seed", "status", "val_score"])


def test_best_lr_is_chosen_on_val_and_never_a_diverged_run():
    table = runs([
        ("rl", "m", "fullft", 1e-4, 0, "completed", 0.2), ("rl", "m", "fullft", 1e-4, 1, "completed", 0.3),
        ("rl", "m", "fullft", 1e-3, 0, "completed", 0.6), ("rl", "m", "fullft", 1e-3, 1, "completed", 0.5),
        ("rl", "m", "fullft", 1e-2, 0, "diverged", math.nan), ("rl", "m", "fullft", 1e-2, 1, "completed", 0.9),
    ])
    best = best_learning_rates(table)
    assert best.lr.tolist() == [1e-3]  # 1e-2 averages -inf with its diverged seed
    assert best.diverged.tolist() == [0]
    assert best.at_grid_edge.tolist() == [False]


def test_best_lr_at_the_grid_edge_is_flagged():
    table = runs([("sft", "m", "lora-r1", lr, 0, "completed", -lr) for lr in (1e-3, 1e-2, 1e-1)])
    assert best_learning_rates(table).at_grid_edge.tolist() == [True]


def test_interval_and_verdicts():
    mean, low, high = interval([0.1, 0.1, 0.1], 0.95)
    assert (mean, low, high) == pytest.approx((0.1, 0.1, 0.1))
    mean, low, high = interval([-0.2, -0.3], 0.95)
    assert low < mean < high and mean == pytest.approx(-0.25)
    assert verdict(0.01, -0.5, 0.5, threshold=0.05) == "parity"
    assert verdict(-0.3, -0.4, -0.2, threshold=0.05) == "worse"
    assert verdict(0.3, 0.2, 0.4, threshold=0.05) == "better"
    assert verdict(-0.3, -0.9, 0.3, threshold=0.05) == "inconclusive"
    assert verdict(math.nan, math.nan, math.nan, threshold=0.05) == "diverged"


def test_layer_findings_state_how_each_result_compares_with_the_original():
    from rankone.report import layer_findings

    def row(scope, verdict, gap):
        return {"regime": "rl", "model": "m", "rank": 1, "scope": scope, "verdict": verdict,
                "gap_to_all_linear": gap, "ci_low": gap - 0.1, "ci_high": gap + 0.1}

    lines = layer_findings(pd.DataFrame([
        row("attention", "worse", -0.2), row("mlp", "parity", 0.0), row("attention", "inconclusive", -0.1),
    ]).assign(rank=[1, 1, 16]))
    assert "agrees with the original finding (attention-only underperforms)" in lines[0]
    assert "agrees with the original finding (MLP-only matches all layers)" in lines[1]
    assert "neither confirms nor contradicts" in lines[2] and "below all-linear" in lines[2]
    assert "differs from" in layer_findings(pd.DataFrame([row("attention", "parity", 0.01)]))[0]
