"""The decisions analysis makes, on small tables with known answers."""

import math

import pandas as pd
import pytest

from rankone.analysis import (
    about,
    base_share,
    best_learning_rates,
    by_step,
    checkpoint_rows,
    family,
    corrected,
    interval,
    lr_optimum,
    judge,
    p_values,
    plateau,
    pooled,
    primary,
    seeds_to_decide,
    sharpening,
    stability,
    t_multiplier,
    trajectory,
    two_level,
    verdicts,
)
from rankone.config import RunId, validate
from rankone.io import write_json
from rankone.paths import Layout
from tests.conftest import smoke_dict


def runs(rows):
    return pd.DataFrame(rows, columns=["regime", "model", "method", "lr", "seed", "status", "val_score"])


def test_best_lr_is_chosen_on_val_and_never_a_diverged_run():
    table = runs(
        [
            ("rl", "m", "fullft", 1e-4, 0, "completed", 0.2),
            ("rl", "m", "fullft", 1e-4, 1, "completed", 0.3),
            ("rl", "m", "fullft", 1e-3, 0, "completed", 0.6),
            ("rl", "m", "fullft", 1e-3, 1, "completed", 0.5),
            ("rl", "m", "fullft", 1e-2, 0, "diverged", math.nan),
            ("rl", "m", "fullft", 1e-2, 1, "completed", 0.9),
        ]
    )
    best = best_learning_rates(table)
    assert best.lr.tolist() == [1e-3]  # 1e-2 averages -inf with its diverged seed
    assert best.diverged.tolist() == [0]
    assert best.at_grid_edge.tolist() == [False] and best.edge.tolist() == [""]


def test_best_lr_at_the_grid_edge_is_flagged_with_its_side():
    table = runs(
        [("sft", "m", "lora-r1", lr, 0, "completed", -lr) for lr in (1e-3, 1e-2, 1e-1)]
        + [("sft", "m", "fullft", lr, 0, "completed", lr) for lr in (1e-3, 1e-2, 1e-1)]
        + [("sft", "m", "lora-r4", lr, 0, "completed", -abs(lr - 1e-2)) for lr in (1e-3, 1e-2, 1e-1)]
    )
    best = best_learning_rates(table).set_index("method")
    assert best.edge.to_dict() == {"fullft": "high", "lora-r1": "low", "lora-r4": ""}
    assert best.at_grid_edge.to_dict() == {"fullft": True, "lora-r1": True, "lora-r4": False}
    # the edge extension's next lr: that edge's spacing continued outward; none inside the grid
    assert best.next_lr.fillna(0).to_dict() == {"fullft": 1.0, "lora-r1": 1e-4, "lora-r4": 0}


def test_the_edge_extension_continues_the_spacing_at_the_edge_it_reaches():
    """An uneven grid (an earlier extension): the step past an edge is the ratio at that edge, 3 sig. digits;
    a method with one lr has no edge (nothing to extend)."""
    table = runs(
        [("rl", "m", "fullft", lr, 0, "completed", lr) for lr in (1e-4, 3e-4, 6e-4)]
        + [("rl", "m", "lora-r1", lr, 0, "completed", -lr) for lr in (3e-4, 1e-3, 2e-3)]
        + [("rl", "m", "temperature", 0.01, 0, "completed", 0.5)]
    )
    best = best_learning_rates(table).set_index("method")
    assert best.edge.to_dict() == {"fullft": "high", "lora-r1": "low", "temperature": ""}
    assert best.next_lr.loc["fullft"] == 0.0012 and best.next_lr.loc["lora-r1"] == 9e-5
    assert math.isnan(best.next_lr.loc["temperature"])


MARGIN = 0.05


def judged(gaps, margin=MARGIN, confidence=0.95):
    mean, low, high = interval(gaps, confidence)
    return judge(mean, (high - low) / 2, *p_values(gaps, margin), margin, confidence)


@pytest.mark.parametrize(
    "gaps, expected, why",
    [
        # tight around zero: the whole interval inside the margin, and covering 0
        ([0.01, -0.01, 0.0, 0.005, -0.005], "parity", "inside the margin"),
        # significant but smaller than the margin: the fourth class, not parity and not worse
        (
            [-0.02, -0.021, -0.019, -0.02, -0.0205],
            "small",
            "significantly below 0, the gap inside the margin (interval inside the margin)",
        ),
        # significant, estimate inside the margin, interval reaching past it: small, not worse
        (
            [-0.01, -0.06, -0.03, -0.05, -0.02],
            "small",
            "significantly below 0, the gap inside the margin (interval reaching past the margin)",
        ),
        # a real deficit: the interval excludes 0, the estimate beyond the margin
        ([-0.30, -0.25, -0.35, -0.28, -0.32], "worse", "interval excludes 0, the gap beyond the margin"),
        ([0.30, 0.25, 0.35, 0.28, 0.32], "better", "interval excludes 0, the gap beyond the margin"),
        # small point estimate, wide interval: must NOT read parity (the old rule called it parity)
        ([-0.6, 0.55, 0.02, -0.3, 0.3], "inconclusive", "underpowered"),
        # narrow enough, but covers 0 and crosses the margin
        ([0.0, 0.06, 0.01, 0.05, 0.03], "inconclusive", "interval covers 0 and reaches past the margin"),
        # one seed: no interval, no verdict
        ([0.0], "inconclusive", "one seed: no interval"),
        # no spread at all: decided on the mean
        ([0.0, 0.0, 0.0], "parity", "inside the margin"),
        ([0.01, 0.01, 0.01], "small", "significantly above 0, the gap inside the margin (interval inside the margin)"),
        ([math.nan, 0.0], "diverged", "a run diverged"),
    ],
)
def test_equivalence_verdicts_on_hand_made_gap_tables(gaps, expected, why):
    assert judged(gaps) == (expected, why)


def test_the_tests_agree_with_the_interval():
    """TOST at alpha/2 a side rejects exactly when the interval lies inside the margin, and the
    t test at alpha exactly when it excludes 0 (statsmodels against the hand-computed interval)."""
    import random

    rng = random.Random(0)
    for _ in range(200):
        gaps = [rng.gauss(rng.uniform(-0.08, 0.08), rng.uniform(0.001, 0.05)) for _ in range(rng.randint(2, 12))]
        mean, low, high = interval(gaps, 0.95)
        p_eq, p_diff = p_values(gaps, MARGIN)
        assert (p_eq < 0.025) == (-MARGIN < low and high < MARGIN)
        assert (p_diff < 0.05) == (low > 0 or high < 0)


def test_corrections_run_within_each_family_and_say_what_they_turned():
    """The same p-values in two families: Holm (the primary family) turns both parities at
    0.014 and 0.015 into inconclusive (adjusted 0.028, past 0.025); Benjamini-Hochberg (any other
    family) keeps them (adjusted 0.015). A row without p-values is not counted."""
    rows = [
        dict(family=f, gap=0.0, half_width=0.02, p_equivalence=p, p_difference=0.6)
        for f in ("primary", "secondary")
        for p in (0.014, 0.015)
    ] + [dict(family="secondary", gap=0.0, half_width=0.0, p_equivalence=math.nan, p_difference=math.nan)]
    table = pd.DataFrame(rows).assign(margin=MARGIN)
    table[["verdict", "reason"]] = [
        judge(r.gap, r.half_width, r.p_equivalence, r.p_difference, MARGIN, 0.95) for r in table.itertuples()
    ]
    out = corrected(table.drop(columns="family"), 0.95, table.family)
    assert out.family_size.tolist() == [2, 2, 2, 2, 2]
    assert out.correction.tolist() == ["holm", "holm", "fdr_bh", "fdr_bh", "fdr_bh"]
    assert out.verdict_uncorrected.tolist() == ["parity"] * 4 + ["inconclusive"]
    assert out.verdict.tolist() == ["inconclusive", "inconclusive", "parity", "parity", "inconclusive"]
    assert out.p_equivalence_adjusted.iloc[:4].tolist() == pytest.approx([0.028, 0.028, 0.015, 0.015])
    assert out.reason.iloc[0] == (
        "parity before Holm's correction over 2 comparisons (adjusted p: equivalence 0.028, difference 1.000)"
    )


def test_primary_family_is_rank_one_on_the_score():
    table = pd.DataFrame(
        {
            "method": ["lora-r1", "lora-r1", "lora-r16", "lora-r1-attn"],
            "metric": ["score", "greedy_accuracy"] + ["score"] * 2,
        }
    )
    assert family(table).tolist() == ["primary", "secondary", "secondary", "secondary"]


def test_seeds_to_decide_follow_the_observed_spread():
    wide = [-0.6, 0.55, 0.02, -0.3, 0.3]
    n = seeds_to_decide(wide, MARGIN, 0.95)
    assert n > len(wide)
    # with that many seeds and the same spread, the interval would be decided
    mean, sd = sum(wide) / 5, pd.Series(wide).std()
    half = t_multiplier(int(n), 0.95) * sd / math.sqrt(n)
    assert half < max(MARGIN - abs(mean), abs(mean))
    half_before = t_multiplier(int(n) - 1, 0.95) * sd / math.sqrt(n - 1)
    assert half_before >= max(MARGIN - abs(mean), abs(mean))
    tight = [0.001, -0.001, 0.0, 0.0005, -0.0005]
    assert seeds_to_decide(tight, MARGIN, 0.95) <= len(tight)


def gap_runs(gaps: list[float], metric_offset: float = 0.0) -> pd.DataFrame:
    rows = []
    for seed, gap in enumerate(gaps):
        for method, value in (("fullft", 0.5), ("lora-r1", 0.5 + gap)):
            rows.append(
                {
                    "regime": "rl",
                    "model": "m",
                    "method": method,
                    "rank": None if method == "fullft" else 1,
                    "lr": 1e-3,
                    "seed": seed,
                    "status": "completed",
                    "val_score": value,
                    "test_score": value,
                    "test_greedy": value + metric_offset,
                }
            )
    return pd.DataFrame(rows)


def test_verdict_table_judges_score_and_greedy_accuracy(study):
    cfg, _ = study
    table = gap_runs([-0.6, 0.55, 0.02, -0.3, 0.3])
    result = verdicts(cfg, table, best_learning_rates(table)).set_index("metric")
    assert set(result.index) == {"score", "greedy_accuracy"}
    assert result.loc["score", "verdict"] == "inconclusive" and result.loc["score", "reason"] == "underpowered"
    assert result.loc["score", "margin"] == cfg.analysis.parity_threshold["rl"]
    assert result.loc["greedy_accuracy", "margin"] == cfg.analysis.greedy_margin
    assert abs(result.loc["score", "gap"] - (-0.006)) < 1e-9
    assert result.loc["score", "seeds_to_decide"] > 5


def test_plateau_test_tells_a_rising_curve_from_a_flat_one(study):
    cfg, _ = study
    rows = []
    for seed in range(3):
        for step in range(100):
            rows.append(
                {
                    "regime": "rl",
                    "model": "flat",
                    "method": "fullft",
                    "lr": 1e-3,
                    "seed": seed,
                    "step": step,
                    "value": 0.8 + 0.01 * ((step + seed) % 3),
                }
            )
            rows.append(
                {
                    "regime": "rl",
                    "model": "rising",
                    "method": "fullft",
                    "lr": 1e-3,
                    "seed": seed,
                    "step": step,
                    "value": step / 100 + 0.01 * seed,
                }
            )
            # a LoRA arm still creeping up: 0.01 a window, a fifth of the margin, so at its plateau
            rows.append(
                {
                    "regime": "rl",
                    "model": "flat",
                    "method": "lora-r1",
                    "lr": 1e-3,
                    "seed": seed,
                    "step": step,
                    "value": 0.5 + 0.0005 * step + 0.002 * ((step * (seed + 1)) % 5),
                }
            )
    curves = pd.DataFrame(rows)
    best = pd.DataFrame(
        [{"regime": "rl", "model": m, "method": "fullft", "lr": 1e-3} for m in ("flat", "rising")]
        + [{"regime": "rl", "model": "flat", "method": "lora-r1", "lr": 1e-3}]
    )
    result = plateau(cfg, curves, best).set_index(["model", "method"])
    assert bool(result.loc[("flat", "fullft"), "plateau"]) and not bool(result.loc[("rising", "fullft"), "plateau"])
    rising = result.loc[("rising", "fullft")]
    assert rising.window == 20 and rising.change == pytest.approx(0.2) and rising.rise == pytest.approx(0.2)
    creeping = result.loc[("flat", "lora-r1")]
    assert creeping.plateau and 0 < creeping.rise_ci_low < creeping.rise_ci_high < creeping.margin


def test_layer_findings_state_how_each_result_compares_with_the_original():
    from rankone.report import layer_findings

    def row(scope, verdict, gap):
        return {
            "regime": "rl",
            "model": "m",
            "rank": 1,
            "scope": scope,
            "verdict": verdict,
            "gap_to_all_linear": gap,
            "ci_low": gap - 0.1,
            "ci_high": gap + 0.1,
        }

    lines = layer_findings(
        pd.DataFrame(
            [
                row("attention", "worse", -0.2),
                row("mlp", "parity", 0.0),
                row("attention", "inconclusive", -0.1),
            ]
        ).assign(rank=[1, 1, 16])
    )
    assert "agrees with the original finding (attention-only underperforms)" in lines[0]
    assert "agrees with the original finding (MLP-only matches all layers)" in lines[1]
    assert "neither confirms nor contradicts" in lines[2] and "below all-linear" in lines[2]
    assert "differs from" in layer_findings(pd.DataFrame([row("attention", "parity", 0.01)]))[0]


def test_rl_on_a_facts_table_gets_bits_stored_by_the_sft_estimator(tmp_path):
    import json

    from rankone.analysis import information
    from rankone.config import validate
    from rankone.paths import Layout
    from tests.conftest import smoke_dict

    cfg = validate(
        smoke_dict(
            results_dir=str(tmp_path),
            regimes=["rl"],
            levers=None,
            truncation=None,
            tasks={
                "rl": {
                    "name": "facts",
                    "params": {"n_facts": 64, "digits": 1, "alphabet": 2, "n_val": 16, "n_test": 16},
                },
                "sft": {"name": "facts", "params": {"n_facts": 64, "digits": 2, "n_val": 16, "n_test": 16}},
            },
        )
    )
    at = Layout(cfg)
    at.data("rl").mkdir(parents=True)
    (at.data("rl") / "manifest.json").write_text(json.dumps({"information_bits": 64.0}))
    rows = [
        {
            "regime": "rl",
            "model": "m",
            "method": m,
            "lr": 1e-3,
            "seed": s,
            "trainable_parameters": p,
            "info_bound_bits": 100.0,
            "bits_absorbed": 30.0,
            "train_nll_bits_final": nll,
            "test_greedy_accuracy": acc,
        }
        for m, p, nll, acc in (("fullft", 1000, 4.0, 1.0), ("lora-r1", 10, 80.0, 0.5))
        for s in (0, 1)
    ]
    table = information(
        cfg, pd.DataFrame(rows), pd.DataFrame(rows)[["regime", "model", "method", "lr"]].drop_duplicates(), at
    ).set_index("method")
    assert table.loc["fullft", "bits_stored"] == 60.0  # 64 bits in the table, 4 still unsure
    assert table.loc["lora-r1", "bits_stored"] == 0.0  # never below 0
    assert (table.rl_dataset_bits == 64.0).all()
    # Recall in bits: every probe right is the whole table; a coin's worth of binary answers is nothing.
    assert table.loc["fullft", "bits_recalled"] == 64.0 and table.loc["lora-r1", "bits_recalled"] == 0.0


def test_bits_recalled_follow_fanos_bound():
    from rankone.info import bits_recalled

    assert bits_recalled(100, 2, 1.0) == 100.0 and bits_recalled(100, 2, 0.5) == 0.0
    assert bits_recalled(100, 2, 0.875) == pytest.approx(100 * (1 - 0.5435644), rel=1e-6)  # 1 - H(0.875)
    assert bits_recalled(10, 10_000, 0.0001) == pytest.approx(0.0, abs=1e-9)  # chance recall: nothing
    assert bits_recalled(10, 10, 1.0) == pytest.approx(10 * math.log2(10))
    assert bits_recalled(10, 2, 0.1) == pytest.approx(bits_recalled(10, 2, 0.9))  # always wrong on a bit: as telling


def evaluated(scores: list[tuple[int, float]]) -> dict:
    """An evaluate line with late checkpoints (step, mean reward on val and test)."""
    return {
        "checkpoints": [
            {
                "step": step,
                "val": {"mean_reward": r, "greedy_accuracy": r / 2},
                "test": {"mean_reward": r + 0.1, "greedy_accuracy": r},
            }
            for step, r in scores
        ]
    }


def test_the_tail_score_is_the_mean_over_the_late_checkpoints_and_final_is_the_last(study):
    cfg, _ = study
    rows = checkpoint_rows(RunId.parse("rl/m/lora-r1/lr0.001/seed0"), evaluated([(6, 0.2), (7, 0.4), (8, 0.9)]))
    assert [r["step"] for r in rows] == [6, 7, 8]
    tail = primary(cfg, rows)
    assert tail["val_score"] == pytest.approx(0.5) and tail["test_score"] == pytest.approx(0.6)
    assert tail["test_greedy"] == pytest.approx(0.5) and tail["val_greedy"] == pytest.approx(0.25)
    final = primary(cfg.model_copy(update={"analysis": cfg.analysis.model_copy(update={"score": "final"})}), rows)
    assert final["val_score"] == pytest.approx(0.9) and final["test_score"] == pytest.approx(1.0)
    sft = checkpoint_rows(
        RunId.parse("sft/m/fullft/lr0.001/seed0"),
        {"checkpoints": [{"step": 3, **{s: {"nll": 2.0, "greedy_accuracy": 0.1} for s in ("val", "test")}}]},
    )
    assert sft[0]["test_score"] == -2.0  # SFT's score is -NLL: higher is better
    assert math.isnan(sft[0]["table_greedy"])  # no table scored
    table = evaluated([(6, 0.2), (8, 0.9)])
    table["checkpoints"][1]["table"] = {"keys": 64, "greedy_accuracy": 0.75}
    assert [r["table_greedy"] for r in checkpoint_rows(RunId.parse("rl/m/fullft/lr0.001/seed0"), table)][1] == 0.75


def checkpoint_table(gaps_by_step: dict[int, list[float]]) -> pd.DataFrame:
    rows = []
    for step, gaps in gaps_by_step.items():
        for seed, gap in enumerate(gaps):
            for method, value in (("fullft", 0.5), ("lora-r1", 0.5 + gap)):
                rows.append(
                    {
                        "regime": "rl",
                        "model": "m",
                        "method": method,
                        "lr": 1e-3,
                        "seed": seed,
                        "step": step,
                        "status": "completed",
                        "val_score": value,
                        "test_score": value,
                        "test_greedy": 0.5,
                    }
                )
    return pd.DataFrame(rows)


def test_a_verdict_that_flips_at_the_last_checkpoint_is_not_stable(study):
    cfg, _ = study
    parity = [0.001, -0.001, 0.002, 0.0, -0.002]
    worse = [-0.3, -0.31, -0.29, -0.3, -0.32]
    flips = checkpoint_table({105: parity, 122: parity, 140: parity, 175: worse})
    best = best_learning_rates(flips[flips.step == 175])
    steps = trajectory(cfg, flips, best)
    score = steps[steps.metric == "score"]
    assert score.step.tolist() == [105, 122, 140, 175]
    assert score.verdict.tolist() == ["parity", "parity", "parity", "worse"]
    table = stability(verdicts(cfg, flips[flips.step == 105], best), steps).set_index("metric")
    assert table.loc["score", "verdict"] == "parity" and not table.loc["score", "stable"]
    assert table.loc["score", "by_step"] == "parity at 105-140, worse at 175"
    assert table.loc["greedy_accuracy", "stable"]  # greedy accuracy never moves here
    assert math.isnan(table.loc["score", "seeds_to_stable"])  # decided at every checkpoint: seeds cannot help

    # Parity in the tail, one checkpoint too noisy to decide: the seeds its spread would need.
    noisy = [0.08, -0.07, 0.06, -0.09, 0.03]
    wobbles = checkpoint_table({105: parity, 140: noisy, 175: parity})
    table = stability(verdicts(cfg, wobbles[wobbles.step == 105], best), trajectory(cfg, wobbles, best))
    score = table.set_index("metric").loc["score"]
    assert not score.stable and score.by_step == "parity at 105, inconclusive at 140, parity at 175"
    margin = cfg.analysis.parity_threshold["rl"]
    assert score.seeds_to_stable == seeds_to_decide(noisy, margin, cfg.analysis.confidence) > 5

    steady = checkpoint_table({105: parity, 140: parity})
    table = stability(verdicts(cfg, steady[steady.step == 140], best), trajectory(cfg, steady, best))
    assert table.set_index("metric").loc["score", "stable"]


def test_by_step_names_each_run_of_one_verdict():
    assert by_step([5, 6, 7, 8], ["parity", "parity", "worse", "parity"]) == "parity at 5-6, worse at 7, parity at 8"
    assert by_step([8], ["better"]) == "better at 8"


def test_the_answer_names_a_judged_run_that_collapsed():
    from rankone.report import collapse_note

    judged = pd.DataFrame(
        [
            {"regime": "rl", "model": "m", "method": m, "lr": 1e-4, "seed": s, "test_score": v, "format_collapse": c}
            for m, s, v, c in [
                ("fullft", 10, 0.8, False),
                ("fullft", 12, 0.0, True),
                ("lora-r1", 10, 0.7, False),
                ("lora-r1", 12, 0.7, False),
            ]
        ]
    )
    note = collapse_note(judged, "rl", "m")
    assert "1 of the 4 judged runs: FullFT seed 12 (lr 0.0001, test score 0.000)" in note
    assert collapse_note(judged[judged.seed == 10], "rl", "m") == "" and collapse_note(None, "rl", "m") == ""


def test_one_reader_for_every_analysis_table(tmp_path):
    from rankone.io import read_table

    (tmp_path / "best_lr.csv").write_text(
        "regime,model,method,lr,edge,gap\nrl,m,fullft,0.001,,\nrl,m,lora-r1,0.01,,0.5\n"
    )
    best = read_table(tmp_path / "best_lr.csv")
    assert best.edge.tolist() == ["", ""]  # an empty text column stays text
    assert best.lr.dtype == float and pd.isna(best.gap.iloc[0]) and best.gap.iloc[1] == 0.5
    (tmp_path / "empty.csv").write_text("")
    assert read_table(tmp_path / "empty.csv").empty


def prof(greedy, reward, *passes):
    return {
        "greedy_accuracy": greedy,
        "mean_reward": reward,
        **dict(zip(("pass_at_1", "pass_at_2", "pass_at_8"), passes)),
    }


def sharpening_study(tmp_path, methods: dict[str, list[tuple[float, float]]]):
    """Hand-made profiles: the base answers 0.2 greedily and samples 0.1 reward at T=1; at T=0.5
    (the control, best on val) it samples 0.18 on test. `methods`: each method's (greedy, reward)
    per seed. Returns sharpening.csv indexed by method."""
    cfg = validate(smoke_dict(results_dir=str(tmp_path), models=["llama-tiny"]))
    at = Layout(cfg)
    temperatures = {
        "0.5": {"val": prof(0.2, 0.19, 0.19, 0.25, 0.3), "test": prof(0.2, 0.18, 0.18, 0.24, 0.3)},
        "1": {"val": prof(0.2, 0.1, 0.1, 0.18, 0.45), "test": prof(0.2, 0.1, 0.1, 0.18, 0.45)},
    }
    summary = {"temperatures": temperatures, "evaluation_temperature": 1.0, "best_temperature": 0.5}
    write_json(at.rollouts("llama-tiny") / "summary.json", {"sharpening": summary})
    rows = [
        {
            "regime": "rl",
            "model": "llama-tiny",
            "method": method,
            "lr": 1e-3,
            "seed": seed,
            **{f"profile_{k}": v for k, v in prof(greedy, reward, reward, reward, 0.7).items()},
        }
        for method, values in methods.items()
        for seed, (greedy, reward) in enumerate(values)
    ]
    judged = pd.DataFrame(rows)
    best = judged[["regime", "model", "method", "lr"]].drop_duplicates()
    return sharpening(cfg, judged, best, at).set_index("method")


FULLFT_LEARNS = [(0.58, 0.55), (0.6, 0.55), (0.62, 0.55)]
RANK1_SHARPENS = [(0.2, 0.19), (0.21, 0.2), (0.19, 0.18)]


def test_sharpening_splits_a_gain_into_the_controls_part_and_the_rest(tmp_path):
    """FullFT lifts greedy accuracy to 0.6 (learning); rank 1 only lifts its sampled reward to 0.19,
    greedy unchanged (sharpening)."""
    table = sharpening_study(tmp_path, {"fullft": FULLFT_LEARNS, "lora-r1": RANK1_SHARPENS})
    assert table.loc["control: base at best temperature", "temperature"] == 0.5
    full, r1 = table.loc["fullft"], table.loc["lora-r1"]
    assert full.greedy_accuracy_beyond_control == pytest.approx(0.4) and full.greedy_accuracy_beyond_control_ci_low > 0
    assert full.mean_reward_beyond_control == pytest.approx(0.37) and full.mean_reward_over_base == pytest.approx(0.45)
    assert full.reads == "learning" and full.mean_reward_control == "base at best temperature"
    assert r1.mean_reward_over_base == pytest.approx(0.09) and r1.mean_reward_beyond_control == pytest.approx(0.01)
    assert r1.greedy_accuracy_beyond_control_ci_low < 0 < r1.greedy_accuracy_beyond_control_ci_high
    assert r1.reads == "sharpening"


def test_the_learned_temperature_is_the_control_where_it_samples_better(tmp_path):
    """The learned temperature samples 0.22 reward (above the fixed control's 0.18): rank 1's reward
    beyond the control is taken against its seeds, with Welch's interval (scipy's, as a check)."""
    from scipy import stats

    learned = [(0.2, 0.21), (0.2, 0.23), (0.2, 0.22), (0.2, 0.22)]
    table = sharpening_study(tmp_path, {"fullft": FULLFT_LEARNS, "lora-r1": RANK1_SHARPENS, "temperature": learned})
    control, r1 = table.loc["temperature"], table.loc["lora-r1"]
    assert control.reads == "control" and control.mean_reward_over_base == pytest.approx(0.12)
    assert r1.mean_reward_control == "learned temperature" and r1.mean_reward_beyond_control == pytest.approx(-0.03)
    welch = stats.ttest_ind([0.19, 0.2, 0.18], [0.21, 0.23, 0.22, 0.22], equal_var=False).confidence_interval(0.95)
    assert (r1.mean_reward_beyond_control_ci_low, r1.mean_reward_beyond_control_ci_high) == pytest.approx(tuple(welch))
    assert r1.greedy_accuracy_control == "base at best temperature"  # the greedy accuracies tie: the fixed one
    assert list(table.index[:3]) == ["base", "control: base at best temperature", "temperature"]


def test_verdicts_of_a_regime_whose_fullft_gained_nothing_are_not_judged(tmp_path):
    """The precondition: FullFT reads `no gain` on llama-tiny and `learning` on qwen3-tiny. The
    llama-tiny verdicts are `not judged` and leave the correction's family; qwen3-tiny's stand."""
    flat = sharpening_study(tmp_path, {"fullft": [(0.2, 0.1), (0.21, 0.09), (0.19, 0.11)]})
    assert flat.loc["fullft", "reads"] == "no gain"
    regimes = about(flat.reset_index()) | {("rl", "qwen3-tiny"): "learning"}
    assert regimes == {("rl", "llama-tiny"): "not judged", ("rl", "qwen3-tiny"): "learning"}
    cfg = validate(smoke_dict(results_dir=str(tmp_path)))
    rows = []
    for model in ("llama-tiny", "qwen3-tiny"):
        for seed in range(4):
            for method, score in (("fullft", 0.5), ("lora-r1", 0.2)):
                rows.append(
                    {"regime": "rl", "model": model, "method": method, "lr": 1e-3, "seed": seed}
                    | {"test_score": score + 0.01 * seed, "test_greedy": score}
                )
    judged = pd.DataFrame(rows)
    best = judged[["regime", "model", "method", "lr"]].drop_duplicates().assign(edge="")
    table = verdicts(cfg, judged, best, regimes).set_index(["model", "metric"])
    assert set(table.loc["llama-tiny", "verdict"]) == {"not judged"}
    assert table.loc["llama-tiny"].p_equivalence.isna().all()
    assert set(table.loc["llama-tiny", "about"]) == {"not judged"}
    assert table.loc[("qwen3-tiny", "score"), "verdict"] == "worse"
    assert table.loc[("qwen3-tiny", "score"), "family_size"] == 1  # the judged primary comparison alone
    assert set(table.loc["qwen3-tiny", "about"]) == {"learning"}
    assert set(verdicts(cfg, judged, best).about) == {"not measured"}
    from rankone.report import findings

    answer = findings(stability(table.reset_index(), pd.DataFrame()), pd.DataFrame())
    llama, qwen = (next(line for line in answer if f"· {m}**" in line) for m in ("llama-tiny", "qwen3-tiny"))
    assert "not judged: FullFT gained nothing over the base" in llama and "Greedy accuracy" not in llama
    assert "rank 1 is worse than FullFT" in qwen
    # A study of FullFT alone (a pilot) has no verdict to state, and says so instead of failing.
    assert findings(pd.DataFrame(), pd.DataFrame()) == [
        "No verdict: the study trains no method beside FullFT to judge against it."
    ]


def test_rejudging_a_published_interval_recovers_the_p_values_exactly():
    """scripts/rejudge-published: a paired t test needs only the gap, the interval and the seeds,
    so p-values rebuilt from a published row equal those of the raw gaps."""
    import runpy

    from rankone.analysis import compare
    from tests.conftest import ROOT

    rejudge = runpy.run_path(str(ROOT / "scripts" / "rejudge-published"))["rejudge"]
    rows = []
    for gaps in ([-0.02, -0.021, -0.019, -0.02, -0.0205], [0.01, -0.01, 0.0, 0.005, -0.005], [-0.3, -0.25, -0.35]):
        mine = pd.Series(gaps)
        rows.append(
            {
                "regime": "rl",
                "model": "m",
                "method": "lora-r4",
                "metric": "score",
                **compare(mine, pd.Series([0.0] * len(gaps)), MARGIN, 0.95),
            }
        )
    published = pd.DataFrame(rows)
    again = rejudge(published.drop(columns=["p_equivalence", "p_difference"]))
    assert again.p_equivalence.tolist() == pytest.approx(published.p_equivalence.tolist(), rel=1e-9, abs=1e-12)
    assert again.p_difference.tolist() == pytest.approx(published.p_difference.tolist(), rel=1e-9, abs=1e-12)
    assert again.verdict_uncorrected.tolist() == ["small", "parity", "worse"]


def test_fitted_optimum_finds_the_vertex_and_the_lora_over_fullft_ratio():
    """Val score = -(log10 lr - peak)^2 plus seed noise: FullFT peaks at 1e-3, rank 1 at 4e-3 (a
    ratio of 4) on a 2x grid, rank 4 rises to the grid's top (no interior optimum)."""
    grid = [2.5e-4 * 2**i for i in range(6)]  # 2.5e-4 .. 8e-3
    peaks = {"fullft": -3.0, "lora-r1": math.log10(4e-3)}
    rows = []
    for seed in range(4):
        for i, lr in enumerate(grid):
            noise = 0.002 * (((seed * 7 + i * 3) % 5) - 2)
            for method, peak in peaks.items():
                rows.append(("rl", "m", method, lr, seed, "completed", -((math.log10(lr) - peak) ** 2) + noise))
            rows.append(("rl", "m", "lora-r4", lr, seed, "completed", math.log10(lr) + noise))
    table = lr_optimum(runs(rows), 0.95, resamples=200).set_index("method")
    full, r1, r4 = table.loc["fullft"], table.loc["lora-r1"], table.loc["lora-r4"]
    assert full.fitted_lr == pytest.approx(1e-3, rel=0.05) and full.interior
    assert full.fitted_lr_ci_low < 1e-3 < full.fitted_lr_ci_high
    assert r1.ratio_to_fullft == pytest.approx(4, rel=0.1) and r1.ratio_ci_low < 4 < r1.ratio_ci_high
    assert not r4.interior and r4.edge == "high" and not r4.fitted_lr <= max(grid)  # NaN or beyond the grid


def base_model_gaps(offsets: list[float], noise: list[float]) -> pd.DataFrame:
    """Gaps of 4 seeds on each base model: the base model's offset plus the seed's noise."""
    return pd.DataFrame(
        [{"base": b, "seed": s, "gap": offset + e} for b, offset in enumerate(offsets) for s, e in enumerate(noise)]
    )


def test_two_level_interval_widens_with_the_base_models_spread_and_names_its_share():
    """Three base models 0.1 apart, seeds within 0.01 of each other: pooling the 12 seeds as if
    independent gives a narrower interval than the two-level bootstrap, and nearly all of the
    variance is the base model's. Without a base-model effect the share is about 0."""
    noise = [-0.01, 0.0, 0.005, 0.005]
    spread = base_model_gaps([-0.1, 0.0, 0.1], noise)
    _, seed_low, seed_high = interval(spread.gap.tolist(), 0.95)
    mean, low, high = two_level(spread, 0.95, resamples=1000)
    assert mean == pytest.approx(0.0, abs=1e-12) and low < 0 < high
    assert high - low > 1.5 * (seed_high - seed_low) and high - low > 0.15
    assert base_share(spread) > 0.95
    flat = base_model_gaps([0.02, 0.02, 0.02], noise)
    assert base_share(flat) < 0.05
    assert two_level(flat, 0.95, resamples=1000)[1] > 0.01 - 1e-9  # every resample's mean is 0.02 - 0.01 or more
    assert two_level(spread, 0.95, resamples=200) == two_level(spread, 0.95, resamples=200)  # seeded
    assert math.isnan(base_share(spread[spread.base == 0]))  # one base model: no share to tell


def test_verdicts_pool_each_models_base_model_replicas(tmp_path):
    """Three base models of llama-tiny (the model and two replicas), 4 seeds each: rank 1 trails FullFT
    by 0.1 on every base model (worse, decided on the 3 base models' means) while rank 4's gap is 0 on
    average but swings 0.1 between base models, most of its variance the base model's. qwen3-tiny has
    no replica: no pooled row."""
    cfg = validate(
        smoke_dict(results_dir=str(tmp_path), models=["llama-tiny", "llama-tiny@1", "llama-tiny@2", "qwen3-tiny"])
    )
    noise = [-0.01, 0.0, 0.005, 0.005]
    rows = []
    for model, swing in (("llama-tiny", -0.1), ("llama-tiny@1", 0.0), ("llama-tiny@2", 0.1), ("qwen3-tiny", 0.0)):
        for seed, e in enumerate(noise):
            for method, gap in (("fullft", 0.0), ("lora-r1", -0.1 + e), ("lora-r4", swing + e)):
                value = 0.5 + gap
                rows.append(
                    {"regime": "rl", "model": model, "method": method, "lr": 1e-3, "seed": seed}
                    | {"test_score": value, "test_greedy": value}
                )
    judged = pd.DataFrame(rows)
    best = judged[["regime", "model", "method", "lr"]].drop_duplicates().assign(edge="")
    table = pooled(cfg, judged, best).set_index(["method", "metric"])
    assert set(table.model) == {"llama-tiny"} and set(table.base_models) == {3} and set(table.runs) == {12}
    r1, r4 = table.loc[("lora-r1", "score")], table.loc[("lora-r4", "score")]
    assert r1.gap == pytest.approx(-0.1) and r1.verdict == "worse" and r1.family == "primary"
    assert r4.gap == pytest.approx(0.0, abs=1e-12) and r4.verdict == "inconclusive" and r4.family == "secondary"
    assert r4.base_share > 0.95 and r4.two_level_low < -0.05 and r4.two_level_high > 0.05
    # the t interval over 3 base-model means: df 2, half-width t(0.975, 2) * sd / sqrt(3)
    assert r4.ci_high - r4.ci_low == pytest.approx(2 * t_multiplier(3, 0.95) * 0.1 / math.sqrt(3))
    assert set(table.about) == {"not measured"}
    # the precondition: a pool is about its weakest replica; one whose FullFT gained nothing stops it
    learned = {("rl", m): "learning" for m in ("llama-tiny", "llama-tiny@1", "llama-tiny@2")}
    assert set(pooled(cfg, judged, best, learned).about) == {"learning"}
    mixed = learned | {("rl", "llama-tiny@1"): "sharpening"}
    assert set(pooled(cfg, judged, best, mixed).about) == {"sharpening"}
    stopped = pooled(cfg, judged, best, learned | {("rl", "llama-tiny@2"): "not judged"})
    assert set(stopped.verdict) == {"not judged"} and stopped.p_equivalence.isna().all()


def test_confirmation_runs_on_replicas_are_pooled_at_their_models_chosen_lr(tmp_path):
    """confirmation.base_models: 3 with best_lr.csv naming only the sweep's models: each replica's runs
    are judged at its model's chosen lr (with_replicas) and pooled over the 3 base models; a run at
    another lr is not chosen."""
    from rankone.analysis import over_base_models, with_replicas

    cfg = validate(smoke_dict(results_dir=str(tmp_path), confirmation={"seeds": {"rl": [2, 3]}, "base_models": 3}))
    rows = []
    for model, swing in (("llama-tiny", -0.1), ("llama-tiny@1", 0.0), ("llama-tiny@2", 0.1)):
        for seed, e in ((2, -0.01), (3, 0.01)):
            for method, gap, lr in (("fullft", 0.0, 1e-3), ("lora-r1", swing + e, 1e-2), ("lora-r1", 0.5, 3e-2)):
                rows.append(
                    {"regime": "rl", "model": model, "method": method, "lr": lr, "seed": seed, "test_score": 0.4 + gap}
                )
    judged = pd.DataFrame(rows)
    best = pd.DataFrame(
        [
            {"regime": "rl", "model": m, "method": x, "lr": lr, "edge": ""}
            for m in cfg.models
            for x, lr in (("fullft", 1e-3), ("lora-r1", 1e-2))
        ]
    )
    every = with_replicas(cfg, best)
    assert len(every) == 3 * len(best) and set(every[every.model == "qwen3-tiny@2"].lr) == {1e-3, 1e-2}
    row = pooled(cfg, judged, every).set_index(["method", "metric"]).loc[("lora-r1", "score")]
    assert row.model == "llama-tiny" and row.base_models == 3 and row.runs == 6
    assert row.gap == pytest.approx(0.0, abs=1e-12) and row.base_share > 0.9
    # verdicts.csv: the pooled verdict in place of the three per-base ones, which go to replicas.csv;
    # the primary family (Holm) counts the model once
    per_base = verdicts(cfg, judged, every)
    assert set(per_base[per_base.family == "primary"].model) == {"llama-tiny", "llama-tiny@1", "llama-tiny@2"}
    headline, replicas = over_base_models(per_base, pooled(cfg, judged, every), 0.95)
    primary = headline[headline.family == "primary"]
    assert len(primary) == 1 and set(primary.family_size) == {1} and len(replicas) == len(per_base)
    first = primary.iloc[0]
    assert (first.model, first.seeds, first.base_models, first.lr) == ("llama-tiny", 6, 3, 1e-2)
    assert first.gap == pytest.approx(row.gap) and first.ci_low == pytest.approx(row.ci_low)


def test_the_report_says_how_far_the_edge_extension_went_and_where_the_cap_was_hit():
    from rankone.report import edge_note, extension_notes

    best = pd.DataFrame(
        [
            ("rl", "m", "fullft", 1e-4, 0, "", math.nan),
            ("rl", "m", "lora-r1", 1.5e-4, 2, "low", 7.5e-5),
            ("rl", "m", "lora-r16", 6e-4, 1, "", math.nan),
        ],
        columns=["regime", "model", "method", "lr", "extended", "edge", "next_lr"],
    )
    first, capped = extension_notes(best, 2)
    assert "rank 1: 2 added, best 0.00015 (still on the low edge)" in first and "FullFT" not in first
    assert "rank 16: 1 added, best 0.0006;" not in first and "rank 16: 1 added, best 0.0006." in first
    assert "cap was hit for RL · m · rank 1" in capped and "rank 16" not in capped
    assert extension_notes(best, 0) == []  # no extension: nothing to say
    verdicts = pd.DataFrame(
        [("lora-r1", "low", 2, "", 0)],
        columns=["method", "lr_edge", "lr_extended", "fullft_lr_edge", "fullft_lr_extended"],
    )
    assert "rank 1 (low, after 2 lrs added past the grid: the cap)" in edge_note(verdicts)


def test_a_missing_value_never_prints_as_nan_on_a_page():
    """A page shows an empty cell, or says there is no interval, where a value is missing
    (issue #42: "nan bits", "CI [+nan, +nan]", best lrs with no next lr)."""
    import re
    from types import SimpleNamespace

    from rankone.config import validate
    from rankone.report import _ci, _round, to_markdown
    from rankone.render import block
    from tests.conftest import smoke_dict

    table = pd.DataFrame({"lr": [1e-3, math.nan], "next_lr": [math.nan, 2e-3], "gap": [0.1234, math.nan]})
    shown = _round(table)
    page = to_markdown(validate(smoke_dict()), [("t", [shown])]) + block(shown)
    assert not re.search(r"\bnan\b", page, re.I) and "0.002" in page and "0.123" in page
    assert _ci(SimpleNamespace(gap=0.026, ci_low=math.nan, ci_high=math.nan)) == "+0.026, no interval"


def test_the_sft_arm_note_speaks_of_a_table_only_where_the_task_has_one():
    """On a facts table the note gives its bits and what each method stored; on SFT with no table of
    known bits (the 2x2's problems) it says nothing, where it printed "the table holds nan bits"."""
    from rankone.report import sft_arm_note

    def info(table_bits: float) -> pd.DataFrame:
        rows = [("fullft", 900.0), ("lora-r1", 100.0)]
        return pd.DataFrame(
            [
                {"regime": "sft", "model": "m", "method": m, "sft_dataset_bits": table_bits, "bits_stored": b}
                for m, b in rows
            ]
        )

    note = sft_arm_note(info(1024.0))
    assert "the table holds 1,024 bits" in note and "FullFT stored 900 bits (88%)" in note
    assert sft_arm_note(info(math.nan)) == ""


def test_the_base_policy_band_reads_a_checkpoint_that_was_not_warm_started_from_its_rollouts():
    """The report's 5-60% check of a base's pass@1 on RL train prompts: the warm-start's own check where
    there is one, else the rollouts stage's train samples (a converted checkpoint such as SmolLM2 has no
    warm-start; before, its page said nothing about the band)."""
    from rankone.report import base_band

    assert base_band({"base pass@1 (pretrain check)": 0.03, "train pass@1": 0.2}) == "3% (outside 5-60%)"
    assert base_band({"base pass@1 (pretrain check)": 0.2, "train pass@1": 0.01}) == "20%"
    converted = {"base pass@1 (pretrain check)": None}
    assert base_band({**converted, "train pass@1": 0.041}) == "4% (rollouts stage) (outside 5-60%)"
    assert base_band({**converted, "train pass@1": 0.3}) == "30% (rollouts stage)"
