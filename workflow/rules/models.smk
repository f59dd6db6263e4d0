rule models:
    input:
        model_data(),
    output:
        directory(f"{RESULTS}/models/{{model}}"),
    log:
        f"{RESULTS}/logs/models/{{model}}.log",
    cache: "omit-software"
    conda:
        ML_ENV
    threads: STUDY.threads
    resources:
        **stage_resources("models"),
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        model=wildcard("model"),
        code=code("models"),
        digest=digest("models"),
    shell:
        "{params.rankone} models --config {params.config} --model {params.model} 2> {log}"
