# Edge extension (config analysis.lr_extension, up to that many rounds): a method whose best lr on
# val sits on an edge of the lrs it tried runs the next lr past that edge, on the sweep's seeds, and
# select chooses again. select_round K is the choice after rounds 1..K (0: the sweep alone), a
# checkpoint because round K+1's runs are read from it; the last round's choice is the select
# checkpoint's best_lr.csv. An extension run is the sweep's own (the train rule, under train/);
# its round's evaluations are under extend/r<K>/.


checkpoint select_round:
    input:
        train=run_files("train", "run.json"),
        evaluate=evaluation_files(),
        extended=extension_files(lambda wildcards: int(wildcards.after)),
    output:
        str(LAYOUT.select_round("{after}")),
    log:
        f"{RESULTS}/logs/select.r{{after}}.log",
    conda:
        ANALYSIS_ENV
    params:
        rankone=RANKONE,
        config=STUDY_CONFIG,
        code=code("select"),
        digest=digest("select"),
    shell:
        "{params.rankone} select --config {params.config} --round {wildcards.after} 2> {log}"


use rule evaluate as extend_evaluate with:
    input:
        model=f"{RESULTS}/models/{{model}}",
        data=data_inputs,
        runs=method_runs,
        # Ancient, as in train.smk: it names the runs to score, so a newer table that names the same runs rescores nothing.
        lrs=ancient(
            lambda wildcards: str(LAYOUT.select_round(int(wildcards.extension) - 1))
        ),
    output:
        f"{EXTEND}/evaluate/{{regime}}/{{model}}/{{method}}/metrics.jsonl",
    log:
        f"{RESULTS}/logs/extend/r{{extension}}/evaluate/{{regime}}/{{model}}/{{method}}.log",
