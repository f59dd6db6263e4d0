rule updates:
    input:
        best=table_path("best_lr.csv"),
        models=expand(f"{RESULTS}/models/{{model}}", model=STUDY.models),
        weights=fullft_weights(),
    output:
        shares=table_path("update_shares.csv"),
        matrices=table_path("update_matrices.csv"),
        overlap=table_path("update_overlap.csv"),
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
