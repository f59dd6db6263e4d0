rule report:
    input:
        rules.analysis.output,
        rules.updates.output,
        optional_tables(),
        best=table_path("best_lr.csv"),
        rollouts=expand(
            f"{RESULTS}/rollouts/{{model}}/summary.json", model=STUDY.confirm_models()
        ),
    output:
        **report_figures(),
        md=f"{REPORT}/report.md",
        html=f"{REPORT}/report.html",
    log:
        f"{RESULTS}/logs/report.log",
    conda:
        ANALYSIS_ENV
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("report"),
        digest=digest("report"),
    shell:
        "{params.rankone} report --config {params.config} 2> {log}"
