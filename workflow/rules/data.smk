rule data:
    output:
        train=f"{RESULTS}/data/{{regime}}/train.jsonl",
        val=f"{RESULTS}/data/{{regime}}/val.jsonl",
        test=f"{RESULTS}/data/{{regime}}/test.jsonl",
        manifest=f"{RESULTS}/data/{{regime}}/manifest.json",
    log:
        f"{RESULTS}/logs/data/{{regime}}.log",
    params:
        config=STUDY_CONFIG,
        digest=data_digest,
    shell:
        "rankone data --config {params.config} --regime {wildcards.regime} 2> {log}"
