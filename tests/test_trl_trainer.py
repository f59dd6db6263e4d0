"""rl.trainer trl: TRL's GRPOTrainer writes rankone's run folder, reproducibly and resumably, and
the config refuses what TRL cannot be set to do."""

from __future__ import annotations

import filecmp

import pytest

from rankone.config import ConfigError, RunId, validate
from tests.conftest import smoke_dict

RL = {"steps": 6, "prompts_per_step": 4, "group_size": 4, "log_every": 3, "checkpoint_every": 2, "trainer": "trl"}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"rl": {"trainer": "verl"}}, "rl.trainer"),
        ({"rl": {"trainer": "trl", "variance_filter": True}}, "rl.variance_filter"),
        ({"rl": {"trainer": "trl", "loss": "ppo"}}, "rl.loss"),
        ({"rl": {"trainer": "trl"}, "methods": ["fullft", "majority"]}, "methods"),
        ({"rl": {"trainer": "trl"}, "rollout": {"engine": "vllm"}}, "rollout.engine"),
    ],
)
def test_what_trl_cannot_do_is_a_config_error_naming_the_field(change, field):
    from rankone import checks

    with pytest.raises(ConfigError) as err:
        checks.validate(smoke_dict(**change))
    assert field in str(err.value) and "\n" not in str(err.value)
    if field == "rl.trainer":
        assert "rankone (" in str(err.value) and "trl (" in str(err.value)  # the known names, with their help


def test_a_trl_run_writes_rankones_run_folder_and_resumes_to_the_same_bytes(study, tmp_path, monkeypatch):
    """LoRA r1 for 6 steps through TRL: the run folder the evaluate stage reads (a metrics line a
    step, snapshots at evaluate.at, run.json last, the weights loadable as the method); a run
    killed after its step-2 checkpoint resumes to an uninterrupted run's bytes."""
    from rankone.evaluate import checkpoints
    from rankone.io import read_json, read_jsonl
    from rankone.models.load import load_policy
    from rankone.train import TRAINERS, trl_grpo

    base, at = study
    cfg = validate(smoke_dict(results_dir=base.results_dir, experiment=base.experiment, rl=RL))
    run = RunId.parse("rl/qwen3-tiny/lora-r1/lr0.001/seed0")
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    info = TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), whole)
    assert info["status"] == "completed" and info["trainer"].startswith("trl ")
    assert read_json(whole / "run.json")["steps_completed"] == 6 and not (whole / "trl").exists()
    steps = read_jsonl(whole / "metrics.jsonl")
    assert [s["step"] for s in steps] == list(range(6)) and steps[-1]["episodes"] == 6 * 16
    assert all(0 <= s["reward"] <= 1 and 0 <= s["zero_variance_share"] <= 1 for s in steps)
    found = checkpoints(cfg, run, whole, 6)  # the evaluate stage's list: snapshots at evaluate.at, then weights/
    assert [step for step, _ in found][-1] == 6 and all(path.is_dir() for _, path in found)
    model, _ = load_policy(at.model(run.model), whole / "weights", run.method)
    assert sum(p.numel() for n, p in model.named_parameters() if "lora_" in n) == info["trainable_parameters"]

    calls, score = [0], trl_grpo.Scored.__call__

    def killed_at_step_4(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == 4:
            raise KeyboardInterrupt("killed")
        return score(self, *args, **kwargs)

    monkeypatch.setattr(trl_grpo.Scored, "__call__", killed_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), resumed)
    assert not (resumed / "run.json").exists() and (resumed / "trl" / "checkpoint-2").is_dir()
    monkeypatch.setattr(trl_grpo.Scored, "__call__", score)
    TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), resumed)
    for name in ("metrics.jsonl", "weights/adapter_model.safetensors"):
        assert filecmp.cmp(whole / name, resumed / name, shallow=False), name


def test_compare_puts_the_verdicts_both_studies_judge_side_by_side(tmp_path):
    """`rankone compare`: the rows both judge, matched by (regime, model, method, metric), with
    whether the verdicts agree; a row one study alone judges is counted, not shown."""
    import pandas as pd

    from rankone.cli import main
    from rankone.compare import side_by_side
    from rankone.publish import beside_section

    def table(rows):
        cols = ["regime", "model", "method", "metric", "lr", "gap", "ci_low", "ci_high", "seeds", "verdict", "about"]
        return pd.DataFrame([dict(zip(cols, r)) for r in rows])

    ours = table(
        [
            ("rl", "m", "lora-r1", "score", 1e-3, -0.01, -0.03, 0.01, 12, "parity", "learning"),
            ("rl", "m", "lora-r16", "score", 1e-3, 0.0, -0.02, 0.02, 12, "parity", "learning"),
        ]
    )
    theirs = table([("rl", "m", "lora-r1", "score", 1e-3, -0.2, -0.3, -0.1, 12, "worse", "learning")])
    both, only = side_by_side(ours, theirs, ("rankone", "trl"))
    assert len(both) == 1 and only == 1 and not both.agree.iloc[0]
    assert both["verdict (trl)"].iloc[0] == "worse" and both["gap (rankone)"].iloc[0] == -0.01
    for name, t in (("a", ours), ("b", theirs)):
        (tmp_path / name / "analysis").mkdir(parents=True)
        t.to_csv(tmp_path / name / "analysis" / "verdicts.csv", index=False)
    out = tmp_path / "side.md"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    assert (
        "**parity**" in out.read_text()
        and "**worse**" in out.read_text()
        and "0 of 1 verdicts agree" in out.read_text()
    )
    # the same rows as a table beside the markdown, which the cross-check's page shows after its answer
    heading, (sentence, shown) = beside_section(pd.read_csv(out.with_suffix(".csv")), "trl")
    assert heading == "Beside a" and "both b and a judge" in sentence and "0 of 1 verdicts agree." in sentence
    assert sentence.startswith("b's RL runs were trained by TRL's GRPOTrainer")
    assert list(shown.iloc[0])[-3:] == [
        "-0.010 [-0.030, +0.010], 12, parity",
        "-0.200 [-0.300, -0.100], 12, worse",
        "no",
    ]
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "nowhere")]) == 2
