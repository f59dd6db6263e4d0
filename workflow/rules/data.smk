rule data:
    output:
        train=f"{RESULTS}/data/{{regime}}/train.jsonl",
        val=f"{RESULTS}/data/{{regime}}/val.jsonl",
        test=f"{RESULTS}/data/{{regime}}/test.jsonl",
        warmup=f"{RESULTS}/data/{{regime}}/warmup.jsonl",
        manifest=f"{RESULTS}/data/{{regime}}/manifest.json",
    log:
        f"{RESULTS}/logs/data/{{regime}}.log",
    cache: "omit-software"
    conda:
        ML_ENV
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("data"),
        scope=scope_flag,
        digest=digest("data"),
    shell:
        "{params.rankone} data --config {params.config} --regime {wildcards.regime}{params.scope} 2> {log}"
