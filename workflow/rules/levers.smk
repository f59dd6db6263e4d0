# The levers experiment (config `levers:`): the study's RL runs with one lever switched on,
# each lever a sub-study under levers/<name>/ run by the data, train and evaluate rules'
# own commands (with --lever), then one stage that sets each against plain RL.


use rule data as lever_data with:
    output:
        train=f"{LEVER}/data/{{regime}}/train.parquet",
        val=f"{LEVER}/data/{{regime}}/val.parquet",
        test=f"{LEVER}/data/{{regime}}/test.parquet",
        warmup=f"{LEVER}/data/{{regime}}/warmup.parquet",
        manifest=f"{LEVER}/data/{{regime}}/manifest.json",
    log:
        f"{RESULTS}/logs/levers/{{lever}}/data/{{regime}}.log",


use rule train as lever_train with:
    output:
        metrics=seed_outputs(LEVER, LEVER_SEEDS, "metrics.jsonl"),
        timings=seed_outputs(LEVER, LEVER_SEEDS, "timings.jsonl"),
        weights=directory(seed_outputs(LEVER, LEVER_SEEDS, "weights")),
        snapshots=directory(seed_outputs(LEVER, LEVER_SEEDS, "snapshots")),
        run=seed_outputs(LEVER, LEVER_SEEDS, "run.json"),
    log:
        f"{RESULTS}/logs/levers/{{lever}}/train/{CELL}.log",


use rule evaluate as lever_evaluate with:
    output:
        f"{LEVER}/evaluate/{{regime}}/{{model}}/{{method}}/metrics.jsonl",
    log:
        f"{RESULTS}/logs/levers/{{lever}}/evaluate/{{regime}}/{{model}}/{{method}}.log",


rule levers:
    input:  # run.json is written last, after the weights
        train=lever_files("train"),
        evaluate=lever_files("evaluate"),
        analysis=table_path("runs.csv"),
        best=table_path("best_lr.csv"),
        models=expand(f"{RESULTS}/models/{{model}}", model=STUDY.models),
        test=f"{RESULTS}/data/rl/test.parquet",
    output:
        table=table_path("levers.csv"),
        efficiency=table_path("levers_efficiency.csv"),
        pass_at_k=table_path("levers_pass_at_k.csv"),
        calibration=table_path("levers_calibration.csv"),
    log:
        f"{RESULTS}/logs/levers.log",
    conda:
        ML_ENV
    threads: STUDY.threads
    resources:
        **stage_resources("levers"),
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("levers"),
        digest=digest("levers"),
    shell:
        "RANKONE_GPUS={resources.gpu} {params.rankone} levers --config {params.config} 2> {log}"
