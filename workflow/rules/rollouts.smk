rule rollouts:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=f"{RESULTS}/data/rl/val.parquet",
    output:
        summary=f"{RESULTS}/rollouts/{{model}}/summary.json",
        per_prompt=f"{RESULTS}/rollouts/{{model}}/per_prompt.csv",
    log:
        f"{RESULTS}/logs/rollouts/{{model}}.log",
    conda:
        ML_ENV
    threads: STUDY.threads
    resources:
        **stage_resources("rollouts"),
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("rollouts"),
        digest=digest("rollouts"),
    shell:
        "RANKONE_GPUS={resources.gpu} {params.rankone} rollouts --config {params.config} --model {wildcards.model} 2> {log}"
