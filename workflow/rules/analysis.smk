# Each method's best lr on the sweep's val scores: a checkpoint, because the confirmation
# runs (rules/confirm.smk) exist only once it has chosen.
checkpoint select:
    input:
        train=run_files("train", "run.json"),
        evaluate=evaluation_files(),
    output:
        best=f"{RESULTS}/analysis/best_lr.csv",
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
        best=f"{RESULTS}/analysis/best_lr.csv",
        confirm_train=confirm_files("train"),
        confirm_evaluate=confirm_files("evaluate"),
    output:
        runs=f"{RESULTS}/analysis/runs.csv",
        curves=f"{RESULTS}/analysis/curves.csv",
        checkpoints=f"{RESULTS}/analysis/checkpoints.csv",
        trajectory=f"{RESULTS}/analysis/trajectory.csv",
        verdicts=f"{RESULTS}/analysis/verdicts.csv",
        information=f"{RESULTS}/analysis/information.csv",
        lr_vs_rank=f"{RESULTS}/analysis/lr_vs_rank.csv",
        early_curves=f"{RESULTS}/analysis/early_curves.csv",
        layers=f"{RESULTS}/analysis/layers.csv",
        plateau=f"{RESULTS}/analysis/plateau.csv",
        summary=f"{RESULTS}/analysis/summary.json",
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
