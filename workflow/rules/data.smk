rule data:
    output:
        train=f"{RESULTS}/data/{{regime}}/train.parquet",
        val=f"{RESULTS}/data/{{regime}}/val.parquet",
        test=f"{RESULTS}/data/{{regime}}/test.parquet",
        warmup=f"{RESULTS}/data/{{regime}}/warmup.parquet",
        manifest=f"{RESULTS}/data/{{regime}}/manifest.json",
    log:
        f"{RESULTS}/logs/data/{{regime}}.log",
    cache: "omit-software"
    conda:
        ML_ENV
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        regime=wildcard("regime"),
        code=code("data"),
        scope=scope_flag,
        digest=digest("data"),
    shell:
        "{params.rankone} data --config {params.config} --regime {params.regime}{params.scope} 2> {log}"
