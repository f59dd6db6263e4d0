# The confirmation runs (config `confirmation:`): each method at the lr the select checkpoint
# chose, on fresh seeds per regime, under confirm/, by the train and evaluate rules' own
# commands (with --confirm); the analysis judges that regime's verdicts on them alone. Each names
# the select checkpoint's table as an input: what they run is read from it (SLURM's remote jobs
# insist). It is ancient: the lr it chose is in the run's path, so a rewrite that keeps this
# method's choice (another method's choice changed, or a study that shares this method's runs,
# scripts/share-runs, chose for the first time) reruns no confirmation run; a changed choice is
# another run anyway.


use rule train as confirm_train_rl with:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        best=ancient(table_path("best_lr.csv")),
    output:
        metrics=seed_outputs(CONFIRM, CONFIRM_SEEDS["rl"], "metrics.jsonl"),
        timings=seed_outputs(CONFIRM, CONFIRM_SEEDS["rl"], "timings.jsonl"),
        weights=directory(seed_outputs(CONFIRM, CONFIRM_SEEDS["rl"], "weights")),
        snapshots=directory(seed_outputs(CONFIRM, CONFIRM_SEEDS["rl"], "snapshots")),
        run=seed_outputs(CONFIRM, CONFIRM_SEEDS["rl"], "run.json"),
    log:
        f"{RESULTS}/logs/{{confirm}}/train/{CELL}.log",
    wildcard_constraints:
        regime="rl",


use rule train as confirm_train_sft with:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        best=ancient(table_path("best_lr.csv")),
    output:
        metrics=seed_outputs(CONFIRM, CONFIRM_SEEDS["sft"], "metrics.jsonl"),
        timings=seed_outputs(CONFIRM, CONFIRM_SEEDS["sft"], "timings.jsonl"),
        weights=directory(seed_outputs(CONFIRM, CONFIRM_SEEDS["sft"], "weights")),
        snapshots=directory(seed_outputs(CONFIRM, CONFIRM_SEEDS["sft"], "snapshots")),
        run=seed_outputs(CONFIRM, CONFIRM_SEEDS["sft"], "run.json"),
    log:
        f"{RESULTS}/logs/{{confirm}}/train/{CELL}.log",
    wildcard_constraints:
        regime="sft",


use rule evaluate as confirm_evaluate with:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        runs=method_runs,
        best=ancient(table_path("best_lr.csv")),
    output:
        f"{CONFIRM}/evaluate/{{regime}}/{{model}}/{{method}}/metrics.jsonl",
    log:
        f"{RESULTS}/logs/{{confirm}}/evaluate/{{regime}}/{{model}}/{{method}}.log",
