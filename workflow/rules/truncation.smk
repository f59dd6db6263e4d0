# The truncation experiment (config `truncation:`): every FullFT RL run's weight update
# cut to its top-k singular directions per matrix and scored again on test.


rule truncation:
    input:
        best=table_path("best_lr.csv"),
        models=expand(f"{RESULTS}/models/{{model}}", model=STUDY.models),
        test=f"{RESULTS}/data/rl/test.parquet",
        weights=fullft_weights("rl"),
    output:
        table=table_path("truncation.csv"),
        summary=table_path("truncation_summary.csv"),
        provenance=table_path("truncation.json"),
    log:
        f"{RESULTS}/logs/truncation.log",
    conda:
        ML_ENV
    threads: STUDY.threads
    resources:
        **stage_resources("truncation"),
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("truncation"),
        digest=digest("truncation"),
    shell:
        "RANKONE_GPUS={resources.gpu} {params.rankone} truncation --config {params.config} 2> {log}"
