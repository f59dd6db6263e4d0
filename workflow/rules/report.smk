rule report:
    input:
        rules.analysis.output,
        rules.updates.output,
        optional_tables(),
        best=f"{RESULTS}/analysis/best_lr.csv",
        rollouts=expand(
            f"{RESULTS}/rollouts/{{model}}/summary.json", model=STUDY.models
        ),
    output:
        **optional_figures("capacity", "Information"),
        **optional_figures("truncation", "Update structure"),
        **optional_figures("levers", "Levers"),
        md=f"{REPORT}/report.md",
        html=f"{REPORT}/report.html",
        forest=report(
            f"{REPORT}/forest.png",
            caption="../report/forest.rst",
            category="Verdicts",
        ),
        trajectory=report(
            f"{REPORT}/trajectory.png",
            caption="../report/trajectory.rst",
            category="Verdicts",
        ),
        rl_curves=report(
            f"{REPORT}/rl_curves.png",
            caption="../report/rl_curves.rst",
            category="Learning curves",
        ),
        sft_curves=report(
            f"{REPORT}/sft_curves.png",
            caption="../report/sft_curves.rst",
            category="Learning curves",
        ),
        lr_sweep=report(
            f"{REPORT}/lr_sweep.png",
            caption="../report/lr_sweep.rst",
            category="Learning rates",
        ),
        information=report(
            f"{REPORT}/information.png",
            caption="../report/information.rst",
            category="Information",
        ),
        rl_bits=report(
            f"{REPORT}/rl_bits.png",
            caption="../report/rl_bits.rst",
            category="Information",
        ),
        updates=report(
            f"{REPORT}/updates.png",
            caption="../report/updates.rst",
            category="Update structure",
        ),
        lr_rank=report(
            f"{REPORT}/lr_vs_rank.png",
            caption="../report/lr_vs_rank.rst",
            category="Learning rates",
        ),
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
