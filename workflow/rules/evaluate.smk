rule evaluate:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        runs=method_runs,
    output:
        f"{RESULTS}/evaluate/{{regime}}/{{model}}/{{method}}/metrics.jsonl",
    log:
        f"{RESULTS}/logs/evaluate/{{regime}}/{{model}}/{{method}}.log",
    conda:
        ML_ENV
    threads: STUDY.threads
    resources:
        **stage_resources("evaluate"),
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("evaluate"),
        method=method_id,
        scope=scope_flag,
        digest=digest("evaluate"),
    shell:
        "RANKONE_GPUS={resources.gpu} {params.rankone} evaluate --config {params.config} --method {params.method}{params.scope} 2> {log}"
