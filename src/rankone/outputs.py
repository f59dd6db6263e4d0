"""Every table and figure a study writes, named once.

- A table's file name and the stage module that writes it; the module names its results
  folder (results/<experiment>/<module>/, rankone.paths.Layout.table), and, for an optional
  experiment, the config section that turns it on.
- A figure's file name, caption, report section and experiment. The report page
  (rankone.report), the published page (rankone.publish), Snakemake's `report()` outputs and
  their caption files (workflow/rules/report.smk, workflow/report/*.rst, `rankone captions`)
  all read them from here.

Plain data: nothing here imports the rest of rankone.
"""

from __future__ import annotations

from dataclasses import dataclass

# The report's sections that hold figures, by key: the heading on the report and published
# pages, and the category of Snakemake's report.
SECTIONS = {
    "answer": "The answer",
    "sharpening": "Sharpening or learning",
    "rl_curves": "RL learning curves",
    "lr_sweep": "Learning-rate sweeps",
    "lr_rank": "Learning rate vs rank",
    "updates": "Update structure (FullFT)",
    "sft_curves": "SFT loss curves",
    "information": "Information vs capacity",
    "capacity": "Capacity",
    "truncation": "How much rank RL uses",
    "levers": "Levers",
}

# What `rankone crossover` writes beside its table and figure: the studies it read, one per table
# size, and each one's time from first job to last; `rankone publish` publishes a crossover from it.
CROSSOVER_RECORD = "crossover.json"

# The config sections that turn on an optional experiment (each also the stage, module and
# results folder that writes its tables).
EXPERIMENTS = ("capacity", "truncation", "levers")


@dataclass(frozen=True)
class Table:
    stage: str  # the module that writes it, and its folder under the study's results
    experiment: str | None = None  # the config section that turns it on; None: every study


@dataclass(frozen=True)
class Figure:
    caption: str
    section: str  # a key of SECTIONS
    experiment: str | None = None


def _tables(stage: str, names: str, experiment: str | None = None) -> dict[str, Table]:
    return {name: Table(stage, experiment) for name in names.split()}


TABLES = {
    # select (best_lr.csv) and analysis, both rankone.analysis
    **_tables(
        "analysis",
        "best_lr.csv runs.csv confirm_runs.csv curves.csv checkpoints.csv verdicts.csv "
        "trajectory.csv information.csv lr_vs_rank.csv lr_optimum.csv early_curves.csv layers.csv plateau.csv "
        "sharpening.csv pooled.csv replicas.csv summary.json",
    ),
    **_tables("updates", "update_shares.csv update_matrices.csv update_overlap.csv"),
    **_tables("capacity", "capacity.csv capacity_falloff.csv capacity_chart.csv crossover.csv", "capacity"),
    **_tables("truncation", "truncation.csv truncation_summary.csv truncation.json", "truncation"),
    **_tables("levers", "levers.csv levers_efficiency.csv levers_pass_at_k.csv levers_calibration.csv", "levers"),
}

FIGURES = {
    "forest.png": Figure(
        "The answer: each LoRA rank's test gap to FullFT (each at its best lr on val, paired by seed) with its "
        "confidence interval; shaded: the equivalence margin fixed before the run. Parity only when the whole "
        "interval lies inside the band.",
        "answer",
    ),
    "trajectory.png": Figure(
        "The verdict at every late checkpoint: each LoRA rank's test gap to FullFT at that step (at the learning "
        "rates the tail score chose, paired by seed) with its interval; shaded: the margin. Colour = the verdict "
        "at that step; a stable verdict keeps one colour.",
        "answer",
    ),
    "sharpening.png": Figure(
        "Sharpening or learning (RL): test pass@k against k on the whole test split, for the base model, the "
        "sharpening control (the base at its best val temperature, no training) and each method's final weights "
        "at its best lr (mean over the judged seeds); the square at the left is greedy accuracy. Sharpening lifts "
        "small k towards the greedy value and leaves large k; learning lifts greedy accuracy and large k too.",
        "sharpening",
    ),
    "rl_curves.png": Figure(
        "RL reward per step, each method at its best learning rate (mean over seeds, band = min..max).", "rl_curves"
    ),
    "lr_sweep.png": Figure(
        "Validation score against learning rate per method (mean over seeds, bars = min..max).", "lr_sweep"
    ),
    "sft_curves.png": Figure(
        "SFT training loss per step, each rank at its best learning rate (mean over seeds).", "sft_curves"
    ),
    "rl_bits.png": Figure(
        "RL information per step, each method at its best lr (mean over seeds): entropy of the batch's rewards "
        "and of a group's rewards (what its advantages carry), and the cumulative bound.",
        "information",
    ),
    "information.png": Figure(
        "Information in bits against trainable parameters, with the capacity reference line: RL's information "
        "bound, SFT's bits absorbed (NLL drop from the base, format included) and, on a table of known bits, the "
        "bits stored (table minus final NLL; drawn at 1 when none).",
        "information",
    ),
    "lr_vs_rank.png": Figure(
        "Best learning rate per LoRA rank (chosen on val); dashed: FullFT's best, dotted: 10x FullFT's.", "lr_rank"
    ),
    "updates.png": Figure(
        "FullFT updates: share of parameters changed three ways, and per-matrix update rank / full rank.", "updates"
    ),
    "capacity.png": Figure(
        "Capacity chart: bits stored by SFT on facts tables of each size (filled: not shown worse than FullFT, "
        "open: falls off) and RL information bounds, against trainable parameters; dashed: capacity line.",
        "capacity",
        "capacity",
    ),
    "capacity_falloff.png": Figure(
        "Share of the facts table stored against table size, per method at its best lr; open markers: LoRA "
        "falls off FullFT (worse under the equivalence rule).",
        "capacity",
        "capacity",
    ),
    "crossover.png": Figure(
        "Bits recalled (greedy recall of every key of the table, Fano) against the table's bits, per method at "
        "its lr, RL beside SFT on the same tables (mean over seeds, bars = t interval; dotted: the whole table; "
        "dashed: the most bits each rank-1 adapter recalled by SFT at any size, its SFT capacity where it held the "
        "smaller tables whole; open: FullFT had not reached its plateau, not judged).",
        "capacity",
        "capacity",
    ),
    "truncation.png": Figure(
        "Share of FullFT's RL gain over the base kept when every weight update is cut to its top k singular "
        "directions (test; FullFT at its best lr, mean over seeds with its t interval); dashed: share of the "
        "updates' squared norm in those k directions.",
        "truncation",
        "truncation",
    ),
    "levers.png": Figure(
        "Each RL lever minus plain RL on test (each at its best lr on val, paired by seed, equal episodes) with "
        "its confidence interval, for mean reward, pass@1 and pass@group size; shaded: the equivalence margin. "
        "Colour = verdict.",
        "levers",
        "levers",
    ),
    "levers_pass_at_k.png": Figure(
        "Test pass@k against k (up to the group size) of plain RL and each lever, every method at its best lr "
        "(mean over seeds).",
        "levers",
        "levers",
    ),
    "levers_calibration.png": Figure(
        "Brier score (top) and calibration error (bottom) of the confidences stated in each step's sampled "
        "batch, plain RL against each lever, every method at its best lr (mean over seeds, smoothed); lower is "
        "better.",
        "levers",
        "levers",
    ),
}

# Drawn only where the RL task states a confidence (rankone.report.levers_section).
NEEDS_CONFIDENCE = ("levers_calibration.png",)


def section(figure: str) -> str:
    """The heading of the report section a figure is in."""
    return SECTIONS[FIGURES[figure].section]


def enabled_experiments(cfg) -> list[str]:
    """The optional experiments a study runs: those whose config section (cfg.<experiment>) is set."""
    return [experiment for experiment in EXPERIMENTS if getattr(cfg, experiment) is not None]


def experiment_tables(experiment: str) -> list[str]:
    """The tables an optional experiment's stage writes."""
    return [name for name, t in TABLES.items() if t.experiment == experiment]
