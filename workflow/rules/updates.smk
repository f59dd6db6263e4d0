rule updates:
    input:
        best=f"{RESULTS}/analysis/best_lr.csv",
        models=expand(f"{RESULTS}/models/{{model}}", model=STUDY.models),
        weights=fullft_weights(),
    output:
        shares=f"{RESULTS}/analysis/update_shares.csv",
        matrices=f"{RESULTS}/analysis/update_matrices.csv",
        overlap=f"{RESULTS}/analysis/update_overlap.csv",
    log:
        f"{RESULTS}/logs/updates.log",
    conda:
        ML_ENV
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("updates"),
    shell:
        "{params.rankone} updates --config {params.config} 2> {log}"
