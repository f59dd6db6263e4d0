"""The smoke study through real Snakemake: end to end, nothing to redo, precise reruns."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rankone.analysis import chosen
from rankone.checks import validate
from rankone.config import CONTROL_METHODS, layered_files, load, tail_steps
from rankone.io import read_json, read_jsonl
from rankone.paths import Layout
from tests.conftest import ROOT, copy_workflow, finished_study, snakemake, started, study_copy, venv_env

pytestmark = pytest.mark.slow


@pytest.fixture
def own_smoke(smoke, tmp_path) -> Path:
    """The finished smoke study, a copy of its own for a test that changes it."""
    return study_copy(smoke, tmp_path / "smoke")


def job_counts(dry_run_output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run, as {rule: count}."""
    if "Nothing to be done" in dry_run_output:
        return {}
    table = dry_run_output.split("Job stats:")[1].split("Reasons:")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "total"}


def test_smoke_outputs_exist_and_are_finite(smoke):
    cfg = load(smoke / "config/smoke.yaml")
    at = Layout(cfg)
    runs = pd.read_csv(smoke / at.table("runs.csv"))
    # the sweep's runs and its edge-extension round's: every method whose best lr after the sweep was on an
    # edge (the learned temperature's two-point grid always is) ran the next lr past it on the sweep's seeds
    after_sweep = pd.read_csv(smoke / at.select_round(0)).set_index(["regime", "model", "method"])
    extended = after_sweep[after_sweep.next_lr.notna()]
    assert len(extended) >= len(cfg.models) and set(extended.edge) <= {"low", "high"}
    assert len(runs) == len(cfg.runs()) + len(extended) * len(cfg.seeds)
    for (regime, model, method), row in extended.iterrows():
        tried = runs[(runs.regime == regime) & (runs.model == model) & (runs.method == method)]
        assert row.next_lr in set(tried.lr) and row.next_lr not in cfg.lr_grid(regime, method)
        assert (smoke / at.extension(1).evaluation(regime, model, method)).is_file()
    final = pd.read_csv(smoke / at.table("best_lr.csv")).set_index(["regime", "model", "method"])
    assert (final.extended == final.index.map(lambda k: int(k in extended.index))).all()
    assert (runs.status == "completed").all()
    for column in ("val_score", "test_score", "val_greedy_accuracy", "test_pass_at_1", "trainable_parameters"):
        assert runs[column].map(math.isfinite).all(), column
    for model in cfg.models:
        base = read_json(smoke / at.model(model) / "rankone.json")
        assert 0.0 <= base["base_pass_at_1"] <= 1.0
        assert (smoke / at.rollouts(model) / "summary.json").is_file()
    verdicts = pd.read_csv(smoke / at.table("verdicts.csv"))
    assert set(verdicts.verdict) <= {"parity", "small", "worse", "better", "inconclusive", "not judged"}
    # what each verdict is about: RL's from FullFT's gain in sharpening.csv (not judged without one)
    assert set(verdicts[verdicts.regime == "rl"].about) <= {"learning", "sharpening", "not judged", "one seed"}
    assert set(verdicts[verdicts.regime == "sft"].about) == {"not measured"}
    assert {"p_equivalence", "p_difference", "p_equivalence_adjusted", "family"} <= set(verdicts.columns)
    assert set(verdicts[verdicts.family == "primary"].method) == {"lora-r1"}
    pairs = sum(len(cfg.models) * (len(cfg.regime_methods(g)) - 1) for g in cfg.regimes)
    assert len(verdicts) == 2 * pairs  # the score and greedy accuracy
    assert set(verdicts.metric) == {"score", "greedy_accuracy"}
    assert (pd.read_csv(smoke / at.table("plateau.csv")).method == "fullft").sum() == len(cfg.models)
    # sharpening or learning: the base, the temperature controls (the base at its best temperature and the
    # learned one, a method of the grid) and every RL method, whole test split
    sharp = pd.read_csv(smoke / at.table("sharpening.csv"))
    for model in cfg.models:
        rows = sharp[sharp.model == model].set_index("method")
        assert {"base", "control: base at best temperature", *cfg.regime_methods("rl")} == set(rows.index)
        assert rows.loc["control: base at best temperature", "temperature"] in cfg.sharpening.temperatures
        assert rows[[f"pass_at_{k}" for k in cfg.sharpening.pass_at]].diff(axis=1).iloc[:, 1:].ge(0).all().all()
        summary = read_json(smoke / at.rollouts(model) / "summary.json")["sharpening"]
        assert summary["temperatures"]["1"]["test"]["prompts"] == cfg.tasks["rl"].params["n_test"]
        contenders = [m for m in cfg.regime_methods("rl") if m not in CONTROL_METHODS]
        assert set(rows.loc[contenders, "reads"]) <= {"learning", "sharpening", "no gain", "one seed"}
        assert (rows.loc[["temperature", "majority"], "reads"] == "control").all()  # both trained controls
        for value in ("mean_reward", "greedy_accuracy"):
            assert (
                rows.loc[contenders, f"{value}_control"]
                .isin(["learned temperature", "majority-vote reward", "base at best temperature"])
                .all()
            )
    # the tail: every run scored at each late checkpoint; the verdicts at each, and whether they agree
    checkpoints = pd.read_csv(smoke / at.table("checkpoints.csv"))
    assert set(checkpoints[checkpoints.regime == "rl"].step) == set(tail_steps(cfg.evaluate.at, cfg.rl.steps))
    assert verdicts.stable.dtype == bool and verdicts.by_step.str.contains(" at ").all()
    trajectory = pd.read_csv(smoke / at.table("trajectory.csv"))
    assert len(trajectory) == len(verdicts) * len(tail_steps(cfg.evaluate.at, cfg.rl.steps))
    # RL's verdicts are judged on the confirmation seeds alone, at the lrs the select checkpoint chose
    confirmed = pd.read_csv(smoke / at.table("confirm_runs.csv"))
    assert set(confirmed.seed) == set(cfg.confirmation.seeds["rl"]) and set(confirmed.regime) == {"rl"}
    # the sharpening profile is taken of the runs that judge (here the confirmation runs), not the sweep's
    assert (confirmed.profile_prompts == cfg.tasks["rl"].params["n_test"]).all()
    assert "profile_prompts" not in runs or runs[runs.regime == "rl"].profile_prompts.isna().all()
    best = pd.read_csv(smoke / at.table("best_lr.csv"))
    assert len(confirmed.merge(best, on=["regime", "model", "method", "lr"])) == len(confirmed)
    assert (verdicts[verdicts.regime == "rl"].seeds == len(cfg.confirmation.seeds["rl"])).all()
    report = smoke / at.report
    for name in (
        "report.md",
        "report.html",
        "forest.png",
        "trajectory.png",
        "rl_curves.png",
        "sft_curves.png",
        "lr_sweep.png",
        "information.png",
        "rl_bits.png",
        "sharpening.png",
    ):
        assert (report / name).stat().st_size > 0, name
    text = (report / "report.md").read_text()
    # the report opens with the answer: the forest plot, then one sentence per (regime, model)
    assert (
        text.index("## The answer")
        < text.index("forest.png")
        < text.index("**RL · llama-tiny**")
        < text.index("## Verdicts")
    )
    assert text.count("margin ±") >= len(cfg.regimes) * len(cfg.models)
    sharpening = text[text.index("## Sharpening or learning") : text.index("## Verdicts")]
    assert "sharpening.png" in sharpening and "nan" not in sharpening and "**llama-tiny**" in sharpening


def test_a_study_without_rl_gets_no_rl_figure_on_its_page(smoke, monkeypatch, tmp_path):
    """The page's sections follow the study's regimes: without RL, no RL curves, no bits by RL and no
    sharpening profile (they would be empty axes), even from tables that hold RL rows; the report
    stage draws exactly the figures its page shows (rankone.figures.drawn), none left unshown."""
    from rankone.figures import drawn
    from rankone.outputs import FIGURES
    from rankone.report import build_sections, run, tables

    monkeypatch.chdir(smoke)
    cfg = load("config/smoke.yaml")
    at = Layout(cfg)

    def figures(study) -> set[str]:
        return {b[1] for _, blocks in build_sections(study, at, **tables(at)) for b in blocks if isinstance(b, tuple)}

    rl_only = {"rl_curves.png", "rl_bits.png", "sharpening.png"}
    sft_only = cfg.model_copy(update={"regimes": ["sft"]})
    assert rl_only <= figures(cfg) and not rl_only & figures(sft_only) and not rl_only & set(drawn(sft_only))
    assert "sft_curves.png" not in drawn(cfg.model_copy(update={"regimes": ["rl"]}))
    for study in (cfg, sft_only):  # the report stage draws what the page shows (and the levers' own), no more
        assert figures(study) <= set(drawn(study))
        assert {n for n in drawn(study) if FIGURES[n].experiment is None} <= figures(study)
    # and writes no other PNG: an SFT-only study's report folder has no RL figure in it
    elsewhere = sft_only.model_copy(update={"reports_dir": str(tmp_path)})
    run(elsewhere, Layout(elsewhere))
    assert sorted(p.name for p in (tmp_path / cfg.experiment).glob("*.png")) == sorted(drawn(elsewhere))


def test_status_counts_the_extension_rounds_and_confirmation_runs(smoke, monkeypatch):
    from rankone.status import grid

    monkeypatch.chdir(smoke)
    cfg = load("config/smoke.yaml")
    statuses = grid(cfg)
    extended = [s for s in statuses if s.sub_study == "extend r1"]
    assert extended and all(s.state == "completed" for s in extended)
    assert all(s.run.lr not in cfg.lr_grid(s.run.regime, s.run.method) for s in extended)
    confirmed = [s for s in statuses if s.sub_study == "confirm rl"]  # the runs the verdicts are judged on
    assert len(confirmed) == sum(len(cfg.regime_methods("rl")) * len(cfg.models) for _ in cfg.confirmation.seeds["rl"])
    assert all(s.state == "completed" for s in confirmed)


def test_every_evaluation_keeps_what_each_checkpoint_sampled_on_test(smoke):
    """samples.jsonl beside each evaluation: one line per test sample of each run at every evaluated
    checkpoint, whose rewards average to the run's test mean reward there in metrics.jsonl."""
    cfg = load(smoke / "config/smoke.yaml")
    at = Layout(cfg)
    metrics = smoke / at.evaluation("rl", cfg.models[0], "fullft")
    scored = {r["run"]: r for r in read_jsonl(metrics)}
    kept = pd.DataFrame(read_jsonl(metrics.with_name("samples.jsonl")))
    assert set(kept.run) == set(scored) and (kept.split == "test").all()
    for run, samples in kept.groupby("run"):
        checkpoints = {c["step"]: c["test"] for c in scored[run]["checkpoints"]}
        assert set(samples.step) == set(checkpoints) and len(checkpoints) > 1
        for step, at_step in samples.groupby("step"):
            assert len(at_step) == checkpoints[step]["prompts"] * cfg.evaluate.samples_per_prompt
            assert at_step.reward.mean() == pytest.approx(checkpoints[step]["mean_reward"])
        assert samples.completion.map(lambda t: isinstance(t, str)).all() and samples.prompt.nunique() > 1
    report = (smoke / at.report / "report.md").read_text().split("## Samples")[1].split("\n## ")[0]
    for method in cfg.methods:
        assert f"| {method} " in report, method  # each method's samples on the page


def test_smoke_capacity_experiment_sits_beside_the_rl_runs(smoke):
    cfg = load(smoke / "config/smoke.yaml")
    at = Layout(cfg)
    table = pd.read_csv(smoke / at.table("capacity.csv"))
    assert len(table) == len(cfg.capacity.n_facts) * len(cfg.models) * len(cfg.capacity.methods)
    assert sorted(table.n_facts.unique()) == cfg.capacity.n_facts
    assert table.bits_absorbed.map(math.isfinite).all()
    assert (table.bits_stored == (table.dataset_bits - table.train_nll_bits_final).clip(lower=0)).all()
    assert (table.share_stored == table.bits_stored / table.dataset_bits).all()
    chart = pd.read_csv(smoke / at.table("capacity_chart.csv"))
    assert set(chart.regime) == {"rl", "sft"}  # both regimes on one chart
    falloff = pd.read_csv(smoke / at.table("capacity_falloff.csv"))
    assert len(falloff) == len(cfg.capacity.n_facts) * len(cfg.models)
    for name in ("capacity.png", "capacity_falloff.png", "crossover.png"):
        assert (smoke / at.report / name).stat().st_size > 0, name
    assert "## Capacity" in (smoke / at.report / "report.md").read_text()
    # Bits recalled from the whole table: every key of each size, at every scored checkpoint.
    n = cfg.capacity.n_facts[-1]
    evaluations = read_jsonl(smoke / at.capacity(n).evaluation("sft", cfg.models[0], "fullft"))
    assert all(c["table"]["keys"] == n for e in evaluations for c in e["checkpoints"])
    cross = pd.read_csv(smoke / at.table("crossover.csv"))
    assert set(cross.regime) == {"sft"} and cross.bits_recalled.between(0, cross.table_bits).all()
    assert len(cross) == len(table)


def test_smoke_truncation_reproduces_the_evaluation_at_full_rank(smoke):
    cfg = load(smoke / "config/smoke.yaml")
    at = Layout(cfg)
    df = pd.read_csv(smoke / at.table("truncation.csv"))
    fullft_rl = [r for r in cfg.runs() if r.regime == "rl" and r.method == "fullft"]
    assert len(df.groupby(["model", "lr", "seed"])) == len(fullft_rl)
    assert sorted(df.k.unique()) == [1, 2, 4, 8, 16, 32, 64]  # hidden size 64: full rank 64
    full = df[df.full]
    assert (full.kept_mean_reward.dropna() == 1.0).all()
    # full rank is the trained model itself, scored as the evaluate stage scored it
    for model in cfg.models:
        evaluated = {
            r["run"]: r["test"]["mean_reward"]
            for r in map(json.loads, (smoke / at.evaluation("rl", model, "fullft")).read_text().splitlines())
        }
        for r in full[full.model == model].itertuples():
            run = next(x for x in fullft_rl if (x.model, x.lr, x.seed) == (model, r.lr, r.seed))
            assert r.mean_reward == evaluated[run.path]
    moved = df[df.groupby(["model", "lr", "seed"]).energy_kept.transform("count") == df.k.nunique()]
    assert (moved.energy_kept <= 1.0 + 1e-9).all()  # NaN only for a run whose update is zero (no signal)
    assert moved.groupby(["model", "lr", "seed"]).energy_kept.is_monotonic_increasing.all()
    assert (smoke / at.report / "truncation.png").stat().st_size > 0
    assert "## How much rank RL uses" in (smoke / at.report / "report.md").read_text()


def test_smoke_levers_run_at_plain_rls_episodes_and_are_judged_against_it(smoke):
    cfg = load(smoke / "config/smoke.yaml")
    at = Layout(cfg)
    table = pd.read_csv(smoke / at.table("levers.csv"))
    pairs = len(cfg.levers.variants) * len(cfg.models) * len(cfg.levers.methods)
    G = cfg.rl.group_size
    # The smoke task states a confidence, so Brier score and calibration error are judged too.
    metrics = {"score", "pass_at_1", f"pass_at_{G}", "brier", "ece"}
    assert len(table) == len(metrics) * pairs and set(table.metric) == metrics
    assert (table.seeds == len(cfg.levers.seeds)).all()
    assert set(table.verdict) <= {"parity", "small", "better", "worse", "inconclusive"}
    passes = pd.read_csv(smoke / at.table("levers_pass_at_k.csv"))
    assert sorted(passes.k.unique()) == list(range(1, G + 1))
    assert (passes.groupby(["lever", "model", "method", "seed"]).pass_at_k.is_monotonic_increasing).all()
    eff = pd.read_csv(smoke / at.table("levers_efficiency.csv"))
    assert set(eff.lever) == {"plain", *cfg.levers.variants}
    assert (eff.episodes == cfg.rl.episode_budget).all()  # the filtered lever too: equal episodes
    resolved = load(smoke / at.study_config)  # default.yaml under smoke.yaml, as the workflow ran it
    for name in cfg.levers.variants:
        sub = resolved.lever_study(name)
        for run in sub.runs():
            assert read_json(smoke / at.lever(name).train(run) / "run.json")["resolved_config"][
                "rl"
            ] == sub.rl.model_dump(mode="json")
    assert (smoke / at.report / "levers.png").stat().st_size > 0
    assert "## Levers" in (smoke / at.report / "report.md").read_text()
    curves = pd.read_csv(smoke / at.table("levers_calibration.csv"))
    assert set(curves.lever) == {"plain", *cfg.levers.variants}
    per_run = curves.groupby(["lever", "model", "method", "seed"]).step.count()
    assert len(per_run) == (1 + len(cfg.levers.variants)) * pairs / len(cfg.levers.variants) * len(cfg.levers.seeds)
    assert per_run[("calibration", *per_run.index[0][1:])] == per_run[("plain", *per_run.index[0][1:])] == cfg.rl.steps
    assert curves.brier.between(0, 1).all() and curves.ece.between(0, 1).all()
    assert (smoke / at.report / "levers_calibration.png").stat().st_size > 0
    calibrated = read_jsonl(
        smoke / at.lever("calibration").train(next(iter(resolved.lever_study("calibration").runs()))) / "metrics.jsonl"
    )
    assert all(s["train_reward"] <= s["reward"] for s in calibrated)  # the Brier term only takes away


def test_turning_on_truncation_in_a_finished_study_runs_it_and_the_report_only(own_smoke):
    """What `make truncation` after `make study` does: the new stage and the report, nothing else."""
    at = Layout(load(own_smoke / "config/smoke.yaml"))
    for name in ("truncation.csv", "truncation_summary.csv", "truncation.json"):
        (own_smoke / at.table(name)).unlink()
    (own_smoke / at.report / "truncation.png").unlink()
    out = snakemake(own_smoke, "-n")
    assert out.returncode == 0, out.stderr
    assert job_counts(out.stdout + out.stderr) == {"truncation": 1, "report": 1, "all": 1}


def test_a_fresh_study_plans_the_sweep_and_select_before_any_confirmation_run(tmp_path):
    cfg = load(ROOT / "config/smoke.yaml")
    workdir = copy_workflow(tmp_path)
    out = snakemake(workdir, "-n")
    assert out.returncode == 0, out.stderr[-3000:]
    counts = job_counts(out.stdout + out.stderr)
    assert counts["train"] == len(cfg.runs()) // len(cfg.seeds) and counts["select"] == 1
    assert not {rule for rule in counts if rule.startswith("confirm_")}  # they exist once select has chosen
    assert not (tmp_path / "results").exists()  # a dry run writes nothing, not even the resolved config
    lint = snakemake(workdir, "--lint")
    assert lint.returncode == 0, lint.stderr[-3000:]
    assert not (workdir / "results").exists()  # nor does a lint (.ci/run lints a fresh clone)


def test_a_target_off_the_grid_stops_before_any_job(tmp_path):
    workdir = copy_workflow(tmp_path)
    for cell, message in [
        (
            "rl/llama-tiny/lora-r1/lr0.5",
            r"lr 0.5 is not in learning_rates.rl.lora \[0.01\], nor an lr an edge-extension",
        ),
        ("rl/llama-tiny/lora-r7/lr0.01", r"the study has no such cell"),
    ]:
        target = f"results/smoke/train/{cell}/seed0/run.json"  # before --configfile, which takes every word after it
        out = snakemake(workdir, "-n", target, "--configfile", "config/smoke.yaml", configs=())
        assert out.returncode != 0 and re.search(message, out.stdout + out.stderr), cell
    assert not (workdir / "results/smoke/data").exists()


def test_second_run_does_nothing(smoke):
    out = snakemake(smoke, "-n")
    assert out.returncode == 0, out.stderr
    assert job_counts(out.stdout + out.stderr) == {}


def test_rewritten_choice_tables_rerun_no_run(own_smoke):
    """The select tables name which confirmation and extension runs to make (the lr is in each run's
    path): tables newer than runs they still name retrain and re-evaluate nothing. The case of a study
    whose runs were copied in by scripts/share-runs before its own select chose: no Snakemake record
    of the runs (whose checksums would otherwise excuse a table's newer time), tables written after
    them. What reads the choices reruns. Without `ancient` on those inputs: 4 confirmation runs,
    an extension run and its evaluation, and select again."""
    at = Layout(load(own_smoke / "config/smoke.yaml"))
    tables = [own_smoke / at.table("best_lr.csv"), *(own_smoke / at.table("best_lr.csv")).parent.glob("rounds/*.csv")]
    assert len(tables) > 1  # the smoke study has an extension round
    shutil.rmtree(own_smoke / ".snakemake/metadata")
    later = time.time() + 60
    for table in tables:
        os.utime(table, (later, later))
    out = snakemake(own_smoke, "-n")
    assert out.returncode == 0, out.stderr
    counts = job_counts(out.stdout + out.stderr)
    assert counts["analysis"] == 1  # it reads the choices
    assert not {r for r in counts if r.startswith(("confirm_", "train", "evaluate", "extend_"))}, counts


def dry_run_with(smoke: Path, edit) -> tuple[dict, dict]:
    """A dry run after `edit(config dict)` on the smoke config of a private copy: (config, job counts)."""
    path = smoke / "config/smoke.yaml"
    cfg = yaml.safe_load(path.read_text())
    edit(cfg)
    path.write_text(yaml.safe_dump(cfg))
    out = snakemake(smoke, "-n")
    assert out.returncode == 0, out.stderr
    return cfg, job_counts(out.stdout + out.stderr)


def test_changing_one_learning_rate_reruns_only_its_jobs(own_smoke):
    cfg, counts = dry_run_with(own_smoke, lambda c: c["learning_rates"]["rl"].update(fullft=[0.002]))
    # the new lr's cells train (one job per model and method on FullFT's grid, all seeds); their
    # evaluations, the FullFT update analysis and truncation, the analysis, the capacity chart
    # (it shows the RL runs), the levers stage (plain RL is its baseline) and the report
    # follow; nothing else (no data, models, rollouts, capacity or lever runs). The select
    # checkpoint reruns; which confirmation runs follow is known only once it has chosen.
    on_grid = len([m for m in cfg["methods"] if m in ("fullft", "majority")])  # the majority control: FullFT's grid
    assert counts == {
        "train": len(cfg["models"]) * on_grid,
        "evaluate": len(cfg["models"]) * on_grid,
        "select": 1,
        "select_round": 1,  # the sweep's choice before the extension round
        "updates": 1,
        "truncation": 1,
        "analysis": 1,
        "capacity": 1,
        "levers": 1,
        "report": 1,
        "all": 1,
    }


def test_changing_the_sft_task_rebuilds_the_base_models(own_smoke):
    """The warm-start reads the SFT task's warm-up table, so its base models depend on tasks.sft."""
    cfg, counts = dry_run_with(own_smoke, lambda c: c["tasks"]["sft"]["params"].update(digits=3))
    assert counts["models"] == len(cfg["models"]) and counts["data"] == 1  # the SFT data only
    assert counts["train"] == len(load(own_smoke / "config/smoke.yaml").runs()) // len(cfg["seeds"])


def test_a_layered_config_switches_the_rl_task(smoke, tmp_path):
    layer = tmp_path / "facts-rl.yaml"
    # levers off too: the smoke study's calibration lever needs a task that states a confidence
    layer.write_text(
        yaml.safe_dump(
            {
                "experiment": "facts-rl",
                "capacity": None,
                "levers": None,
                "tasks": {"rl": {"name": "facts", "params": {"n_facts": 64, "digits": 1, "n_val": 16, "n_test": 16}}},
            }
        )
    )
    out = snakemake(smoke, "-n", configs=("config/smoke.yaml", str(layer)))
    assert out.returncode == 0, out.stderr[-3000:]
    assert not (smoke / "results/facts-rl").exists()  # a dry run writes nothing, not even the resolved config
    # what the workflow resolves (common.smk: the Snakefile's configfile, then each --configfile, layered)
    files = [smoke / "config/default.yaml", smoke / "config/smoke.yaml", layer]
    resolved = validate(layered_files(files)).model_dump(mode="json")
    assert resolved["tasks"]["rl"] == {
        "name": "facts",
        "params": {"n_facts": 64, "digits": 1, "n_val": 16, "n_test": 16},
        "confidence": False,
    }


def test_provenance_names_the_stage_its_config_and_code(smoke):
    from rankone.config import layered_files, validate
    from rankone.io import CPU_KERNELS
    from rankone.stages import config_digest, source_digest

    # the study as the workflow resolved it: the Snakefile's configfile, then --configfile
    cfg = validate(layered_files([smoke / "config/default.yaml", smoke / "config/smoke.yaml"]))
    run = cfg.runs()[0]
    prov = read_json(smoke / Layout(cfg).train(run) / "run.json")["provenance"]
    assert prov["stage"] == "train" and prov["config_digest"] == config_digest(cfg, "train", run.regime)
    assert prov["code_digest"] == source_digest("train", cfg, smoke / "src/rankone")
    assert prov["cpu"]["switches"] == CPU_KERNELS[cfg.cpu_kernels]  # set inside the job
    manifest = read_json(smoke / Layout(cfg).data("sft") / "manifest.json")["provenance"]
    assert manifest["stage"] == "data" and manifest["config_sections"] == ["seed", "tasks.sft"]


def test_rankone_cli_reruns_a_single_job(own_smoke):
    smoke = own_smoke
    cfg = load(smoke / "config/smoke.yaml")
    run = cfg.runs()[0]
    metrics = smoke / Layout(cfg).train(run) / "metrics.jsonl"
    before = metrics.read_bytes()
    env = venv_env()
    out = subprocess.run(
        ["rankone", "train", "--config", "config/smoke.yaml", "--run", run.path],
        cwd=smoke,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert metrics.read_bytes() == before  # same job, same bytes

    n, capacity_run = cfg.capacity.n_facts[0], cfg.capacity_study(cfg.capacity.n_facts[0]).runs()[0]
    metrics = smoke / Layout(cfg).capacity(n).train(capacity_run) / "metrics.jsonl"
    before = metrics.read_bytes()
    out = subprocess.run(
        ["rankone", "train", "--config", "config/smoke.yaml", "--run", capacity_run.path, "--capacity", str(n)],
        cwd=smoke,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert metrics.read_bytes() == before

    at = Layout(cfg.model_copy(update={"results_dir": str(smoke / "results")}))
    confirm_run = cfg.confirm_study(chosen(at), "rl").runs()[0]  # at the lr the select checkpoint chose
    metrics = at.confirm().train(confirm_run) / "metrics.jsonl"
    before = metrics.read_bytes()
    out = subprocess.run(
        ["rankone", "train", "--config", "config/smoke.yaml", "--run", confirm_run.path, "--confirm"],
        cwd=smoke,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert metrics.read_bytes() == before  # a confirmation run, by hand: the same bytes

    lever = next(iter(cfg.levers.variants))  # the variance filter's lever: refills and all
    lever_run = cfg.lever_study(lever).runs()[0]
    metrics = smoke / Layout(cfg).lever(lever).train(lever_run) / "metrics.jsonl"
    before = metrics.read_bytes()
    out = subprocess.run(
        ["rankone", "train", "--config", "config/smoke.yaml", "--run", lever_run.path, "--lever", lever],
        cwd=smoke,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert metrics.read_bytes() == before


@pytest.fixture(scope="module")
def smoke_vllm(smoke):
    """The vLLM smoke study (its own experiment): started with the session under RANKONE_SLURM=1
    (tests/conftest.py), else run here beside the smoke study."""
    pytest.importorskip("vllm")
    if started("smoke-vllm"):
        return finished_study("smoke-vllm")
    done = snakemake(smoke, configs=("config/smoke.yaml", "config/smoke-vllm.yaml"))
    assert done.returncode == 0, done.stderr[-4000:]
    return smoke


def test_vllm_smoke_study_matches_the_hf_engine(smoke, smoke_vllm):
    from scipy import stats

    curves = {}
    for experiment in ("smoke", "smoke-vllm"):
        at = (smoke_vllm if experiment == "smoke-vllm" else smoke) / "results" / experiment
        frame = pd.read_csv(at / "analysis/curves.csv")
        curves[experiment] = frame[frame.regime == "rl"].sort_values(["model", "method", "lr", "seed", "step"])
        for run in (at / "train/rl").glob("*/*/*/*/run.json"):
            info = read_json(run)
            assert info["status"] == "completed" and info["engine"] == ("vllm" if "vllm" in experiment else "hf")
    vllm = curves["smoke-vllm"]
    hf = curves["smoke"]
    ran = set(zip(vllm.model, vllm.method, vllm.lr))  # Qwen3, the majority reward, other lrs: the hf smoke's only
    hf = hf[[key in ran for key in zip(hf.model, hf.method, hf.lr)]]
    assert len(hf) == len(vllm) > 0
    # Same seeds, different samplers' random streams: the reward curves must not differ beyond chance.
    assert stats.mannwhitneyu(hf.value, vllm.value).pvalue > 0.01 or hf.value.equals(vllm.value)
    gaps = pd.read_csv(smoke_vllm / "results/smoke-vllm/analysis/runs.csv")
    assert (gaps.status == "completed").all()


def test_an_interrupted_study_resumes_under_the_default_profile(tmp_path):
    """A run killed in the middle of a job (a hard kill, or Ctrl-C before Snakemake has cleaned up)
    leaves its outputs marked incomplete, and a plain `snakemake` then refuses to start; the default
    profile's rerun-incomplete makes `make study` again resume (each train job from its own
    checkpoints, tests/test_resume.py). SIGKILL, because after a SIGINT Snakemake sometimes removes
    the job's outputs and its mark itself (then a rerun just runs the job), depending on which it
    handles first."""
    shutil.copytree(ROOT / "workflow/profiles/default", tmp_path / "workflow/profiles/default")
    (tmp_path / "workflow/Snakefile").write_text(
        'rule slow:\n    output: "out.txt"\n    shell: "echo partial > {output}; touch started; sleep 120"\n'
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1"],
        cwd=tmp_path,
        env=venv_env(),
        start_new_session=True,  # its own process group: the kill reaches the job too
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # Snakemake's start takes about 10 s here, over a minute on a loaded machine (the whole suite on
    # two workers): kill it only once the job runs.
    deadline = time.monotonic() + 300
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (tmp_path / "started").exists(), "the job never started"
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(timeout=60)
    # Snakemake's mark of an output left incomplete, which a plain rerun refuses to start over
    # (IncompleteFilesException); each Snakemake start costs about 10 s here, so that is not rerun.
    assert any((tmp_path / ".snakemake/incomplete").iterdir())
    resumed = snakemake(tmp_path, "-n", configs=(), cores=False)  # a dry run takes no lock: no --unlock
    said = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, said[-2000:]
    assert job_counts(said) == {"slow": 1}, said[-2000:]  # planned again (rerun-incomplete: "Forced execution")
