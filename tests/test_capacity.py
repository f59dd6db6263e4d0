"""The capacity experiment: sub-studies per table size, and where LoRA falls off FullFT."""

import math

import pandas as pd
import pytest

from rankone import data
from rankone.capacity import falloff
from rankone.info import bits_stored
from rankone.config import validate
from rankone.paths import Layout
from tests.conftest import smoke_dict


def test_each_table_size_holds_exactly_its_bits(tmp_path):
    cfg = validate(smoke_dict(results_dir=str(tmp_path)))
    at = Layout(cfg)
    for n in cfg.capacity.n_facts:
        manifest = data.build(cfg.capacity_study(n), "sft", at.capacity(n).data("sft"))
        digits = cfg.tasks["sft"].params["digits"]
        assert manifest["splits"]["train"]["rows"] == n
        assert manifest["information_bits"] == n * digits * math.log2(10)
        assert (tmp_path / cfg.experiment / "capacity" / f"n{n}" / "data" / "sft" / "train.parquet").is_file()


def test_bits_stored_is_the_table_minus_what_is_still_uncertain():
    table_bits = 100 * 4 * math.log2(10)  # 100 facts of 4 random digits
    stored = bits_stored(pd.Series([table_bits] * 4), pd.Series([0.0, table_bits, table_bits / 4, 2 * table_bits]))
    # memorised / uniform over digits / a quarter left / worse than uniform
    assert stored.tolist() == pytest.approx([table_bits, 0.0, 0.75 * table_bits, 0.0])


def table(rows):
    columns = ["model", "n_facts", "method", "rank", "dataset_bits", "bits_stored", "gap", "verdict"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.assign(falls_off=frame.verdict == "worse")


def test_falloff_rank_is_the_largest_rank_behind_fullft():
    t = table([
        # small table: every rank keeps up
        ("m", 100, "fullft", math.nan, 1000.0, 900.0, math.nan, math.nan),
        ("m", 100, "lora-r1", 1, 1000.0, 880.0, -0.02, "parity"),
        ("m", 100, "lora-r4", 4, 1000.0, 890.0, 0.0, "parity"),
        # large table: ranks 1 and 4 fall off, 16 keeps up, 64 is inconclusive
        ("m", 400, "fullft", math.nan, 4000.0, 3000.0, math.nan, math.nan),
        ("m", 400, "lora-r1", 1, 4000.0, 900.0, -0.5, "worse"),
        ("m", 400, "lora-r4", 4, 4000.0, 2000.0, -0.2, "worse"),
        ("m", 400, "lora-r16", 16, 4000.0, 2950.0, -0.01, "parity"),
        ("m", 400, "lora-r64", 64, 4000.0, 2990.0, -0.01, "inconclusive"),
    ])
    out = falloff(t).set_index("n_facts")
    assert out.loc[100, "ranks_falling_off"] == "none"
    assert math.isnan(out.loc[100, "falloff_rank"]) and out.loc[100, "smallest_rank_keeping_up"] == 1
    assert out.loc[400, "ranks_falling_off"] == "1 4"
    assert out.loc[400, "falloff_rank"] == 4 and out.loc[400, "smallest_rank_keeping_up"] == 16
    assert out.loc[400, "fullft_bits_stored"] == 3000.0
    assert out.loc[400, "ranks_inconclusive"] == "64"  # neither falls off nor keeps up


def test_no_rank_keeps_up_when_all_fall_off():
    t = table([
        ("m", 100, "fullft", math.nan, 1000.0, 900.0, math.nan, math.nan),
        ("m", 100, "lora-r1", 1, 1000.0, 100.0, -0.9, "worse"),
    ])
    row = falloff(t).iloc[0]
    assert row.ranks_falling_off == "1" and row.falloff_rank == 1
    assert math.isnan(row.smallest_rank_keeping_up)
