"""Rank-k truncation of FullFT updates, on hand-made matrices and tables where the answer is known."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from rankone.report import truncation_findings
from rankone.truncation import Truncator, default_ranks, gain_kept, summary, table, truncate


def rank_two(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A 6x4 matrix of rank exactly 2 with singular values 3 and 1, and its factors."""
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(6, 2, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(4, 2, generator=g, dtype=torch.float64))
    return u @ torch.diag(torch.tensor([3.0, 1.0], dtype=torch.float64)) @ v.T, u, v


def test_truncate_keeps_the_top_directions():
    delta, u, v = rank_two()
    assert torch.allclose(truncate(delta, 2), delta, atol=1e-12)
    assert torch.allclose(truncate(delta, 1), 3.0 * u[:, :1] @ v[:, :1].T, atol=1e-12)
    assert float(torch.linalg.matrix_rank(truncate(delta, 1))) == 1
    # Eckart-Young: what rank 1 leaves out is the second singular value
    assert float(torch.linalg.norm(delta - truncate(delta, 1))) == pytest.approx(1.0, abs=1e-12)


def test_default_ranks_double_up_to_the_largest_full_rank():
    assert default_ranks([(256, 128), (128, 128), (44, 128), (128,)]) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert default_ranks([(6, 4)]) == [1, 2, 4]
    assert default_ranks([(5, 3), (3,)]) == [1, 2, 3]


def test_truncator_is_exact_at_full_rank_and_leaves_vectors_whole():
    delta, _, _ = rank_two()
    base = {"w": torch.zeros(6, 4, dtype=torch.float64), "norm": torch.ones(4, dtype=torch.float64)}
    trained = {"w": delta, "norm": torch.full((4,), 1.5, dtype=torch.float64)}
    cut = Truncator(base, trained)
    assert cut.weights(4)["w"] is trained["w"]  # full rank: the trained tensor itself, no SVD round trip
    assert cut.weights(1)["norm"] is trained["norm"]
    assert torch.allclose(cut.weights(2)["w"], delta, atol=1e-12)
    assert cut.energy_kept(1) == pytest.approx(9 / 10)  # 3^2 of 3^2 + 1^2
    assert cut.energy_kept(2) == pytest.approx(1.0)


def test_gain_kept():
    assert gain_kept(0.6, 0.4, 0.8) == pytest.approx(0.5)
    assert gain_kept(0.8, 0.4, 0.8) == 1.0
    assert gain_kept(0.3, 0.4, 0.8) == pytest.approx(-0.25)  # worse than the base
    assert math.isnan(gain_kept(0.5, 0.4, 0.4))  # FullFT gained nothing: no share to speak of


def hand_table() -> pd.DataFrame:
    """Two seeds at the best lr (base 0.4, FullFT 0.8), rank 1 keeping 50% and 70%; one seed at another lr."""
    rows = []
    for lr, seed, k1 in ((1e-4, 0, 0.6), (1e-4, 1, 0.68), (3e-4, 0, 0.4)):
        for k, score, full in ((1, k1, False), (8, 0.8, True)):
            rows.append(
                {
                    "model": "m",
                    "lr": lr,
                    "seed": seed,
                    "k": k,
                    "full": full,
                    "energy_kept": 0.5 if k == 1 else 1.0,
                    "mean_reward": score,
                    "greedy_accuracy": score,
                    "base_mean_reward": 0.4,
                    "base_greedy_accuracy": 0.4,
                    "full_mean_reward": 0.8,
                    "full_greedy_accuracy": 0.8,
                }
            )
    best = pd.DataFrame([{"regime": "rl", "model": "m", "method": "fullft", "lr": 1e-4}])
    return table(rows, best)


def test_table_marks_the_best_lr_and_the_summary_pairs_seeds_there():
    df = hand_table()
    assert df.best_lr.tolist() == [True, True, True, True, False, False]
    assert df.kept_mean_reward.round(6).tolist() == [0.5, 1.0, 0.7, 1.0, 0.0, 1.0]
    s = summary(df, 0.95)
    r1 = s[(s.k == 1) & (s.metric == "mean_reward")].iloc[0]
    assert r1.seeds == 2 and r1.kept == pytest.approx(0.6)  # the other lr's 0.0 is not averaged in
    assert r1.low < 0.6 < r1.high  # two seeds: a t interval, not a point
    assert r1.gain == pytest.approx(0.4)
    full = s[(s.k == 8) & (s.metric == "mean_reward")].iloc[0]
    assert full.kept == 1.0


def test_findings_sentence_states_the_share_and_the_interval():
    (sentence,) = truncation_findings(summary(hand_table(), 0.95))
    assert "keeps 60%" in sentence and "of the gain" in sentence and "+0.400 reward" in sentence
    assert "smallest k whose interval lies at or above 90% is 8" in sentence


def test_findings_sentence_without_a_gain_says_so_instead_of_printing_nan():
    table = summary(hand_table(), 0.95)
    table[["kept", "low", "high"]] = math.nan  # FullFT gained nothing: no share of a gain to keep
    (sentence,) = truncation_findings(table)
    assert "FullFT gained nothing over the base" in sentence and "nan" not in sentence
