# Shared helpers: the validated study, its output layout, and per-stage config digests.
# The digests are rule params, so Snakemake reruns a job exactly when the config it
# depends on changes (and not when an unrelated field does).
from rankone.cli import write_resolved
from rankone.code import source_digest
from rankone.config import validate as validate_study
from rankone.paths import Layout

STUDY = validate_study(config)
LAYOUT = Layout(STUDY)
RESULTS = str(LAYOUT.root)
REPORT = str(LAYOUT.report)
STUDY_CONFIG = str(LAYOUT.study_config)
RUN = "{regime}/{model}/{method}/lr{lr}/seed{seed}"
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
    method="fullft|lora-r[0-9]+",
    lr="[0-9.e+-]+",
    seed="[0-9]+",


def code(stage):
    return source_digest(stage, f"{SRC}/rankone")


def run_id(wildcards):
    return RUN.format(**wildcards)


def method_id(wildcards):
    return f"{wildcards.regime}/{wildcards.model}/{wildcards.method}"


def method_runs(wildcards):
    """run.json and weights of every run (lr, seed) of one (regime, model, method)."""
    group = (wildcards.regime, wildcards.model, wildcards.method)
    return [
        f"{RESULTS}/train/{run.path}/{name}"
        for run in STUDY.runs()
        if (run.regime, run.model, run.method) == group
        for name in ("run.json", "weights")
    ]


def data_digest(wildcards):
    return STUDY.digest("seed", f"tasks.{wildcards.regime}")


def train_digest(wildcards):
    sections = ["threads", wildcards.regime, "lora", f"tasks.{wildcards.regime}"]
    return STUDY.digest(*sections, *(["rollout"] if wildcards.regime == "rl" else []))


def evaluate_digest(wildcards):
    return STUDY.digest(
        "evaluate", "rollout.max_new_tokens", f"tasks.{wildcards.regime}"
    )


def data_inputs(wildcards):
    return expand(
        f"{RESULTS}/data/{{regime}}/{{split}}.jsonl",
        regime=wildcards.regime,
        split=["train", "val", "test"],
    )


def run_files(stage, filename):
    return [f"{RESULTS}/{stage}/{run.path}/{filename}" for run in STUDY.runs()]


def evaluation_files():
    groups = sorted({(run.regime, run.model, run.method) for run in STUDY.runs()})
    return [f"{RESULTS}/evaluate/{g}/{m}/{x}/metrics.jsonl" for g, m, x in groups]


def fullft_weights():
    return [
        f"{RESULTS}/train/{run.path}/weights"
        for run in STUDY.runs()
        if run.method == "fullft"
    ]


def report_files():
    return [f"{REPORT}/{name}" for name in ("report.md", "index.html")]
