rule train:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        # Ancient: it names the run (its lr is in the path), so a rewrite of the round's table that
        # still names this run, or a study that shares it (scripts/share-runs), reruns nothing.
        extension=ancient(extension_table),
    output:
        metrics=seed_outputs(RESULTS, STUDY.seeds, "metrics.jsonl"),
        timings=seed_outputs(RESULTS, STUDY.seeds, "timings.jsonl"),
        weights=directory(seed_outputs(RESULTS, STUDY.seeds, "weights")),
        snapshots=directory(seed_outputs(RESULTS, STUDY.seeds, "snapshots")),
        run=seed_outputs(RESULTS, STUDY.seeds, "run.json"),
    log:
        f"{RESULTS}/logs/train/{CELL}.log",
    conda:
        ML_ENV
    threads: STUDY.threads
    resources:
        **stage_resources("train"),
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("train"),
        run=cell_id,
        scope=scope_flag,
        digest=digest("train"),
    shell:
        "RANKONE_GPUS={resources.gpu} {params.rankone} train --config {params.config} --run {params.run}{params.scope} 2> {log}"
