rule data:
    output:
        train=f"{RESULTS}/data/{{regime}}/train.jsonl",
        val=f"{RESULTS}/data/{{regime}}/val.jsonl",
        test=f"{RESULTS}/data/{{regime}}/test.jsonl",
        manifest=f"{RESULTS}/data/{{regime}}/manifest.json",
    params:
        config=STUDY_CONFIG,
        digest=data_digest,
    log:
        f"{RESULTS}/logs/data/{{regime}}.log",
    shell:
        "rankone data --config {params.config} --regime {wildcards.regime} 2> {log}"
