"""Training runs through the real trainers on tiny models: outputs, determinism, guards."""

import json
import math

import pytest

from rankone.config import RunId
from rankone.io import read_json
from rankone.train import TRAINERS
from rankone.train.pg import StaleSamplerError


def train_once(study, run, out_dir, cfg=None):
    cfg_, at = study
    cfg = cfg or cfg_
    return TRAINERS[run.regime](cfg, run, at.model(run.model), at.data(run.regime), out_dir)


@pytest.mark.parametrize(
    "path",
    [
        "rl/qwen3-tiny/lora-r1/lr0.01/seed0",
        "rl/llama-tiny/fullft/lr0.001/seed1",
        "sft/llama-tiny/lora-r1/lr0.01/seed0",
        "sft/qwen3-tiny/fullft/lr0.001/seed0",
        "rl/llama-tiny/tinylora-u4/lr0.01/seed0",
    ],  # TinyLoRA, which the smoke study no longer runs
)
def test_same_config_and_seed_give_identical_metrics_and_weights(study, tmp_path, path):
    run = RunId.parse(path)
    a = train_once(study, run, tmp_path / "a")
    b = train_once(study, run, tmp_path / "b")
    assert a["status"] == b["status"] == "completed"
    assert (tmp_path / "a/metrics.jsonl").read_bytes() == (tmp_path / "b/metrics.jsonl").read_bytes()
    weights = sorted(p.name for p in (tmp_path / "a/weights").glob("*.safetensors"))
    assert weights, "weights are saved as safetensors"
    for name in [*weights, "README.md"]:
        assert (tmp_path / "a/weights" / name).read_bytes() == (tmp_path / "b/weights" / name).read_bytes()
    card = (tmp_path / "a/weights/README.md").read_text()  # filled, not peft's blank card
    assert "More Information Needed" not in card and f"| learning rate | {run.lr:g} |" in card
    assert f"| seed | {run.seed} |" in card and f"`{run.path}`" in card and "warm-started" in card
    rows = [json.loads(line) for line in (tmp_path / "a/metrics.jsonl").read_text().splitlines()]
    cfg, _ = study
    assert len(rows) == (cfg.rl.steps if run.regime == "rl" else cfg.sft.steps)
    keys = {"reward", "zero_variance_share", "logprob_gap_mean", "entropy", "grad_norm", "loss", "tokens"}
    if run.regime == "rl":
        assert keys <= set(rows[0])
        assert all(r["logprob_gap_mean"] < 1e-4 for r in rows)
    for r in rows:
        assert all(math.isfinite(v) for v in r.values() if isinstance(v, float))
    info = read_json(tmp_path / "a/run.json")
    assert info["provenance"]["seed"] == run.seed and info["trainable_parameters"] > 0
    prov = info["provenance"]
    assert {"config_digest", "packages", "git", "host", "started", "finished", "command"} <= set(prov)
    assert info["resolved_config"]["learning_rates"] == cfg.model_dump(mode="json")["learning_rates"]


def test_different_seeds_differ(study, tmp_path):
    train_once(study, RunId.parse("rl/qwen3-tiny/fullft/lr0.001/seed0"), tmp_path / "a")
    train_once(study, RunId.parse("rl/qwen3-tiny/fullft/lr0.001/seed1"), tmp_path / "b")
    assert (tmp_path / "a/metrics.jsonl").read_bytes() != (tmp_path / "b/metrics.jsonl").read_bytes()


def test_gap_threshold_stops_the_run(study, tmp_path):
    cfg, _ = study
    # Below fp32's own noise: the step-0 gap (the noise floor, same weights both sides) already passes it.
    strict = cfg.model_copy(
        update={"rl": cfg.rl.model_copy(update={"max_logprob_gap": 1e-12, "max_noise_floor": 1e-12})}
    )
    with pytest.raises(StaleSamplerError, match="step 0.*max_noise_floor"):
        train_once(study, RunId.parse("rl/qwen3-tiny/lora-r1/lr0.01/seed0"), tmp_path / "a", strict)
    assert read_json(tmp_path / "a/run.json")["status"] == "stale-sampler"


def test_divergence_is_a_result(study, tmp_path):
    info = train_once(study, RunId.parse("sft/qwen3-tiny/fullft/lr1e+30/seed0"), tmp_path / "a")
    assert info["status"] == "diverged"
    assert (tmp_path / "a/metrics.jsonl").read_text().strip()


@pytest.mark.parametrize("n_rows, batch_size", [(10, 4), (3, 8)])
def test_sft_batches_are_whole_epochs_in_order_and_always_full(n_rows, batch_size):
    """Every batch has batch_size rows, a table smaller than a batch included (the 32-key crossover
    at 64 a batch), and each epoch shows every row once: a pass count is steps x batch / rows."""
    from itertools import chain, islice

    from rankone.train.sft import batches

    rows = [{"i": i} for i in range(n_rows)]
    drawn = list(islice(batches(rows, batch_size, seed=0), 3 * n_rows))
    assert all(len(b) == batch_size for b in drawn)
    stream = [r["i"] for r in chain.from_iterable(drawn)]
    for epoch in range(len(stream) // n_rows):
        assert sorted(stream[epoch * n_rows : (epoch + 1) * n_rows]) == list(range(n_rows))
