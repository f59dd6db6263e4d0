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
    threads: STUDY.threads
    params:
        config=STUDY_CONFIG,
        run=run_id,
        digest=evaluate_digest,
    shell:
        "rankone evaluate --config {params.config} --run {params.run} 2> {log}"
