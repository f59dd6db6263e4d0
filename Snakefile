# rankone: how much adapter capacity does RL need? The DAG, stage by stage:
# data -> models -> rollouts -> train -> evaluate -> select (-> extend: train, evaluate past a grid's
# edge -> select again) -> (confirm: train, evaluate) -> analysis
# (+ updates, capacity, truncation, levers) -> report
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/default.yaml"


# Defaults are filled in by the typed config (rankone.config), not here.
validate(config, "workflow/schemas/config.schema.yaml", set_default=False)


include: "workflow/rules/common.smk"


# The image of every job under --sdm apptainer: config `container` (make image builds it).
container: STUDY.container


include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/rollouts.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/extend.smk"
include: "workflow/rules/confirm.smk"
include: "workflow/rules/updates.smk"
include: "workflow/rules/capacity.smk"
include: "workflow/rules/truncation.smk"
include: "workflow/rules/levers.smk"
include: "workflow/rules/report.smk"


# A cluster executor's scheduler is asked once before the first job is submitted.
onstart:
    check_executor()


rule all:
    default_target: True
    input:
        report_files(),
