"""Update-structure measures on planted deltas with known answers."""

import torch

from rankone.updates import changed_shares, effective_rank, jaccard, matrix_stats


def test_planted_rank_two_delta_reads_rank_two():
    gen = torch.Generator().manual_seed(0)
    u, v = torch.randn(64, 2, generator=gen), torch.randn(2, 48, generator=gen)
    stats = matrix_stats(u @ v)
    assert stats["rank"] == 2 and stats["full_rank"] == 48
    assert 1.0 < stats["effective_rank"] <= 2.0 + 1e-6


def test_planted_ten_percent_sparse_delta_reads_ten_percent():
    gen = torch.Generator().manual_seed(1)
    before = torch.randn(100, 100, generator=gen)
    mask = torch.zeros(10_000, dtype=torch.bool)
    mask[torch.randperm(10_000, generator=gen)[:1000]] = True
    after = before + mask.view(100, 100) * 0.5
    shares = changed_shares(before, after)
    assert shares["exact"] == shares["atol"] == shares["bf16"] == 0.1


def test_bf16_hides_small_updates_that_fp32_sees():
    before = torch.ones(1000)
    after = before + 1e-4  # well under bf16's resolution at 1.0 (2**-7)
    shares = changed_shares(before, after)
    assert shares["exact"] == 1.0 and shares["atol"] == 1.0 and shares["bf16"] == 0.0
    tiny = changed_shares(before, before + 1e-6)
    assert tiny["exact"] == 1.0 and tiny["atol"] == 0.0


def test_effective_rank_of_identity_and_jaccard_chance():
    assert abs(effective_rank(torch.eye(8)) - 8.0) < 1e-4
    a = torch.zeros(1000, dtype=torch.bool)
    b = torch.zeros(1000, dtype=torch.bool)
    a[:100], b[50:150] = True, True
    observed, chance = jaccard(a, b)
    assert abs(observed - 50 / 150) < 1e-9
    assert abs(chance - (0.1 * 0.1) / (0.2 - 0.01)) < 1e-9
