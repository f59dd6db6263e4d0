# The confirmation runs (config `confirmation:`): each method at the lr the select checkpoint
# chose, on fresh seeds per regime, under confirm/, by the train and evaluate rules' own
# commands (with --confirm); the analysis judges that regime's verdicts on them alone. Each names
# the select checkpoint's table as an input: what they run is read from it (SLURM's remote jobs
# insist). Select rewrites it only when a choice changes, so adding an lr that does not win
# reruns no confirmation run.


use rule train as confirm_train_rl with:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        best=table_path("best_lr.csv"),
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
        best=table_path("best_lr.csv"),
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
        best=table_path("best_lr.csv"),
    output:
        f"{CONFIRM}/evaluate/{{regime}}/{{model}}/{{method}}/metrics.jsonl",
    log:
        f"{RESULTS}/logs/{{confirm}}/evaluate/{{regime}}/{{model}}/{{method}}.log",
