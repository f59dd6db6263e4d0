# Shared helpers: the validated study, its output layout, and per-stage digests of the
# config and code each stage reads (the table in rankone.stages). The digests are rule
# params, so Snakemake reruns a job exactly when what it depends on changes.
import functools
from pathlib import Path

from rankone import substudies
from rankone.analysis import extension_lrs
from rankone.cli import write_resolved
from rankone.cluster import check_slurm_controller
from rankone.checks import validate as validate_study
from rankone.config import CELL_TEMPLATE, METHOD_REGEX, layered_files, method_kind
from rankone.figures import drawn
from rankone.io import InputError
from rankone.outputs import enabled_experiments, experiment_tables, section
from rankone.paths import Layout
from rankone.stages import config_digest, source_digest

# The Snakefile's configfile, then each --configfile, then --config values, layered by
# rankone.config.layer, under which a task that changes its name drops the old params.
CLI_CONFIGFILES = [Path(f).absolute() for f in workflow.config_settings.configfiles]
CONFIGFILES = [
    f for f in workflow.configfiles if Path(f).absolute() not in CLI_CONFIGFILES
]
STUDY = validate_study(
    layered_files(CONFIGFILES + CLI_CONFIGFILES, workflow.config_settings.config)
)
LAYOUT = Layout(STUDY)
RESULTS = str(LAYOUT.root)
REPORT = str(LAYOUT.report)
STUDY_CONFIG = str(LAYOUT.study_config)
# One train job trains every seed of a cell: one process, one set of imports.
CELL = CELL_TEMPLATE
# A capacity sub-study (one facts-table size) mirrors the study's data/train/evaluate
# layout under capacity/n<size>/ and shares its base models.
CAPACITY = str(LAYOUT.capacity("{n_facts}").root)
CAPACITY_SEEDS = STUDY.capacity.seeds if STUDY.capacity else []
# A levers sub-study (one lever) mirrors the study's RL layout under levers/<name>/.
LEVER = str(LAYOUT.lever("{lever}").root)
LEVER_SEEDS = STUDY.levers.seeds if STUDY.levers else []
# The confirmation sub-study: each method at its best lr (the select checkpoint's), on fresh
# seeds, under confirm/ (a {confirm} wildcard that is always "confirm" marks its jobs).
CONFIRM = str(LAYOUT.root / "{confirm}")
# An edge-extension round (analysis.lr_extension): its evaluations under extend/r<k>/, its runs
# the sweep's own (the train rule's, under train/).
EXTEND = str(LAYOUT.extension("{extension}").root)
EXTENSION_ROUNDS = STUDY.analysis.lr_extension
CONFIRM_SEEDS = {
    g: STUDY.confirmation.seeds.get(g, []) if STUDY.confirmation else []
    for g in ("rl", "sft")
}
# Runs the library from this checkout (also inside a conda env, where rankone is not
# installed). Relative to the working directory, so the command, a param, is the same
# in every checkout and the between-workflow cache can match across them.
# workflow/Snakefile: the repository is its folder's parent.
SRC = str(Path(workflow.basedir).parent / "src")
RANKONE = "PYTHONPATH=src python -m rankone"
ML_ENV = "../../envs/conda/ml.yaml"
ANALYSIS_ENV = "../../envs/conda/analysis.yaml"
DRY_RUN = getattr(workflow.output_settings, "dryrun", False)
# `snakemake --lint` loads the workflow as the only caller that skips the env-var check (Snakemake
# 9's api.lint): a lint, like a dry run, leaves nothing behind (a test holds this).
LINT = not getattr(workflow, "check_envvars", True)
if not (DRY_RUN or LINT):
    write_resolved(STUDY, LAYOUT.study_config)


wildcard_constraints:
    regime="rl|sft|format",
    model="[A-Za-z0-9._@-]+",
    method=METHOD_REGEX,
    lr="[0-9.e+-]+",
    n_facts="[0-9]+",
    lever="[a-z][a-z0-9-]*",
    confirm="confirm",
    extension="[1-9][0-9]*",
    after="[0-9]+",


def check_executor():
    """Before the first submission: a SLURM run whose controller does not answer stops now, clearly."""
    plugin = workflow.executor_plugin
    if plugin is not None and plugin.name == "slurm":
        try:
            check_slurm_controller()
        except InputError as err:
            raise WorkflowError(str(err)) from None


def stage_resources(stage):
    """The job resources the config's `resources` section sets for `stage` (GPUs, memory, run
    time), per job: the stage's numbers, then its method family's, then its model's. Rule
    resources, so a cluster profile's scheduler (or --resources gpu=N on one machine) sees them;
    the shell hands `gpu` to the job as RANKONE_GPUS, which claims that many ids (rankone.gpus).
    """
    spec = STUDY.resources.get(stage)
    if spec is None:
        return {"gpu": 0}  # every job's shell passes its GPUs on (rankone.gpus)
    keys = set(spec.for_job())
    for override in [*spec.by_method.values(), *spec.by_model.values()]:
        keys |= set(override.model_dump(exclude_none=True))

    def resource(key):
        def value(wildcards):
            return spec.for_job(wildcards.get("model"), wildcards.get("method"))[key]

        return value

    return {key: resource(key) for key in sorted(keys)}


def check_plan():
    """Before any job: every GPU job of the study fits the GPUs its resources give it
    (rankone plan), or the DAG is refused naming the job and the numbers."""
    gpu_jobs = any(
        spec.gpu
        or any(o.gpu for o in [*spec.by_method.values(), *spec.by_model.values()])
        for spec in STUDY.resources.values()
    )
    if gpu_jobs and workflow.is_main_process:
        from rankone.plan import check  # torch and peft: loaded only for a GPU study

        try:
            check(STUDY)
        except InputError as err:
            raise WorkflowError(str(err)) from None


@functools.cache
def code(stage):
    """The digest of the library code `stage` runs for this study (rankone.stages.source_digest)."""
    return source_digest(stage, STUDY, f"{SRC}/rankone")


def wildcard(name):
    """A param holding the job's `name` wildcard. The between-workflow cache keys a job on its
    params (and its unformatted command), never its wildcards, so a cached rule names what its
    wildcards select here: without it every model shared one cache entry."""

    def value(wildcards):
        return wildcards[name]

    return value


def digest(stage):
    """A param for a stage's rules: digest of the config sections `stage` reads, per job (regime, capacity size)."""

    def job_digest(wildcards):
        regime = wildcards.get("regime")
        return config_digest(scope(wildcards, runs=stage != "data")[0], stage, regime)

    return job_digest


def seed_outputs(root, seeds, name):
    """`name` in every seed's run folder of a cell (the cell's wildcards left in place)."""
    return expand(
        f"{root}/train/{CELL}/seed{{seed}}/{name}", seed=seeds, allow_missing=True
    )


CAPACITY_CHOSEN = substudies.capacity_takes_select(STUDY)


def sub_study(part, runs=True):
    """A sub-study's config (rankone.substudies). One whose runs take the select stage's lrs asks
    the select checkpoint first (until it has run, Snakemake defers the jobs that ask); without
    `runs`, a capacity sub-study without its lrs: enough for its data."""
    if part.kind == "extend":  # round k runs the lrs select named after rounds 1..k-1
        checkpoints.select_round.get(after=str(int(part.key) - 1))
        return part.study(STUDY, LAYOUT)
    if part.waits_for_select(STUDY) and (runs or part.kind == "confirm"):
        checkpoints.select.get()
        return part.study(STUDY, LAYOUT)
    return _settled_study(part, runs)


@functools.cache
def _settled_study(part, runs):
    return part.study(STUDY, LAYOUT, with_runs=runs)


def capacity_best(wildcards):
    """The select checkpoint's table, for capacity jobs that run at its lrs (they read it)."""
    return [table_path("best_lr.csv")] if CAPACITY_CHOSEN else []


def scope(wildcards, runs=True):
    """(study, results root) of a job: the study's, or with an n_facts, lever or confirm
    wildcard that capacity, lever or confirmation sub-study's."""
    part = substudies.from_wildcards(wildcards)
    if part is None:
        return STUDY, RESULTS
    return sub_study(part, runs), str(part.layout(LAYOUT).root)


def scope_flag(wildcards):
    """The CLI flag that puts a job in its sub-study (empty for the study's own jobs)."""
    part = substudies.from_wildcards(wildcards)
    return "" if part is None else f" {part.flag}"


def cell_id(wildcards):
    return CELL.format(**wildcards)


def method_id(wildcards):
    return f"{wildcards.regime}/{wildcards.model}/{wildcards.method}"


def method_runs(wildcards):
    """run.json, weights and snapshots of every run (lr, seed) of one (regime, model, method)."""
    group = (wildcards.regime, wildcards.model, wildcards.method)
    study, runs_root = scope(wildcards)[0], layout_of(wildcards).runs_root
    return [
        f"{runs_root}/train/{run.path}/{name}"
        for run in study.runs()
        if (run.regime, run.model, run.method) == group
        for name in ("run.json", "weights", "snapshots")
    ]


def model_data():
    """What the warm-start reads: every task's warm-up split, and RL train for the pass@1 check."""
    return [f"{RESULTS}/data/{regime}/warmup.parquet" for regime in STUDY.tasks] + [
        f"{RESULTS}/data/rl/train.parquet"
    ]


def layout_of(wildcards):
    """The output layout of a job: the study's, or its sub-study's (rankone.substudies)."""
    part = substudies.from_wildcards(wildcards)
    return LAYOUT if part is None else part.layout(LAYOUT)


def data_inputs(wildcards):
    """A job's train, val and test splits (a confirmation or extension run's are the study's own)."""
    return expand(
        f"{layout_of(wildcards).data_root}/{{regime}}/{{split}}.parquet",
        regime=wildcards.regime,
        split=["train", "val", "test"],
    )


def run_files(stage, filename, study=STUDY, root=RESULTS):
    return [f"{root}/{stage}/{run.path}/{filename}" for run in study.runs()]


def evaluation_files(study=STUDY, root=RESULTS):
    groups = sorted({(run.regime, run.model, run.method) for run in study.runs()})
    return [f"{root}/evaluate/{g}/{m}/{x}/metrics.jsonl" for g, m, x in groups]


def extension_files(rounds):
    """An input function: run.json of every run and each evaluation of edge-extension rounds
    1..rounds(wildcards); each round asks the select_round checkpoint before it for its lrs.
    """

    def files(wildcards):
        found = []
        for k in range(1, rounds(wildcards) + 1):
            part = substudies.SubStudy("extend", str(k))
            study = sub_study(part)
            found += run_files("train", "run.json", study) + evaluation_files(
                study, str(part.layout(LAYOUT).root)
            )
        return found

    return files


def extension_table(wildcards):
    """A train job's input when its lr lies past the grid: the select_round table that named it (the
    job reads it to find the run; none for the grid's runs). A cell the study does not have (a
    model, method or lr off its grid and no extension round's) stops the DAG here, before any job.
    A sub-study's job (a lever's) is checked by its own config."""
    if substudies.from_wildcards(wildcards) is not None:
        return []
    grid = (
        STUDY.lr_grid(wildcards.regime, wildcards.method)
        if wildcards.method in STUDY.regime_methods(wildcards.regime)
        else None
    )
    if wildcards.model not in STUDY.models or grid is None:
        raise WorkflowError(
            f"{cell_id(wildcards)}: the study has no such cell (models {STUDY.models}, "
            f"{wildcards.regime} methods {STUDY.regime_methods(wildcards.regime)})"
        )
    if float(wildcards.lr) in grid:
        return []
    key = (wildcards.regime, wildcards.model, wildcards.method)
    for k in range(1, EXTENSION_ROUNDS + 1):
        table = LAYOUT.select_round(k - 1)
        if table.is_file() and extension_lrs(LAYOUT, k).get(key) == float(wildcards.lr):
            return [str(table)]
    raise WorkflowError(
        f"{cell_id(wildcards)}: lr {wildcards.lr} is not in learning_rates.{wildcards.regime}."
        f"{method_kind(wildcards.method)} {grid}, nor an lr an edge-extension round added"
    )


def fullft_weights(regime=None):
    return [
        f"{RESULTS}/train/{run.path}/weights"
        for run in STUDY.runs()
        if run.method == "fullft" and regime in (None, run.regime)
    ]


def sub_study_files(stage, parts):
    """run.json of every run (train), or each evaluation (evaluate), of sub-studies `parts`."""
    files = []
    for part in parts:
        study, root = sub_study(part), str(part.layout(LAYOUT).root)
        if stage == "train":
            files += run_files("train", "run.json", study, root)
        else:
            files += evaluation_files(study, root)
    return files


def capacity_files(stage):
    """An input function: the capacity runs' run.json (train) or evaluations (evaluate)."""

    def files(wildcards):
        return sub_study_files(stage, parts_of_kind("capacity"))

    return files


def confirm_files(stage):
    """An input function: the confirmation runs' run.json (train) or evaluations (evaluate), none
    without a confirmation section."""

    def files(wildcards):
        parts = [substudies.SubStudy("confirm", g) for g in STUDY.confirmed_regimes()]
        return sub_study_files(stage, parts)

    return files


def lever_files(stage):
    return sub_study_files(stage, parts_of_kind("lever"))


def parts_of_kind(kind):
    """The study's capacity or lever sub-studies (rankone.substudies.of)."""
    return [part for part in substudies.of(STUDY) if part.kind == kind]


def table_path(name):
    """A table's path: in the results folder of the stage module that writes it (rankone.outputs)."""
    return str(LAYOUT.table(name))


def optional_tables():
    """Every enabled optional experiment's tables (none without their config sections)."""
    return [
        table_path(name)
        for experiment in enabled_experiments(STUDY)
        for name in experiment_tables(experiment)
    ]


def report_figures():
    """The report's figures for this study (rankone.figures.drawn) as report() outputs, captioned
    and filed under their report section from the registry (rankone.outputs)."""
    return {
        Path(name).stem: report(
            f"{REPORT}/{name}",
            caption=f"../report/{Path(name).stem}.rst",
            category=section(name),
        )
        for name in drawn(STUDY)
    }


def report_files():
    """What `all` asks for: the report pages, and each figure and optional table by name
    (Snakemake reruns a finished report only for outputs someone requests, so adding
    `truncation:` to a finished study would otherwise do nothing)."""
    pages = [f"{REPORT}/{name}" for name in ("report.md", "report.html")]
    return pages + [f"{REPORT}/{name}" for name in drawn(STUDY)] + optional_tables()


check_plan()
