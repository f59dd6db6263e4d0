"""The RL trainer's named choices (rankone.objectives, rankone.train.pg): each baseline and each loss
on hand-made tensors against a hand computation, every registry name through the trainer, and each
loss a learning test (rewarded completions become likelier; with the sign flipped they would not)."""

from __future__ import annotations

import math

import pytest
import torch

from rankone.data import read_split
from rankone.models.load import load_base, make_policy
from rankone.models.sequences import completion_logprobs
from rankone.objectives import BASELINES, LOSSES
from rankone.rollouts import make_engine
from rankone.train.batch import Batch, Round
from rankone.train.learner import Learner
from rankone.train.pg import DAPO, GRPO, Advantages, ImportanceSampledPG, PPOClip

REWARDS_P_G = torch.tensor([[1.0, 0, 0, 0], [1, 1, 1, 1]])  # one group with signal under its own mean, one without


def test_the_group_mean_baseline_centres_each_group_and_drops_the_groups_without_variance():
    advantages_P_G, keep_P = Advantages("group")(REWARDS_P_G)
    assert advantages_P_G.tolist() == [[0.75, -0.25, -0.25, -0.25], [0, 0, 0, 0]]
    assert keep_P.tolist() == [True, False]


def test_the_batch_mean_baseline_gives_an_all_right_group_a_signal():
    advantages_P_G, keep_P = Advantages("batch")(REWARDS_P_G)  # the batch's mean: 5/8
    assert advantages_P_G.tolist() == [[0.375, -0.625, -0.625, -0.625], [0.375] * 4]
    assert keep_P.tolist() == [True, True]


def test_the_fixed_baseline_is_its_value():
    advantages_P_G, keep_P = Advantages("fixed", value=0.5)(REWARDS_P_G)
    assert advantages_P_G.tolist() == [[0.5, -0.5, -0.5, -0.5], [0.5] * 4]
    positive, keep = Advantages("fixed", sign="positive", value=0.5)(REWARDS_P_G)  # PSR keeps the right answers
    assert positive.tolist() == [[0.5, 0, 0, 0], [0.5] * 4] and keep.tolist() == [True, True]


def test_the_running_baseline_starts_at_its_value_and_follows_earlier_steps_only():
    running = Advantages("running", value=0.5, decay=0.9)
    first, _ = running(REWARDS_P_G)
    assert first.tolist() == [[0.5, -0.5, -0.5, -0.5], [0.5] * 4]  # nothing seen yet: the value
    running.observe(REWARDS_P_G.view(-1))  # 0.9 x 0.5 + 0.1 x 5/8
    assert running.running == pytest.approx(0.5125)
    second, _ = running(torch.tensor([[0.0, 0, 0, 0]]))
    assert torch.allclose(second, torch.full((1, 4), -0.5125))
    for name in ("group", "batch", "fixed"):  # the others keep no state
        other = Advantages(name)
        other.observe(REWARDS_P_G.view(-1))
        assert other.running is None


# Two sequences: ratios 2 and 1 on the first (its third token masked), 1 on the second.
LEARNER_B_C = [[math.log(0.5), math.log(0.25), 0.0], [math.log(0.5), 0.0, 0.0]]
SAMPLER_B_C = torch.tensor([[math.log(0.25), math.log(0.25), 0.0], [math.log(0.5), 0.0, 0.0]])
MASK_B_C = torch.tensor([[1.0, 1, 0], [1, 0, 0]])
ADVANTAGES_B = torch.tensor([1.0, -0.5])
KEEP_B = torch.tensor([1.0, 1.0])


def loss_and_gradient(loss) -> tuple[float, list]:
    learner_B_C = torch.tensor(LEARNER_B_C, requires_grad=True)
    value = loss(learner_B_C, SAMPLER_B_C, MASK_B_C, ADVANTAGES_B, KEEP_B, loss.normaliser(MASK_B_C, KEEP_B))
    value.backward()
    return float(value.detach()), learner_B_C.grad.tolist()


@pytest.mark.parametrize(
    "loss, value, gradient",
    [
        # -(2 x 1 + 1 x 1 + 1 x -0.5) / 2 episodes; d/dlog p = -ratio x A / 2
        (ImportanceSampledPG(), -1.25, [[-1.0, -0.5, 0.0], [0.25, 0.0, 0.0]]),
        # each sequence's tokens averaged: -((2 + 1) / 2 x 1 + 1 x -0.5) / 2
        (GRPO(), -0.5, [[-0.5, -0.25, 0.0], [0.25, 0.0, 0.0]]),
        # over the step's 3 kept tokens: -(3 - 0.5) / 3
        (DAPO(), -2.5 / 3, [[-2 / 3, -1 / 3, 0.0], [0.5 / 3, 0.0, 0.0]]),
        # ratio 2 clipped to 1.2 for A > 0 (no gradient there): -(1.2 + 1 - 0.5) / 2
        (PPOClip(clip_epsilon=0.2), -0.85, [[0.0, -0.5, 0.0], [0.25, 0.0, 0.0]]),
    ],
    ids=["pg", "grpo", "dapo", "ppo"],
)
def test_each_loss_against_a_hand_computation(loss, value, gradient):
    got, grad = loss_and_gradient(loss)
    assert got == pytest.approx(value)
    assert torch.allclose(torch.tensor(grad), torch.tensor(gradient))


def test_ppo_clips_a_negative_advantage_below_one_minus_epsilon():
    learner_B_C = torch.tensor([[math.log(0.1)]], requires_grad=True)  # ratio 0.5 against the sampler's 0.2
    loss = PPOClip(clip_epsilon=0.2)
    value = loss(learner_B_C, torch.tensor([[math.log(0.2)]]), torch.ones(1, 1), torch.tensor([-1.0]), KEEP_B[:1], 1)
    value.backward()
    assert float(value.detach()) == pytest.approx(0.8)  # min(0.5 x -1, 0.8 x -1) = -0.8, negated
    assert learner_B_C.grad.tolist() == [[0.0]]  # the clipped side acts: no gradient


def test_grpo_divides_advantages_by_the_groups_reward_std():
    advantages_P_G, keep_P = Advantages("group", loss="grpo")(REWARDS_P_G)
    # group 1: std (n - 1) of (1, 0, 0, 0) is 0.5; group 2 has no spread and stays 0
    assert advantages_P_G[0].tolist() == pytest.approx([0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001])
    assert advantages_P_G[1].tolist() == [0, 0, 0, 0] and keep_P.tolist() == [True, False]


def test_a_kept_out_group_adds_nothing_to_any_loss():
    for name in LOSSES:
        loss = LOSSES[name].load()()
        learner_B_C = torch.tensor(LEARNER_B_C, requires_grad=True)
        keep_B = torch.tensor([0.0, 1.0])
        value = loss(learner_B_C, SAMPLER_B_C, MASK_B_C, ADVANTAGES_B, keep_B, 1.0)
        value.backward()
        assert learner_B_C.grad[0].abs().sum() == 0, name


@pytest.mark.parametrize(
    "rl",
    [{"baseline": name} for name in BASELINES if name != "group"]
    + [{"loss": name} for name in LOSSES if name not in ("pg", "ppo")]
    + [{"loss": "ppo", "epochs": 2}],
    ids=lambda d: "-".join(str(v) for v in d.values()),
)
def test_every_registered_choice_trains_through_the_trainer(study, tmp_path, rl):
    """Each name trains end to end, and its weights differ from the default choices' (the choice is used)."""
    from safetensors.torch import load_file

    from rankone.config import RunId, validate
    from rankone.train import TRAINERS
    from tests.conftest import smoke_dict

    base, at = study
    run = RunId.parse("rl/qwen3-tiny/fullft/lr0.001/seed0")
    weights = {}
    for name, extra in (("default", {}), ("choice", rl)):
        cfg = validate(
            smoke_dict(
                results_dir=base.results_dir, experiment=base.experiment, rl={"steps": 3, "log_every": 3, **extra}
            )
        )
        info = TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), tmp_path / name)
        assert info["status"] == "completed" and info["steps_completed"] == 3
        weights[name] = load_file(tmp_path / name / "weights" / "model.safetensors")
    assert any(not torch.equal(weights["default"][k], weights["choice"][k]) for k in weights["default"])


G = 4


@pytest.mark.parametrize("name", list(LOSSES))
def test_each_loss_makes_rewarded_completions_likelier(study, name):
    """Five updates of a FullFT policy on one batch, through the trainer's parts (the learner and the
    batch's backward): the rewarded completions' log-probs rise against the rest."""
    cfg, at = study
    model, tokenizer = load_base(at.model("qwen3-tiny"))
    learner = Learner.around(make_policy(model, "fullft", cfg.lora, "all-linear"), tokenizer, 1e-3)
    prompts = [row["prompt"] for row in read_split(at.data("rl"), "train")[:8]]
    torch.manual_seed(0)
    samples = make_engine("hf", learner.policy, tokenizer, 1.0, cfg.rollout.max_new_tokens).sample(prompts, G)
    texts_P_G = [samples.texts[i : i + G] for i in range(0, len(samples.texts), G)]
    rewards_P_G = torch.tensor([[float(t == min(group)) for t in group] for group in texts_P_G])
    advantages_P_G, keep_P = Advantages(loss=name)(rewards_P_G)
    assert keep_P.sum() >= 2, "too few groups with reward variance for a learning test"
    batch = Batch([Round(samples, rewards_P_G.view(-1), rewards_P_G.view(-1), advantages_P_G, keep_P)], 1.0)
    sign_B = torch.sign(advantages_P_G.reshape(-1))

    def preference() -> float:  # > 0 when rewarded completions are likelier than the rest
        with torch.no_grad():
            s = samples
            logprobs_B = completion_logprobs(
                learner.policy, s.prompt_ids_B_L, s.prompt_mask_B_L, s.completion_B_C, s.completion_mask_B_C
            ).sum(-1)
        return float((sign_B * logprobs_B).sum())

    before = preference()
    loss = LOSSES[name].load()()
    for _ in range(5):
        batch.backward(learner, loss, None)
        learner.update()
    assert preference() > before + 0.5


class Crash(BaseException):
    """Stands for a kill: nothing after it runs."""


def test_a_resumed_run_continues_the_running_baseline_where_it_stopped(study, tmp_path, monkeypatch):
    """The running mean is part of the run's checkpointed state: a run killed after its step-2
    checkpoint and rerun ends with the bytes of an uninterrupted one."""
    from rankone.config import RunId, validate
    from rankone.train import TRAINERS, rl
    from tests.conftest import smoke_dict

    base, at = study
    section = {"steps": 4, "checkpoint_every": 2, "log_every": 4, "baseline": "running", "baseline_decay": 0.5}
    cfg = validate(smoke_dict(results_dir=base.results_dir, experiment=base.experiment, rl=section))
    run = RunId.parse("rl/llama-tiny/fullft/lr0.001/seed0")

    def train(out):
        return TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), out)

    reference = train(tmp_path / "reference")
    assert reference["running_baseline"] is not None
    real = rl.step_metrics

    def crash_at_step_3(step, *args):
        if step == 3:
            raise Crash
        return real(step, *args)

    monkeypatch.setattr(rl, "step_metrics", crash_at_step_3)
    with pytest.raises(Crash):
        train(tmp_path / "run")
    monkeypatch.undo()
    assert (tmp_path / "run" / "checkpoint" / "state.json").is_file()
    train(tmp_path / "run")
    for name in ("metrics.jsonl", "weights/model.safetensors"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "reference" / name).read_bytes(), name


def test_the_entropy_bonus_against_a_hand_computation():
    """chosen_and_entropy: uniform scores over V have entropy log V; the bonus is -coef x the rows' masked
    entropy over the step's tokens, and it is off (0) by default."""
    from rankone.models.sequences import chosen_and_entropy, chosen_logprobs

    scores_B_C_V = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [5.0, 0.0, 0.0, 0.0]]])
    tokens_B_C = torch.tensor([[2, 0]])
    chosen_B_C, entropy_B_C = chosen_and_entropy(scores_B_C_V, tokens_B_C)
    assert torch.equal(chosen_B_C, chosen_logprobs(scores_B_C_V, tokens_B_C))
    p = torch.softmax(torch.tensor([5.0, 0.0, 0.0, 0.0]), -1)
    assert entropy_B_C[0].tolist() == pytest.approx([math.log(4), float(-(p * p.log()).sum())])
    mask_B_C = torch.tensor([[1.0, 0.0]])
    assert float(ImportanceSampledPG(entropy_coef=0.1).bonus(entropy_B_C, mask_B_C, torch.tensor(4.0))) == (
        pytest.approx(-0.1 * math.log(4) / 4)
    )
    assert ImportanceSampledPG().entropy_coef == 0.0


def test_the_entropy_bonus_updates_a_step_whose_groups_carry_no_signal(study):
    """Hand-made rewards, every group all right: no policy gradient, so without the bonus the batch takes no
    step; with rl.entropy_coef it does, and the sampled tokens' entropy rises."""
    from rankone.config import RunId
    from rankone.train.pg import group_advantages

    cfg, at = study
    learner = Learner.start(cfg, RunId.parse("rl/llama-tiny/fullft/lr0.01/seed0"), at.model("llama-tiny"))
    torch.manual_seed(0)
    s = make_engine("hf", learner.policy, learner.tokenizer, 1.0, 5).sample(["3+4=", "12+30="], 4)
    rewards_P_G = torch.ones(2, 4)
    advantages_P_G, keep_P = group_advantages(rewards_P_G)
    batch = Batch([Round(s, rewards_P_G.view(-1), rewards_P_G.view(-1), advantages_P_G, keep_P)], 1.0)

    def entropy() -> float:
        with torch.no_grad():
            _, h_B_C = completion_logprobs(
                learner.policy, s.prompt_ids_B_L, s.prompt_mask_B_L, s.completion_B_C, s.completion_mask_B_C, 1.0, True
            )
        return float(h_B_C.sum() / s.completion_mask_B_C.sum())

    plain, bonus = ImportanceSampledPG(), ImportanceSampledPG(entropy_coef=1.0)
    assert not batch.learns and not batch.updates(plain) and batch.updates(bonus)
    before = entropy()
    loss, _ = batch.backward(learner, bonus, None)
    assert float(loss) == pytest.approx(-before, rel=1e-5)  # the bonus alone: -1 x the mean entropy
    learner.update()
    assert entropy() > before
