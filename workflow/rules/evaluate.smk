rule evaluate:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        run=f"{RESULTS}/train/{RUN}/run.json",
        weights=f"{RESULTS}/train/{RUN}/weights",
    output:
        f"{RESULTS}/evaluate/{RUN}/metrics.json",
    log:
        f"{RESULTS}/logs/evaluate/{RUN}.log",
    conda:
        ML_ENV
    threads: STUDY.threads
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("evaluate"),
        run=run_id,
        digest=evaluate_digest,
    shell:
        "{params.rankone} evaluate --config {params.config} --run {params.run} 2> {log}"
