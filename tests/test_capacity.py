"""The capacity experiment: sub-studies per table size, and where LoRA falls off FullFT."""

import math

import pandas as pd
import pytest

from rankone import data
from rankone.capacity import crossover_rows, falloff
from rankone.config import ConfigError, validate
from rankone.info import bits_recalled, bits_stored
from rankone.paths import Layout
from rankone.report import crossover_sentence
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
    return frame.assign(regime="sft", falls_off=frame.verdict == "worse")


def test_falloff_rank_is_the_largest_rank_behind_fullft():
    t = table(
        [
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
        ]
    )
    out = falloff(t).set_index("n_facts")
    assert out.loc[100, "ranks_falling_off"] == "none"
    assert math.isnan(out.loc[100, "falloff_rank"]) and out.loc[100, "smallest_rank_keeping_up"] == 1
    assert out.loc[400, "ranks_falling_off"] == "1 4"
    assert out.loc[400, "falloff_rank"] == 4 and out.loc[400, "smallest_rank_keeping_up"] == 16
    assert out.loc[400, "fullft_bits_stored"] == 3000.0
    assert out.loc[400, "ranks_inconclusive"] == "64"  # neither falls off nor keeps up


def test_no_rank_keeps_up_when_all_fall_off():
    t = table(
        [
            ("m", 100, "fullft", math.nan, 1000.0, 900.0, math.nan, math.nan),
            ("m", 100, "lora-r1", 1, 1000.0, 100.0, -0.9, "worse"),
        ]
    )
    row = falloff(t).iloc[0]
    assert row.ranks_falling_off == "1" and row.falloff_rank == 1
    assert math.isnan(row.smallest_rank_keeping_up)


CROSSOVER = {  # RL and SFT on one binary table per size, the lrs from the study's select stage
    "tasks": {
        g: {"name": "facts", "params": {"n_facts": 64, "digits": 1, "alphabet": 2, "n_val": 16, "n_test": 16}}
        for g in ("rl", "sft")
    },
    "methods": ["fullft", "lora-r1"],
    "truncation": None,
    "levers": None,
    "confirmation": None,
    "capacity": {
        "n_facts": [64, 256],
        "regimes": ["rl", "sft"],
        "methods": ["fullft", "lora-r1"],
        "seeds": [0, 1, 2],
        "probes": 16,
        "passes": {"rl": 8, "sft": 4},
        "learning_rates": "chosen",
    },
}


def test_a_crossover_size_trains_both_regimes_on_one_table_for_the_same_passes(tmp_path):
    cfg = validate(smoke_dict(results_dir=str(tmp_path), **CROSSOVER))
    sub = cfg.capacity_study(256, {(g, m, x): 0.01 for g in ("rl", "sft") for m in cfg.models for x in cfg.methods})
    assert sub.regimes == ["rl", "sft"] and sub.seeds == [0, 1, 2]
    assert sub.rl.steps == 8 * 256 // cfg.rl.prompts_per_step and sub.sft.steps == 4 * 256 // cfg.sft.batch_size
    assert {r.lr for r in sub.runs()} == {0.01} and len(sub.runs()) == 2 * 2 * 2 * 3
    at = Layout(cfg).capacity(256)
    tables = [data.build(sub, g, at.data(g)) and pd.read_parquet(at.data(g) / "train.parquet") for g in ("rl", "sft")]
    assert len(tables[0]) == 256 and tables[0].equals(tables[1])  # the same keys and values in both regimes
    with pytest.raises(ConfigError, match="select stage"):  # before select has chosen, no runs to list
        cfg.capacity_study(64).runs()


def test_a_crossover_needs_the_same_facts_task_in_both_regimes(tmp_path):
    two_digits = {"name": "facts", "params": {"n_facts": 64, "digits": 2, "n_val": 16, "n_test": 16}}
    bad = {**CROSSOVER, "tasks": {**CROSSOVER["tasks"], "rl": two_digits}}
    with pytest.raises(ConfigError, match="tasks.rl to be the facts task"):
        validate(smoke_dict(results_dir=str(tmp_path), **bad))
    other = {**CROSSOVER["capacity"], "methods": ["fullft", "lora-r4"]}
    with pytest.raises(ConfigError, match=r"capacity.methods \['lora-r4'\]"):
        validate(smoke_dict(results_dir=str(tmp_path), **{**CROSSOVER, "capacity": other}))


def test_crossover_rows_judge_recall_only_where_fullft_reached_its_plateau(tmp_path):
    cfg = validate(smoke_dict(results_dir=str(tmp_path), **CROSSOVER))
    sub = cfg.capacity_study(64, {(g, m, x): 0.01 for g in ("rl", "sft") for m in cfg.models for x in cfg.methods})
    steps = sub.rl.steps  # RL: FullFT rises to 0.9 by half-way and stays (with seed noise); rank 1 to 0.7, late
    recall = {"fullft": [1.0, 0.97, 1.0], "lora-r1": [0.6, 0.55, 0.62]}
    runs = pd.DataFrame(
        [
            {
                "regime": "rl",
                "model": "m",
                "method": x,
                "rank": None if x == "fullft" else 1,
                "lr": 0.01,
                "seed": s,
                "table_greedy": recall[x][s],
                "test_score": recall[x][s],
                "train_nll_bits_final": 0.0,
                "info_bound_bits": 100.0,
                "at_grid_edge": False,
            }
            for x in recall
            for s in range(3)
        ]
    )
    best = (
        runs.groupby(["regime", "model", "method"], as_index=False)
        .agg(lr=("lr", "first"))
        .assign(at_grid_edge=False, edge="")
    )

    def curve(top, half):
        return [0.5 + (top - 0.5) * min(1.0, t / half) for t in range(steps)]

    shapes = {"fullft": curve(0.9, steps // 2), "lora-r1": curve(0.7, steps)}
    curves = pd.DataFrame(
        [
            {
                "regime": "rl",
                "model": "m",
                "method": x,
                "lr": 0.01,
                "seed": s,
                "step": t,
                "value": v + 0.01 * ((s + t) % 3 - 1),
            }
            for x in shapes
            for s in range(3)
            for t, v in enumerate(shapes[x])
        ]
    )
    rows = {r["method"]: r for r in crossover_rows(cfg, sub, 64, runs, curves, best)}
    r1, full = rows["lora-r1"], rows["fullft"]
    assert full["fullft_plateau"] and r1["verdict"] == "worse"  # recall 0.59 against 0.99
    per_step = sub.rl.prompts_per_step * sub.rl.group_size
    assert full["episodes_to_50"] < full["episodes_to_90"] <= (steps // 2 + 2) * per_step
    assert math.isnan(r1["episodes_to_90"])  # rank 1 never covers 90% of FullFT's gain
    assert r1["bits_recalled"] == pytest.approx(sum(bits_recalled(64, 2, a) for a in recall["lora-r1"]) / 3)
    # FullFT still rising at the end, by 0.08 reward a fifth of the run (past the margin): nothing judged
    rising = 0.5 + 0.4 * curves.step / steps + 0.01 * ((curves.seed + curves.step) % 3 - 1)
    still = curves.assign(value=curves.value.where(curves.method != "fullft", rising))
    rows = {r["method"]: r for r in crossover_rows(cfg, sub, 64, runs, still, best)}
    assert not rows["fullft"]["fullft_plateau"] and rows["lora-r1"]["verdict"].startswith("not judged")


def test_the_crossover_sentence_says_whether_rank_1_saturates_alike():
    def rows(rl, sft):
        return pd.DataFrame(
            [
                {
                    "regime": g,
                    "method": "lora-r1",
                    "n_facts": n,
                    "bits_recalled": b,
                    "bits_recalled_low": b - 10,
                    "bits_recalled_high": b + 10,
                    "verdict": v,
                }
                for g, cells in (("rl", rl), ("sft", sft))
                for n, b, v in cells
            ]
        )

    alike = crossover_sentence(
        rows([(64, 60, "parity"), (256, 100, "worse")], [(64, 62, "parity"), (256, 105, "worse")])
    )
    assert "cannot tell its RL and SFT capacities apart" in alike and "falls off FullFT from 256 keys" in alike
    apart_rows = rows([(64, 30, "worse"), (256, 20, "worse")], [(64, 60, "parity"), (256, 200, "worse")])
    apart = crossover_sentence(apart_rows)
    assert "saturates at fewer bits under RL than under SFT" in apart and "never carried" not in apart
    weak = rows([(64, 30, "parity"), (256, 20, "parity")], [(64, 60, "parity"), (256, 200, "worse")])
    weak = pd.concat(
        [
            weak,
            weak[weak.regime == "rl"].assign(
                method="fullft", bits_recalled=50, bits_recalled_low=40, bits_recalled_high=60
            ),
        ]
    )
    single = rows([(64, 30, "parity")], [(64, 60, "parity")]).assign(
        bits_recalled_low=math.nan, bits_recalled_high=math.nan
    )
    assert "nan" not in crossover_sentence(single) and "one seed gives no interval" in crossover_sentence(single)
    low_fullft = apart_rows[apart_rows.regime == "rl"].assign(method="fullft", bits_recalled=50, bits_recalled_low=40)
    fell = crossover_sentence(pd.concat([apart_rows, low_fullft.assign(bits_recalled_high=60)]))
    assert "rank 1 still falls off it there" in fell and "cannot show where" not in fell
    said = crossover_sentence(weak)
    assert "FullFT itself recalls at most 50 bits" in said  # RL never reached 200 bits
    assert "a limit of RL at these sizes, not yet of rank 1" in said and "saturates at fewer" not in said


def test_the_mechanism_sentence_compares_bits_per_episode_and_per_example():
    """Issue #40 point 4: FullFT's bits per RL episode, per SFT example of 1 bit and per SFT example of
    several bits, with intervals, and whether RL stores at most about a bit an episode while a richer SFT
    example stores more, whichever way the numbers fall; 1-bit rows alone make the crossover sentence."""
    from rankone.report import mechanism_sentence

    def row(regime, bits, n, episodes, stored):
        return dict(
            regime=regime,
            method="fullft",
            bits_a_key=bits,
            n_facts=n,
            episodes=episodes,
            bits_recalled=stored,
            bits_recalled_low=stored * 0.9,
            bits_recalled_high=stored * 1.1,
            fullft_learned=True,
            info_bound_bits=1e4,
        )

    rows = [row("rl", 1, 512, 131072, 290), row("sft", 1, 256, 12800, 256), row("sft", 8, 128, 6400, 880)]
    said = mechanism_sentence(pd.DataFrame(rows))
    assert "0.0022 [0.0020, 0.0024] bits per RL episode" in said and "0.1375" in said
    assert "as the information argument says" in said
    flat = mechanism_sentence(pd.DataFrame(rows[:2] + [row("sft", 8, 128, 6400, 128)]))
    assert "did not store more" in flat and "as the information argument says" not in flat
    assert mechanism_sentence(pd.DataFrame(rows[:2])) is None  # no multi-bit arm: nothing to state
    r1 = [dict(r, method="lora-r1", verdict="parity") for r in rows]
    sentence = crossover_sentence(pd.DataFrame(rows + r1))
    assert "880" not in sentence  # the 8-bit table is the mechanism's arm, not a crossover size


def test_an_rl_size_is_judged_only_where_fullft_learned_enough_of_it():
    """Issue #40's precondition: FullFT under RL must recall 90% of the table's keys or twice rank 1's
    SFT capacity in bits (the most rank 1 recalled by SFT at any size), whichever is easier; otherwise
    that size's RL verdicts read "FullFT did not learn it". SFT rows keep their own verdicts."""
    from rankone.capacity import NOT_LEARNED, rl_precondition

    def row(regime, n, method, recall, bits, verdict=None):
        return dict(
            regime=regime,
            model="m",
            n_facts=n,
            table_bits=float(n),
            method=method,
            rank=None if method == "fullft" else 1,
            table_recall=recall,
            bits_recalled=bits,
            verdict=verdict,
        )

    cross = pd.DataFrame(
        [
            row("sft", 64, "fullft", 1.0, 64),
            row("sft", 64, "lora-r1", 0.9, 40, "worse"),
            row("sft", 256, "fullft", 0.99, 250),
            row("sft", 256, "lora-r1", 0.6, 50, "worse"),  # rank 1's SFT capacity: 50 bits
            row("rl", 64, "fullft", 0.92, 38),
            row("rl", 64, "lora-r1", 0.8, 30, "worse"),  # 90% of the keys: learned (38 bits < 100)
            row("rl", 256, "fullft", 0.85, 120),
            row("rl", 256, "lora-r1", 0.6, 40, "worse"),  # 120 bits >= 2 x 50: learned (recall < 0.9)
            row("rl", 1024, "fullft", 0.75, 90),
            row("rl", 1024, "lora-r1", 0.55, 20, "inconclusive"),  # neither: missed
        ]
    )
    out = rl_precondition(cross).set_index(["regime", "n_facts", "method"])
    assert out.loc[("rl", 256, "lora-r1"), "rl_bar_bits"] == 100 and out.loc[("rl", 64, "fullft"), "fullft_learned"]
    assert out.loc[("rl", 256, "fullft"), "fullft_learned"] and not out.loc[("rl", 1024, "fullft"), "fullft_learned"]
    assert (
        out.loc[("rl", 64, "lora-r1"), "verdict"] == "worse" and out.loc[("rl", 256, "lora-r1"), "verdict"] == "worse"
    )
    assert out.loc[("rl", 1024, "lora-r1"), "verdict"] == NOT_LEARNED
    assert out.loc[("sft", 256, "lora-r1"), "verdict"] == "worse" and math.isnan(
        out.loc[("sft", 64, "fullft"), "rl_bar_bits"]
    )
    without_sft = rl_precondition(cross[cross.regime == "rl"]).set_index(["n_facts", "method"])
    assert without_sft.loc[(256, "lora-r1"), "verdict"] == NOT_LEARNED  # the recall bar alone: 0.85 < 0.9
    assert without_sft.loc[(64, "lora-r1"), "verdict"] == "worse"


def test_rankone_crossover_reads_a_finished_size_study(tmp_path):
    """`rankone crossover` on a study that is one table size (RL and SFT on one 1-bit table, the sweep
    on seeds 0-1, RL confirmed on seeds 2-3): one row per (regime, method) at the lr select chose, RL
    judged on the confirmation seeds and SFT on the sweep's, bits recalled within the table, bits per
    episode and per example, the precondition applied; the figure and page written; a study whose
    regimes train different tasks, or without select, is refused with its folder named."""
    import yaml

    from rankone.cli import main

    size = {k: v for k, v in CROSSOVER.items() if k != "capacity"}
    data = smoke_dict(
        results_dir=str(tmp_path / "results"),
        reports_dir=str(tmp_path / "reports"),
        models=["llama-tiny"],
        **{**size, "confirmation": {"seeds": {"rl": [2, 3], "sft": []}, "base_models": 1}},
        learning_rates={"rl": {"fullft": [0.001], "lora": [0.01]}, "sft": {"fullft": [0.001], "lora": [0.01]}},
        pretrain={**smoke_dict()["pretrain"], "steps": 40},
        analysis={"lr_extension": 0},
    )
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump(data))
    study = tmp_path / "results" / data["experiment"]
    assert main(["crossover", str(study), "--out", str(tmp_path / "x")]) == 2  # nothing there yet
    assert main(["resolve", "--config", str(config), "--out", str(study / "study.yaml")]) == 0
    c = ["--config", str(config)]
    for regime in ("rl", "sft"):
        assert main(["data", *c, "--regime", regime]) == 0
    assert main(["models", *c, "--model", "llama-tiny"]) == 0
    cells = [f"{g}/llama-tiny/{m}" for g in ("rl", "sft") for m in ("fullft", "lora-r1")]
    for cell, lr in zip(cells, ("0.001", "0.01", "0.001", "0.01")):
        assert main(["train", *c, "--run", f"{cell}/lr{lr}"]) == 0
        assert main(["evaluate", *c, "--method", cell]) == 0
    assert main(["crossover", str(study), "--out", str(tmp_path / "x")]) == 2  # select has not run
    assert main(["select", *c]) == 0
    for cell, lr in zip(cells[:2], ("0.001", "0.01")):
        assert main(["train", *c, "--confirm", "--run", f"{cell}/lr{lr}"]) == 0
        assert main(["evaluate", *c, "--confirm", "--method", cell]) == 0
    assert main(["crossover", str(study), "--out", str(tmp_path / "x")]) == 0
    table = pd.read_csv(tmp_path / "x" / "crossover.csv").set_index(["regime", "method"])
    assert sorted(table.index) == [("rl", "fullft"), ("rl", "lora-r1"), ("sft", "fullft"), ("sft", "lora-r1")]
    assert (table.n_facts == 64).all() and (table.bits_a_key == 1).all() and (table.seeds == 2).all()
    assert set(table.loc["rl"].judged_on) == {"confirmation seeds"} and set(table.loc["sft"].judged_on) == {
        "sweep seeds"
    }
    assert table.bits_recalled.between(0, 64).all()
    assert set(table["about"]) == {"not measured"}  # the study's analysis (sharpening.csv) has not run
    rl = table.loc["rl"]
    assert (rl.bits_per_episode == rl.bits_recalled / rl.episodes).all() and rl.fullft_learned.notna().all()
    assert table.loc["sft"].bits_per_example.notna().all()
    assert (tmp_path / "x" / "crossover.png").stat().st_size > 0
    page = (tmp_path / "x" / "crossover.md").read_text()
    assert "Rank 1 recalls at most" in page and "Time from first job to last, one study after another" in page
    smoke_cfg = tmp_path / "smoke.yaml"
    smoke_cfg.write_text(yaml.safe_dump(smoke_dict(results_dir=str(tmp_path / "other"))))
    (tmp_path / "other" / "smoke").mkdir(parents=True)
    (tmp_path / "other" / "smoke" / "study.yaml").write_text(smoke_cfg.read_text())
    assert main(["crossover", str(tmp_path / "other" / "smoke"), "--out", str(tmp_path / "y")]) == 2
    assert not (tmp_path / "y").exists()

    # published: the size study keeps its page, the crossover gets one that names it as a part, and
    # rank 1's verdicts are stated once, on the crossover's table sizes
    from rankone.io import InputError
    from rankone.publish import publish, published, rank1_verdicts, readme_block

    reports = tmp_path / "reports"
    (reports / "withdrawn.yaml").parent.mkdir(parents=True)
    (reports / "withdrawn.yaml").write_text("old-pilot: superseded by the crossover's sizes\n")
    (reports / "old-pilot").mkdir()
    (reports / "old-pilot" / "study.json").write_text('{"experiment": "old-pilot"}')
    assert main(["crossover", str(study), "--out", str(tmp_path / "results" / "crossover")]) == 0
    publish(tmp_path / "results", snakemake_report=False, allow_dirty=True)
    entries = {e["experiment"]: e for e in published(reports)}
    assert sorted(entries) == ["crossover", data["experiment"]]  # the withdrawn study is not listed
    assert entries["crossover"]["parts"] == [data["experiment"]] and entries["crossover"]["runs"] > 0
    page = (reports / "crossover" / "index.html").read_text()
    assert "Rank 1 recalls at most" in page and f"../{data['experiment']}/index.html" in page
    assert (reports / "crossover" / "crossover.png").is_file() and (
        reports / "crossover" / "data" / "crossover.csv"
    ).is_file()
    verdicts = rank1_verdicts(reports, list(entries.values()))
    assert set(verdicts.study) <= {"crossover"} and set(verdicts.part) <= {"64 keys"}
    block = readme_block(reports)
    assert "**crossover**" in block and f"**{data['experiment']}**" not in block
    index = (reports / "index.html").read_text()
    assert "Withdrawn" in index and "superseded by the crossover" in index and "a table size of crossover" in index
    import shutil

    shutil.rmtree(reports / data["experiment"])  # a crossover whose size is not published is refused
    (reports / "withdrawn.yaml").write_text(f"{data['experiment']}: gone\n")
    with pytest.raises(InputError, match="not published"):
        publish(tmp_path / "results", snakemake_report=False, allow_dirty=True)
    (reports / "withdrawn.yaml").write_text(f"old-pilot: old\n{data['experiment']}: gone\ncrossover: gone too\n")
    shutil.rmtree(reports / "crossover")  # a withdrawn crossover is neither published nor listed
    publish(tmp_path / "results", snakemake_report=False, allow_dirty=True)
    assert not (reports / "crossover").exists() and not published(reports)


def test_an_rl_only_capacity_study_draws_its_figures_without_sft_rows(tmp_path):
    """capacity.regimes [rl] (the crossover pilots): no SFT row, so the fall-off figure has no model;
    it is written empty (the report does not show it) instead of stopping the report."""
    from rankone.figures import plot_capacity, plot_capacity_falloff

    sft = pd.DataFrame(columns=["regime", "model", "method", "n_facts", "share_stored", "falls_off", "rank"])
    plot_capacity_falloff(sft, tmp_path / "falloff.png")
    chart = pd.DataFrame(columns=["regime", "model", "method", "n_facts", "trainable_parameters", "bits", "kind"])
    plot_capacity(chart, sft, 2.0, tmp_path / "capacity.png")
    assert (tmp_path / "falloff.png").stat().st_size > 0 and (tmp_path / "capacity.png").stat().st_size > 0


def test_a_scoped_rank_1_gets_its_own_crossover_and_rl_that_reached_its_capacity_says_so():
    """Rank 1 on one projection (fewer parameters) beside all-linear rank 1: one statement each; where
    FullFT by RL recalls more than the adapter holds by SFT, the runs could place its RL capacity."""

    def cells(method, rl, sft):
        return [
            {"regime": g, "method": method, "n_facts": n, "bits_recalled": b, "bits_recalled_low": b - 5}
            | {"bits_recalled_high": b + 5, "verdict": v}
            for g, rows in (("rl", rl), ("sft", sft))
            for n, b, v in rows
        ]

    narrow = cells("lora-r1-o_proj", [(512, 55, "worse")], [(512, 140, "worse")])
    full = cells("fullft", [(512, 290, None)], [(512, 512, None)])
    wide = cells("lora-r1", [(512, 220, "inconclusive")], [(512, 508, "parity")])
    sentence = crossover_sentence(pd.DataFrame(narrow + full))
    assert sentence.startswith("Rank 1 o_proj-only recalls at most 55 bits [50, 60] under RL")
    assert "saturates at fewer bits under RL than under SFT" in sentence
    assert "RL carried enough for rank 1 o_proj-only to reach its SFT capacity" in sentence
    both = crossover_sentence(pd.DataFrame(narrow + full + wide))
    assert both.index("Rank 1 recalls at most 220") < both.index("Rank 1 o_proj-only recalls at most 55")


def test_an_adapter_that_never_held_a_whole_table_gets_no_capacity():
    """Where rank 1 recalled under 90% of every table, the smallest included, its most bits are not a
    capacity it filled, and the crossover sentence says so; one that held the smallest table whole
    gets no such caveat."""

    def cells(recalls):
        return pd.DataFrame(
            [
                {"regime": g, "method": m, "n_facts": n, "table_recall": r, "bits_recalled": b}
                | {
                    "bits_recalled_low": b - 5,
                    "bits_recalled_high": b + 5,
                    "verdict": None if m == "fullft" else "worse",
                }
                for g in ("rl", "sft")
                for m, rows in recalls.items()
                for n, r, b in rows
            ]
        )

    share = cells({"lora-r1-o_proj": [(64, 0.61, 2), (512, 0.68, 50)], "fullft": [(64, 0.96, 50), (512, 0.9, 274)]})
    said = crossover_sentence(share)
    assert "At no size, 64 keys the smallest, did rank 1 o_proj-only recall 90% of a table under RL or SFT" in said
    assert "0.68 of 512 keys under RL, 0.68 of 512 keys under SFT" in said and "no capacity it filled" in said
    assert "RL's own limit does not explain" in said and "reach its SFT capacity" not in said
    whole = cells({"lora-r1-o_proj": [(64, 0.97, 50), (512, 0.68, 50)], "fullft": [(64, 0.96, 50), (512, 0.9, 274)]})
    assert "At no size" not in crossover_sentence(whole)


def test_an_adapter_whole_by_sft_and_never_by_rl_falls_short_and_its_sft_capacity_is_a_lower_bound():
    """Rank 1 that holds every table whole by SFT (never falling off) and none by RL: its fewer bits
    under RL are a shortfall, not a saturation, and its SFT bits only bound its SFT capacity below."""
    cells = [
        {"regime": g, "method": m, "n_facts": n, "table_recall": r, "bits_recalled": b}
        | {"bits_recalled_low": b - 5, "bits_recalled_high": b + 5, "verdict": v}
        for g, m, n, r, b, v in [
            ("rl", "lora-r1-mlp", 64, 0.74, 12, "inconclusive"),
            ("rl", "lora-r1-mlp", 256, 0.85, 100, "worse"),
            ("sft", "lora-r1-mlp", 64, 0.98, 60, "parity"),
            ("sft", "lora-r1-mlp", 256, 0.98, 223, "parity"),
            ("rl", "fullft", 64, 0.96, 50, None),
            ("rl", "fullft", 256, 0.91, 145, None),
        ]
    ]
    said = crossover_sentence(pd.DataFrame(cells))
    assert "stores fewer bits under RL than under SFT" in said and "saturates at fewer" not in said
    assert "never recalled 90% of a table (at best 0.85 of 256 keys)" in said
    assert "under SFT it held tables whole up to 256 keys (0.98)" in said and "At no size" not in said
    assert "its SFT capacity is at least 223 bits, not yet measured" in said
    even = pd.DataFrame(cells).assign(verdict=lambda t: t.verdict.replace("worse", "inconclusive"))
    assert "At no size, 64 keys the smallest" in crossover_sentence(even)  # not behind FullFT: RL's own limit
    fell = pd.DataFrame(cells).assign(verdict=lambda t: t.verdict.where(t.n_facts < 256, "worse"))
    assert "at least 223 bits" not in crossover_sentence(fell)  # fallen off at 256 keys: no lower bound


def test_rank_1_still_rising_where_it_recalls_most_is_what_the_budget_delivered():
    """The late slope (analysis.plateau's `rise`) of rank 1 where it recalls most, per regime: an
    interval above 0 is a curve still rising, said so; one that reaches 0 says nothing."""
    cells = [
        {"regime": g, "method": m, "n_facts": n, "table_recall": r, "bits_recalled": b}
        | {"bits_recalled_low": b - 5, "bits_recalled_high": b + 5, "verdict": v}
        | {"rise": 0.03, "rise_ci_low": lo, "rise_ci_high": 0.04, "rise_window": 819}
        for g, m, n, r, b, v, lo in [
            ("rl", "lora-r1-mlp", 512, 0.86, 213, "small", 0.02),
            ("rl", "lora-r1-mlp", 1024, 0.80, 292, "worse", 0.023),
            ("sft", "lora-r1-mlp", 1024, 0.97, 842, "inconclusive", -0.001),
            ("rl", "fullft", 1024, 0.94, 689, None, 0.0),
        ]
    ]
    said = crossover_sentence(pd.DataFrame(cells))
    assert "Its curve was still rising at the last step under RL at 1,024 keys" in said
    assert "(reward gained +0.030 [+0.023, +0.040] over another 819 steps):" in said  # not SFT's: it reaches 0
    assert "what this budget delivered, not a ceiling" in said
    both = crossover_sentence(pd.DataFrame(cells).assign(rise_ci_low=0.02))
    assert "under RL at 1,024 keys (reward gained" in both and "and under SFT at 1,024 keys (loss shed +0.030" in both
    stopped = pd.DataFrame(cells).assign(rise_ci_low=-0.01)
    assert "still rising" not in crossover_sentence(stopped)
    assert "still rising" not in crossover_sentence(pd.DataFrame(cells).drop(columns=["rise_ci_low"]))


def test_recall_by_checkpoint_gives_bits_with_an_interval_and_the_budget_at_every_step(tmp_path):
    """The report's recall table: per (method, lr, step) the whole-table recall, its bits (Fano) with a t
    interval over seeds, and the examples a key seen so far; nothing for a study with no table scored."""
    from rankone.report import recall_by_checkpoint

    cfg = validate(smoke_dict(results_dir=str(tmp_path), **CROSSOVER))
    rows = [
        {"regime": "sft", "model": "m", "method": method, "lr": 0.01, "seed": seed, "step": step, "table_greedy": a}
        for method, by_step in (
            ("fullft", {2: [1.0, 1.0], 4: [1.0, 1.0]}),
            ("lora-r1", {2: [0.75, 0.85], 4: [0.9, 0.9]}),
        )
        for step, recalls in by_step.items()
        for seed, a in enumerate(recalls)
    ]
    out = recall_by_checkpoint(cfg, pd.DataFrame(rows)).set_index(["method", "step"])
    r1 = out.loc[("lora-r1", 2)]
    expected = [bits_recalled(64, 2, a) for a in (0.75, 0.85)]
    assert r1.bits_recalled == pytest.approx(sum(expected) / 2) and r1.table_recall == pytest.approx(0.8)
    assert r1.bits_low < r1.bits_recalled < r1.bits_high and r1.seeds == 2
    assert out.loc[("lora-r1", 4)].bits_low == pytest.approx(out.loc[("lora-r1", 4)].bits_high)  # no spread
    assert out.loc[("fullft", 4)].bits_recalled == pytest.approx(64)
    wide = recall_by_checkpoint(cfg, pd.DataFrame(rows[:2]).assign(table_greedy=[0.99, 1.0])).iloc[0]
    assert wide.bits_high == 64 and wide.bits_low >= 0  # the interval stays inside the table
    assert out.loc[("lora-r1", 4), "seen_a_key"] == 4 * cfg.sft.batch_size / 64
    nothing = pd.DataFrame(rows).assign(table_greedy=math.nan)
    assert recall_by_checkpoint(cfg, nothing).empty


def test_locked_wrong_counts_the_keys_wrong_in_every_sample_and_the_sentence_compares_regimes():
    """A key answered wrong in every sample (1 - pass@k at the largest k) is locked: the crossover row
    gives its share with an interval over seeds beside the greedy share wrong, and the sentence states
    both per regime where rank 1 recalls most, beside FullFT's."""
    from rankone.capacity import locked_wrong

    runs = pd.DataFrame(
        {"test_greedy_accuracy": [0.8, 0.7], "test_pass_at_1": [0.8, 0.7], "test_pass_at_4": [0.85, 0.75]}
    )
    out = locked_wrong(runs, 0.95)
    assert out["locked_samples"] == 4 and out["locked_wrong"] == pytest.approx(0.2)
    assert out["wrong"] == pytest.approx(0.25) and 0 <= out["locked_low"] < 0.2 < out["locked_high"] <= 1
    assert locked_wrong(runs[["test_greedy_accuracy"]], 0.95) == {}  # no pass@k kept: nothing to say

    def cell(g, m, locked):
        return {"regime": g, "method": m, "n_facts": 256, "table_recall": 0.9, "bits_recalled": 100.0} | {
            "bits_recalled_low": 95.0,
            "bits_recalled_high": 105.0,
            "verdict": None if m == "fullft" else "worse",
            "wrong": locked + 0.01,
            "locked_wrong": locked,
            "locked_low": locked / 2,
            "locked_high": locked * 2,
            "locked_samples": 4,
        }

    table = pd.DataFrame(
        [cell("rl", "lora-r1", 0.2), cell("rl", "fullft", 0.1), cell("sft", "lora-r1", 0.0), cell("sft", "fullft", 0.0)]
    )
    said = crossover_sentence(table)
    assert "under RL at 256 keys it answered 21% of them wrong, 20% [10%, 40%] wrong in all 4 samples" in said
    assert "(FullFT: 11%, 10%)" in said and "under SFT at 256 keys it answered 1% of them wrong, 0%" in said
    assert "no policy gradient" in said
    assert "no policy gradient" not in crossover_sentence(table.drop(columns=["locked_wrong"]))
