# The capacity experiment (config `capacity:`): SFT on facts tables of several sizes,
# each size a sub-study under capacity/n<size>/ run by the data, train and evaluate
# rules' own commands (with --capacity), then one stage that puts them side by side.


use rule data as capacity_data with:
    output:
        train=f"{CAPACITY}/data/{{regime}}/train.parquet",
        val=f"{CAPACITY}/data/{{regime}}/val.parquet",
        test=f"{CAPACITY}/data/{{regime}}/test.parquet",
        warmup=f"{CAPACITY}/data/{{regime}}/warmup.parquet",
        manifest=f"{CAPACITY}/data/{{regime}}/manifest.json",
    log:
        f"{RESULTS}/logs/capacity/n{{n_facts}}/data/{{regime}}.log",


use rule train as capacity_train with:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        best=capacity_best,
    output:
        metrics=seed_outputs(CAPACITY, CAPACITY_SEEDS, "metrics.jsonl"),
        timings=seed_outputs(CAPACITY, CAPACITY_SEEDS, "timings.jsonl"),
        weights=directory(seed_outputs(CAPACITY, CAPACITY_SEEDS, "weights")),
        snapshots=directory(seed_outputs(CAPACITY, CAPACITY_SEEDS, "snapshots")),
        run=seed_outputs(CAPACITY, CAPACITY_SEEDS, "run.json"),
    log:
        f"{RESULTS}/logs/capacity/n{{n_facts}}/train/{CELL}.log",


use rule evaluate as capacity_evaluate with:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        runs=method_runs,
        best=capacity_best,
    output:
        f"{CAPACITY}/evaluate/{{regime}}/{{model}}/{{method}}/metrics.jsonl",
    log:
        f"{RESULTS}/logs/capacity/n{{n_facts}}/evaluate/{{regime}}/{{model}}/{{method}}.log",


rule capacity:
    input:
        train=capacity_files("train"),
        evaluate=capacity_files("evaluate"),
        information=table_path("information.csv"),
    output:
        table=table_path("capacity.csv"),
        falloff=table_path("capacity_falloff.csv"),
        chart=table_path("capacity_chart.csv"),
        crossover=table_path("crossover.csv"),
    log:
        f"{RESULTS}/logs/capacity.log",
    conda:
        ANALYSIS_ENV
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("capacity"),
        digest=digest("capacity"),
    shell:
        "{params.rankone} capacity --config {params.config} 2> {log}"
