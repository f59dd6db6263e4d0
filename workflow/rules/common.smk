# Shared helpers: the validated study, its output layout, and per-stage digests of the
# config and code each stage reads (the table in rankone.stages). The digests are rule
# params, so Snakemake reruns a job exactly when what it depends on changes.
import functools
from pathlib import Path

from rankone.analysis import chosen
from rankone.cli import write_resolved
from rankone.cluster import check_slurm_controller
from rankone.config import (
    CELL_TEMPLATE,
    METHOD_REGEX,
    layered_files,
    validate as validate_study,
)
from rankone.io import InputError
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
CONFIRM_SEEDS = {
    g: STUDY.confirmation.seeds.get(g, []) if STUDY.confirmation else []
    for g in ("rl", "sft")
}
# Runs the library from this checkout (also inside a conda env, where rankone is not
# installed). Relative to the working directory, so the command, a param, is the same
# in every checkout and the between-workflow cache can match across them.
SRC = f"{workflow.basedir}/src"
RANKONE = "PYTHONPATH=src python -m rankone"
ML_ENV = "../../envs/conda/ml.yaml"
ANALYSIS_ENV = "../../envs/conda/analysis.yaml"
write_resolved(STUDY, LAYOUT.study_config)


wildcard_constraints:
    regime="rl|sft",
    model="[A-Za-z0-9._-]+",
    method=METHOD_REGEX,
    lr="[0-9.e+-]+",
    n_facts="[0-9]+",
    lever="[a-z][a-z0-9-]*",
    confirm="confirm",


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


def code(stage):
    return source_digest(stage, f"{SRC}/rankone")


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


CAPACITY_CHOSEN = bool(STUDY.capacity) and STUDY.capacity.learning_rates == "chosen"


def capacity_study(n_facts):
    """The capacity sub-study at one size; with `learning_rates: chosen`, once the select
    checkpoint has chosen its lrs (until then Snakemake defers the jobs that ask)."""
    if not CAPACITY_CHOSEN:
        return _capacity_study(int(n_facts))
    checkpoints.select.get()
    return STUDY.capacity_study(int(n_facts), chosen(LAYOUT))


@functools.cache
def _capacity_study(n_facts):
    return STUDY.capacity_study(n_facts)


def capacity_best(wildcards):
    """The select checkpoint's table, for capacity jobs that run at its lrs (they read it)."""
    return [f"{RESULTS}/analysis/best_lr.csv"] if CAPACITY_CHOSEN else []


@functools.cache
def lever_study(name):
    return STUDY.lever_study(name)


def confirm_study(regime):
    """A regime's confirmation sub-study, once the select checkpoint has chosen its lrs (until
    then Snakemake defers the jobs that ask)."""
    checkpoints.select.get()
    return STUDY.confirm_study(chosen(LAYOUT), regime)


def scope(wildcards, runs=True):
    """(study, results root) of a job: the study's, or with an n_facts, lever or confirm
    wildcard that capacity, lever or confirmation sub-study's (without `runs`, a capacity
    sub-study that has not chosen its lrs yet: enough for its data)."""
    if "confirm" in wildcards.keys():
        return confirm_study(wildcards.regime), CONFIRM.format(confirm="confirm")
    if "n_facts" in wildcards.keys():
        study = capacity_study if runs else _capacity_study
        return study(int(wildcards.n_facts)), CAPACITY.format(n_facts=wildcards.n_facts)
    if "lever" in wildcards.keys():
        return lever_study(wildcards.lever), LEVER.format(lever=wildcards.lever)
    return STUDY, RESULTS


def scope_flag(wildcards):
    """The CLI flag that puts a job in its sub-study (empty for the study's own jobs)."""
    if "n_facts" in wildcards.keys():
        return f" --capacity {wildcards.n_facts}"
    if "lever" in wildcards.keys():
        return f" --lever {wildcards.lever}"
    if "confirm" in wildcards.keys():
        return " --confirm"
    return ""


def cell_id(wildcards):
    return CELL.format(**wildcards)


def method_id(wildcards):
    return f"{wildcards.regime}/{wildcards.model}/{wildcards.method}"


def method_runs(wildcards):
    """run.json, weights and snapshots of every run (lr, seed) of one (regime, model, method)."""
    group = (wildcards.regime, wildcards.model, wildcards.method)
    study, root = scope(wildcards)
    return [
        f"{root}/train/{run.path}/{name}"
        for run in study.runs()
        if (run.regime, run.model, run.method) == group
        for name in ("run.json", "weights", "snapshots")
    ]


def model_data():
    """What the warm-start reads: every task's warm-up split, and RL train for the pass@1 check."""
    return [f"{RESULTS}/data/{regime}/warmup.parquet" for regime in STUDY.tasks] + [
        f"{RESULTS}/data/rl/train.parquet"
    ]


def data_inputs(wildcards):
    """A job's train, val and test splits (a confirmation run's are the study's own)."""
    root = RESULTS if "confirm" in wildcards.keys() else scope(wildcards)[1]
    return expand(
        f"{root}/data/{{regime}}/{{split}}.parquet",
        regime=wildcards.regime,
        split=["train", "val", "test"],
    )


def run_files(stage, filename, study=STUDY, root=RESULTS):
    return [f"{root}/{stage}/{run.path}/{filename}" for run in study.runs()]


def evaluation_files(study=STUDY, root=RESULTS):
    groups = sorted({(run.regime, run.model, run.method) for run in study.runs()})
    return [f"{root}/evaluate/{g}/{m}/{x}/metrics.jsonl" for g, m, x in groups]


def fullft_weights(regime=None):
    return [
        f"{RESULTS}/train/{run.path}/weights"
        for run in STUDY.runs()
        if run.method == "fullft" and regime in (None, run.regime)
    ]


def sub_study_files(stage, studies):
    """run.json of every run (train), or each evaluation (evaluate), of (study, root) pairs."""
    files = []
    for study, root in studies:
        if stage == "train":
            files += run_files("train", "run.json", study, root)
        else:
            files += evaluation_files(study, root)
    return files


def capacity_files(stage):
    """An input function: the capacity runs' run.json (train) or evaluations (evaluate)."""

    def files(wildcards):
        sizes = STUDY.capacity.n_facts if STUDY.capacity else []
        return sub_study_files(
            stage, [(capacity_study(n), CAPACITY.format(n_facts=n)) for n in sizes]
        )

    return files


def confirm_files(stage):
    """An input function: the confirmation runs' run.json (train) or evaluations (evaluate), none
    without a confirmation section."""

    def files(wildcards):
        root = CONFIRM.format(confirm="confirm")
        return sub_study_files(
            stage, [(confirm_study(g), root) for g in STUDY.confirmed_regimes()]
        )

    return files


def lever_files(stage):
    names = STUDY.levers.variants if STUDY.levers else {}
    return sub_study_files(
        stage, [(lever_study(n), LEVER.format(lever=n)) for n in names]
    )


# The optional experiments, each under the config section that turns it on: the tables its
# stage writes under analysis/ (which the report reads) and the report's figures for it.
OPTIONAL = {
    "capacity": {
        "tables": (
            "capacity.csv",
            "capacity_falloff.csv",
            "capacity_chart.csv",
            "crossover.csv",
        ),
        "figures": ("capacity", "capacity_falloff", "crossover"),
    },
    "truncation": {
        "tables": ("truncation.csv", "truncation_summary.csv", "truncation.json"),
        "figures": ("truncation",),
    },
    "levers": {
        "tables": (
            "levers.csv",
            "levers_efficiency.csv",
            "levers_pass_at_k.csv",
            "levers_calibration.csv",
        ),
        # Calibration over training: only where the RL task states a confidence.
        "figures": ("levers", "levers_pass_at_k")
        + (
            ("levers_calibration",)
            if "rl" in STUDY.tasks and STUDY.tasks["rl"].confidence
            else ()
        ),
    },
}


def enabled(section):
    return getattr(STUDY, section) is not None


def optional_tables():
    """Every enabled optional experiment's tables (none without their config sections)."""
    return [
        f"{RESULTS}/analysis/{name}"
        for section, parts in OPTIONAL.items()
        if enabled(section)
        for name in parts["tables"]
    ]


def optional_figures(section, category):
    """An optional experiment's figures as report() outputs (none when the config has no `section`)."""
    if not enabled(section):
        return {}
    return {
        name: report(
            f"{REPORT}/{name}.png",
            caption=f"../report/{name}.rst",
            category=category,
        )
        for name in OPTIONAL[section]["figures"]
    }


def report_files():
    """What `all` asks for: the report pages, and each optional experiment's figures and
    tables by name (Snakemake reruns a finished report only for outputs someone requests,
    so adding `truncation:` to a finished study would otherwise do nothing)."""
    figures = [
        f"{REPORT}/{name}.png"
        for section, parts in OPTIONAL.items()
        if enabled(section)
        for name in parts["figures"]
    ]
    pages = [f"{REPORT}/{name}" for name in ("report.md", "report.html")]
    return pages + figures + optional_tables()


check_plan()
