rule rollouts:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=f"{RESULTS}/data/rl/val.jsonl",
    output:
        summary=f"{RESULTS}/rollouts/{{model}}/summary.json",
        per_prompt=f"{RESULTS}/rollouts/{{model}}/per_prompt.csv",
    log:
        f"{RESULTS}/logs/rollouts/{{model}}.log",
    threads: STUDY.threads
    params:
        config=STUDY_CONFIG,
        digest=STUDY.digest("seed", "threads", "rollout", "tasks.rl"),
    shell:
        "rankone rollouts --config {params.config} --model {wildcards.model} 2> {log}"
