rule models:
    input:
        f"{RESULTS}/data/rl/train.jsonl",
    output:
        directory(f"{RESULTS}/models/{{model}}"),
    log:
        f"{RESULTS}/logs/models/{{model}}.log",
    threads: STUDY.threads
    params:
        config=STUDY_CONFIG,
        digest=STUDY.digest(
            "seed",
            "threads",
            "architecture",
            "pretrain",
            "tasks.rl",
            "rollout.max_new_tokens",
        ),
    shell:
        "rankone models --config {params.config} --model {wildcards.model} 2> {log}"
