"""Learning tests: the trainers' losses move the model the right way.

Each fails when its loss has the wrong sign (checked by flipping it once): a few RL steps
must raise the log-prob of rewarded completions relative to unrewarded ones, for FullFT and
for rank-1 LoRA; a few SFT steps must lower the NLL of the trained answers.
"""

from __future__ import annotations

import pytest
import torch

from rankone.config import RunId
from rankone.evaluate import answer_nll_nats
from rankone.data import read_split
from rankone.models.load import load_base, load_policy, make_policy
from rankone.models.sequences import completion_logprobs
from rankone.rollouts import make_engine
from rankone.train import TRAINERS
from rankone.train.pg import group_advantages, policy_gradient_loss

G = 4


def sequence_logprobs(policy, samples) -> torch.Tensor:
    return completion_logprobs(
        policy, samples.prompt_ids_B_L, samples.prompt_mask_B_L, samples.completion_B_C, samples.completion_mask_B_C
    ).sum(-1)


@pytest.mark.parametrize("method, lr", [("fullft", 1e-3), ("lora-r1", 1e-2)])
def test_policy_gradient_raises_the_log_prob_of_rewarded_completions(study, method, lr):
    cfg, at = study
    model, tokenizer = load_base(at.model("qwen3-tiny"))
    policy = make_policy(model, method, cfg.lora, "all-linear")
    prompts = [row["prompt"] for row in read_split(at.data("rl"), "train")[:8]]
    torch.manual_seed(0)
    samples = make_engine("hf", policy, tokenizer, 1.0, cfg.rollout.max_new_tokens).sample(prompts, G)
    # Reward the alphabetically first completion of each group (identical texts share a reward).
    texts_P_G = [samples.texts[i : i + G] for i in range(0, len(samples.texts), G)]
    rewards_P_G = torch.tensor([[float(t == min(group)) for t in group] for group in texts_P_G])
    advantages_P_G, keep_P = group_advantages(rewards_P_G)
    assert keep_P.sum() >= 2, "too few groups with reward variance for a learning test"
    advantages_B = advantages_P_G.reshape(-1)

    def preference() -> float:  # > 0 when rewarded completions are likelier than the rest
        with torch.no_grad():
            return float((advantages_B * sequence_logprobs(policy, samples)).sum())

    before = preference()
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=lr)
    mask_B_C = samples.completion_mask_B_C.float()
    for _ in range(5):
        learner_B_C = completion_logprobs(
            policy, samples.prompt_ids_B_L, samples.prompt_mask_B_L, samples.completion_B_C, samples.completion_mask_B_C
        )
        loss = policy_gradient_loss(learner_B_C, samples.sampler_logprobs_B_C, mask_B_C, advantages_P_G, keep_P)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert preference() > before + 0.5


@pytest.mark.parametrize("path", ["sft/qwen3-tiny/fullft/lr0.001/seed0", "sft/llama-tiny/lora-r1/lr0.01/seed0"])
def test_sft_steps_lower_the_nll_of_the_trained_answers(study, tmp_path, path):
    cfg, at = study
    run = RunId.parse(path)
    short = cfg.model_copy(update={"sft": cfg.sft.model_copy(update={"steps": 12})})
    TRAINERS["sft"](short, run, at.model(run.model), at.data("sft"), tmp_path)
    rows = read_split(at.data("sft"), "train")
    base, tokenizer = load_base(at.model(run.model))
    trained, _ = load_policy(at.model(run.model), tmp_path / "weights", run.method)
    before, tokens = answer_nll_nats(base, tokenizer, rows)
    after, _ = answer_nll_nats(trained, tokenizer, rows)
    assert after < before - 0.05 * tokens  # at least 0.05 nats per answer token better


def test_format_collapse_is_flagged_once_the_windowed_share_passes_the_level():
    from rankone.tasks.arithmetic import Arithmetic
    from rankone.train.rl import format_collapse, unparseable_share

    assert unparseable_share(Arithmetic, ["12", " 7 ", "1+2", ""]) == 0.5
    healthy = format_collapse([0.1, 0.6, 0.1, 0.1], level=0.5, window=2)
    assert not healthy["flagged"] and healthy["step"] is None and healthy["max_share"] == 0.6
    collapsed = format_collapse([0.1, 0.2, 0.6, 0.9, 1.0], level=0.5, window=2)
    assert collapsed["flagged"] and collapsed["step"] == 3  # mean(0.6, 0.9) > 0.5; mean(0.2, 0.6) is not
    assert not format_collapse([0.9], level=0.5, window=2)["flagged"]  # fewer steps than the window


def test_sft_on_the_rl_tasks_answers_lowers_their_nll(tmp_path):
    """The 2x2's SFT cell on the learning task (config/experiments/two-by-two.yaml at smoke size):
    tasks.sft is the RL task, the warm-start has no second format, and SFT on the train split's
    correct answers lowers their NLL."""
    from rankone import data
    from rankone.config import validate
    from rankone.models.build import build
    from rankone.paths import Layout
    from tests.conftest import smoke_dict

    smoke = smoke_dict()
    cfg = validate(
        smoke_dict(
            results_dir=str(tmp_path / "results"),
            models=["llama-tiny"],
            tasks={"rl": smoke["tasks"]["rl"], "sft": smoke["tasks"]["rl"]},
            pretrain={**smoke["pretrain"], "sft_format_share": 0.0},
            sft={**smoke["sft"], "steps": 12},
            capacity=None,
            levers=None,
        )
    )
    at = Layout(cfg)
    for regime in cfg.regimes:
        data.build(cfg, regime, at.data(regime))
    build(cfg, "llama-tiny", at.data_root, at.model("llama-tiny"))
    run = RunId.parse("sft/llama-tiny/fullft/lr0.001/seed0")
    TRAINERS["sft"](cfg, run, at.model(run.model), at.data("sft"), tmp_path / "run")
    rows = read_split(at.data("sft"), "train")
    assert rows[0]["prompt"] == read_split(at.data("rl"), "train")[0]["prompt"]  # the same problems
    base, tokenizer = load_base(at.model(run.model))
    trained, _ = load_policy(at.model(run.model), tmp_path / "run/weights", run.method)
    before, tokens = answer_nll_nats(base, tokenizer, rows)
    after, _ = answer_nll_nats(trained, tokenizer, rows)
    assert after < before - 0.05 * tokens
