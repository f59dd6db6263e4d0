rule train:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
    output:
        metrics=f"{RESULTS}/train/{RUN}/metrics.jsonl",
        timings=f"{RESULTS}/train/{RUN}/timings.jsonl",
        weights=directory(f"{RESULTS}/train/{RUN}/weights"),
        run=f"{RESULTS}/train/{RUN}/run.json",
    log:
        f"{RESULTS}/logs/train/{RUN}.log",
    cache: "omit-software"
    conda:
        ML_ENV
    threads: STUDY.threads
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("train"),
        run=run_id,
        scope=scope_flag,
        digest=train_digest,
    shell:
        "{params.rankone} train --config {params.config} --run {params.run}{params.scope} 2> {log}"
