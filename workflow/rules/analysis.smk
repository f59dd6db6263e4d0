# Each method's best lr on the sweep's val scores: a checkpoint, because the confirmation
# runs (rules/confirm.smk) exist only once it has chosen.
checkpoint select:
    input:
        train=run_files("train", "run.json"),
        evaluate=evaluation_files(),
        extended=extension_files(lambda wildcards: EXTENSION_ROUNDS),
    output:
        best=table_path("best_lr.csv"),
    log:
        f"{RESULTS}/logs/select.log",
    conda:
        ANALYSIS_ENV
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("select"),
        digest=digest("select"),
    shell:
        "{params.rankone} select --config {params.config} 2> {log}"


rule analysis:
    input:
        train=run_files("train", "run.json"),
        evaluate=evaluation_files(),
        best=table_path("best_lr.csv"),
        extended=extension_files(lambda wildcards: EXTENSION_ROUNDS),
        confirm_train=confirm_files("train"),
        confirm_evaluate=confirm_files("evaluate"),
        rollouts=expand(
            f"{RESULTS}/rollouts/{{model}}/summary.json", model=STUDY.confirm_models()
        ),
    output:
        runs=table_path("runs.csv"),
        curves=table_path("curves.csv"),
        checkpoints=table_path("checkpoints.csv"),
        trajectory=table_path("trajectory.csv"),
        verdicts=table_path("verdicts.csv"),
        information=table_path("information.csv"),
        lr_vs_rank=table_path("lr_vs_rank.csv"),
        lr_optimum=table_path("lr_optimum.csv"),
        early_curves=table_path("early_curves.csv"),
        layers=table_path("layers.csv"),
        plateau=table_path("plateau.csv"),
        sharpening=table_path("sharpening.csv"),
        summary=table_path("summary.json"),
    log:
        f"{RESULTS}/logs/analysis.log",
    conda:
        ANALYSIS_ENV
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("analysis"),
        digest=digest("analysis"),
    shell:
        "{params.rankone} analysis --config {params.config} 2> {log}"
