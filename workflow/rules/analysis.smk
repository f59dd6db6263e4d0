rule analysis:
    input:
        train=run_files("train", "run.json"),
        evaluate=evaluation_files(),
    output:
        runs=f"{RESULTS}/analysis/runs.csv",
        curves=f"{RESULTS}/analysis/curves.csv",
        best=f"{RESULTS}/analysis/best_lr.csv",
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
