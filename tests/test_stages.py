"""The one table of stage dependencies (rankone.stages): change each config field in turn and
the stages that rerun are exactly the ones that read it and what follows them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from rankone.config import RunId, layer, layered_files, validate
from rankone.stages import STAGES, config_digest, lineage_sections, upstream
from rankone.train import folder
from tests.conftest import ROOT

DEFAULT = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
AFTER_TRAIN = {"train", "evaluate", "select", "analysis", "updates", "capacity", "truncation", "levers", "report"}
AFTER_SELECT = {"select", "analysis", "updates", "capacity", "truncation", "levers", "report"}
AFTER_MODELS = {"models", "rollouts", *AFTER_TRAIN}
EVERYTHING = {"data", *AFTER_MODELS}

CHANGES = [  # (dotted field, new value, the stages that must rerun)
    ("seed", 1, EVERYTHING),
    ("threads", 2, AFTER_MODELS),
    ("dtype", "bfloat16", AFTER_MODELS),
    ("resources", {"train": {"gpu": 1, "mem_mb": 64000}}, set()),  # scheduling only: nothing reruns
    ("local_models", {}, set()),  # unchanged value: nothing reruns
    ("architecture.hidden_size", 256, AFTER_MODELS),
    ("pretrain.steps", 100, AFTER_MODELS),
    ("pretrain.sft_format_share", 0.5, AFTER_MODELS),
    ("tasks.rl.params.warmup_share", 0.4, EVERYTHING),
    ("tasks.sft.params.digits", 3, EVERYTHING),  # the warm-start reads the SFT task's warm-up table
    ("rollout.temperature", 0.7, {"rollouts", *AFTER_TRAIN}),
    # the analysis reads the rollouts stage's sharpening profile of the base model, so what follows it reruns
    ("rollout.n_prompts", 64, {"rollouts", "analysis", "updates", "capacity", "truncation", "levers", "report"}),
    (
        "sharpening.temperatures",
        [0.5, 1.0],
        {"rollouts", "analysis", "updates", "capacity", "truncation", "levers", "report"},  # the control's grid only
    ),
    ("sharpening.samples", 128, {"rollouts", *AFTER_TRAIN} - {"train"}),  # every profile, base and trained
    ("rollout.max_new_tokens", 6, AFTER_MODELS),
    ("rl.steps", 10, AFTER_TRAIN),
    ("rl.max_logprob_gap", 0.01, AFTER_TRAIN),
    ("sft.batch_size", 32, AFTER_TRAIN),
    ("lora.alpha", 16, AFTER_TRAIN),
    ("cpu_kernels", "native", AFTER_MODELS),
    ("evaluate.n_prompts", 64, {"evaluate", *AFTER_SELECT}),
    ("evaluate.at", [0.8, 1.0], AFTER_TRAIN),  # training saves the weights at those checkpoints
    ("analysis.confidence", 0.9, AFTER_SELECT),
    ("analysis.greedy_margin", 0.1, AFTER_SELECT),
    ("analysis.score", "final", AFTER_SELECT),  # chooses the lr too
    ("confirmation.seeds", {"rl": [20, 21]}, AFTER_SELECT - {"select"}),
]


def changed(data: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(data)
    *parents, leaf = dotted.split(".")
    node = out
    for key in parents:
        node = node[key]
    node[leaf] = value
    return out


def downstream(stages: set[str]) -> set[str]:
    return {name for name in STAGES if set(upstream(name)) & stages}


def rerun(before, after) -> set[str]:
    direct = {
        stage
        for stage in STAGES
        for regime in ("rl", "sft")
        if config_digest(before, stage, regime) != config_digest(after, stage, regime)
    }
    return downstream(direct)


@pytest.mark.parametrize("field, value, expected", CHANGES, ids=[c[0] for c in CHANGES])
def test_each_config_field_reruns_exactly_the_stages_that_read_it(field, value, expected):
    before, after = validate(DEFAULT), validate(changed(DEFAULT, field, value))
    assert rerun(before, after) == expected


def test_capacity_fields_rerun_the_capacity_stage_and_the_report_only():
    layered = layer(DEFAULT, yaml.safe_load((ROOT / "config/experiments/capacity.yaml").read_text()))
    before = validate(layered)
    after = validate(changed(layered, "capacity.probes", 32))
    assert rerun(before, after) == {"capacity", "report"}


def test_truncation_fields_rerun_the_truncation_stage_and_the_report_only():
    layered = layer(DEFAULT, yaml.safe_load((ROOT / "config/experiments/truncation.yaml").read_text()))
    assert layered["experiment"] == DEFAULT["experiment"]  # on the default study's runs
    before = validate(DEFAULT)
    assert rerun(before, validate(layered)) == {"truncation", "report"}
    assert rerun(validate(layered), validate(changed(layered, "truncation", {"ranks": [1, 4]}))) == {
        "truncation",
        "report",
    }


def test_checkpoint_identity_covers_everything_training_depends_on(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "rankone.json").write_text("{}")
    run = RunId.parse("rl/qwen3-tiny/lora-r1/lr0.001/seed0")

    def identity(data: dict) -> dict:
        return folder.identity(validate(data), run, model_dir)

    base = identity(DEFAULT)
    for field, value in [
        ("rollout.temperature", 0.7),
        ("pretrain.steps", 10),
        ("architecture.hidden_size", 256),
        ("tasks.rl.params.warmup_share", 0.4),
        ("rl.steps", 10),
        ("seed", 3),
        ("device", "cpu"),
        ("gradient_checkpointing", True),
        ("rl.micro_batch", 8),
    ]:
        assert identity(changed(DEFAULT, field, value)) != base, field
    assert identity(changed(DEFAULT, "evaluate.n_prompts", 64)) == base  # evaluation is not training's business
    (model_dir / "rankone.json").write_text('{"rebuilt": true}')
    assert identity(DEFAULT) != base, "another base model"
    assert {"rollout.temperature", "pretrain", "architecture", "tasks"} <= set(lineage_sections("train", "rl"))


def test_a_layered_config_can_switch_a_task(tmp_path):
    over = tmp_path / "facts-rl.yaml"
    over.write_text(
        yaml.safe_dump(
            {
                "experiment": "facts-rl",
                "tasks": {"rl": {"name": "facts", "params": {"n_facts": 256, "digits": 1, "n_val": 64, "n_test": 64}}},
            }
        )
    )
    cfg = validate(layered_files([ROOT / "config/default.yaml", over]))
    assert cfg.tasks["rl"].name == "facts" and cfg.tasks["rl"].params["n_facts"] == 256
    assert "max_operand" not in cfg.tasks["rl"].params  # the old task's params are dropped
    assert cfg.tasks["sft"].params["n_facts"] == DEFAULT["tasks"]["sft"]["params"]["n_facts"]
    # the same task keeps merging as before
    same = validate(layered_files([ROOT / "config/default.yaml"], {"tasks": {"rl": {"params": {"n_val": 128}}}}))
    assert same.tasks["rl"].params["n_val"] == 128 and same.tasks["rl"].params["max_operand"] == 99


def test_every_stage_names_existing_upstream_stages_and_sources():
    package = Path(__file__).resolve().parents[1] / "src/rankone"
    for name, stage in STAGES.items():
        assert set(stage.upstream) <= set(STAGES), name
        for source in stage.sources:
            assert (package / source).exists(), f"{name}: {source}"
