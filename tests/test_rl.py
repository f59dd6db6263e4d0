import pytest
import torch

from rankone.info import entropy_bits
from rankone.models.load import load_base, make_policy
from rankone.models.sequences import completion_logprobs
from rankone.rollouts import make_engine
from rankone.tasks.arithmetic import Arithmetic
from rankone.train.pg import group_advantages, importance_ratio
from rankone.train.rl import training_rewards


def test_advantages_are_group_centred_without_std():
    rewards_P_G = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    advantages_P_G, keep_P = group_advantages(rewards_P_G)
    assert torch.allclose(advantages_P_G[0], torch.tensor([0.75, -0.25, -0.25, -0.25]))
    assert torch.allclose(advantages_P_G[3], torch.tensor([0.5, 0.5, -0.5, -0.5]))  # no division by std
    assert torch.allclose(advantages_P_G.sum(-1), torch.zeros(4))
    assert keep_P.tolist() == [True, False, False, True]  # all-equal groups are skipped


def test_positive_and_negative_sample_reinforcement_keep_one_sign():
    rewards_P_G = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    psr, keep_psr = group_advantages(rewards_P_G, "positive")
    assert torch.allclose(psr[0], torch.tensor([0.75, 0.0, 0.0, 0.0]))
    assert torch.allclose(psr[2], torch.tensor([0.25, 0.25, 0.25, 0.0]))
    nsr, keep_nsr = group_advantages(rewards_P_G, "negative")
    assert torch.allclose(nsr[0], torch.tensor([0.0, -0.25, -0.25, -0.25]))
    assert torch.allclose(nsr[2], torch.tensor([0.0, 0.0, 0.0, -0.75]))
    both, _ = group_advantages(rewards_P_G)
    assert torch.allclose(psr + nsr, both)  # the two halves make up plain RL
    assert keep_psr.tolist() == keep_nsr.tolist() == [True, False, True]


def test_control_rewards_ignore_correctness():
    texts, answers = ["12", "12", "x", ""], ["12", "7", "12", "12"]
    assert training_rewards("task", Arithmetic, texts, answers, 0, 0).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert training_rewards("format", Arithmetic, texts, answers, 0, 0).tolist() == [1.0, 1.0, 0.0, 0.0]
    coins = training_rewards("random", Arithmetic, ["1"] * 400, ["1"] * 400, 3, 5)
    assert coins.tolist() == training_rewards("random", Arithmetic, ["x"] * 400, ["2"] * 400, 3, 5).tolist()
    assert coins.tolist() != training_rewards("random", Arithmetic, ["1"] * 400, ["1"] * 400, 3, 6).tolist()
    assert 0.4 < float(coins.mean()) < 0.6 and set(coins.tolist()) == {0.0, 1.0}


def test_majority_reward_agrees_with_the_group_and_reads_no_answer():
    # two groups of four: the mode "7" (wrong) is rewarded, the right "12" is not; a tie goes to the
    # answer given first; unparseable samples neither vote nor agree
    texts = ["7", "12", "7", "x", "3", "5", "5", "3"]
    wrong = ["99"] * 8
    majority = training_rewards("majority", Arithmetic, texts, wrong, 0, 0, group_size=4).tolist()
    assert majority == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert training_rewards("majority", Arithmetic, texts, ["7"] * 8, 0, 0, group_size=4).tolist() == majority
    assert training_rewards("majority", Arithmetic, ["x"] * 4, wrong[:4], 0, 0, group_size=4).tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="groups of 3"):
        training_rewards("majority", Arithmetic, texts, wrong, 0, 0, group_size=3)


def test_calibration_subtracts_alpha_times_the_brier_term():
    from rankone.tasks.confidence import with_confidence

    task = with_confidence(Arithmetic)
    texts, answers = ["12:9", "12:0", "7:0", "7:9", "7"], ["12"] * 5
    assert training_rewards("task", task, texts, answers, 0, 0).tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    calibrated = training_rewards("task", task, texts, answers, 0, 0, calibration_alpha=0.2).tolist()
    assert calibrated == pytest.approx([1.0, 0.8, 0.0, -0.2, -0.2])  # no confidence: the worst term
    assert training_rewards("format", task, texts, answers, 0, 0, 0.2).tolist() == pytest.approx(
        [1.0, 0.8, 1.0, 0.8, 0.8]
    )


def test_entropy_of_known_distributions():
    assert entropy_bits([1, 1, 1, 1]) == 0.0
    assert entropy_bits([0, 1, 0, 1]) == 1.0
    assert abs(entropy_bits([0, 1, 2, 3]) - 2.0) < 1e-12


def test_importance_ratio_is_one_on_policy(study):
    cfg, at = study
    for model_name in cfg.models:
        model, tokenizer = load_base(at.model(model_name))
        policy = make_policy(model, "lora-r1", cfg.lora, "all-linear")
        with torch.no_grad():  # a non-zero adapter, so LoRA is really in the path
            for name, p in policy.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.1)
        engine = make_engine("hf", policy, tokenizer, 1.0, 4)
        torch.manual_seed(0)
        samples = engine.sample(["03+04=", "11+02="], 4)
        learner = completion_logprobs(
            policy, samples.prompt_ids_B_L, samples.prompt_mask_B_L, samples.completion_B_C, samples.completion_mask_B_C
        )
        mask = samples.completion_mask_B_C.float()
        ratio = importance_ratio(learner, samples.sampler_logprobs_B_C, mask)
        assert mask.sum() > 0
        assert torch.allclose(ratio[mask.bool()], torch.ones(int(mask.sum())), atol=1e-4)
        # and the ratio carries the policy gradient
        (ratio.sum()).backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters() if p.requires_grad)


def test_unbiased_pass_at_k():
    from rankone.evaluate import pass_at_k

    assert pass_at_k(4, 1, 2) == 0.5  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 1, 1) == 0.25  # pass@1 is the share right
    assert pass_at_k(8, 2, 8) == 1.0  # every sample drawn: right if any is


@pytest.mark.parametrize(
    "lever",
    [{"advantage_sign": "negative"}, {"advantage_sign": "positive"}, {"reward": "format"}, {"reward": "random"}],
    ids=lambda d: "-".join(d.values()),
)
def test_each_lever_trains_and_logs_the_task_reward_beside_what_it_learned_from(study, tmp_path, lever):
    from rankone.config import RunId, validate
    from rankone.io import read_json, read_jsonl
    from rankone.train import TRAINERS
    from tests.conftest import smoke_dict

    base, at = study
    rl = {"steps": 6, "prompts_per_step": 4, "group_size": 4, "log_every": 6, **lever}
    cfg = validate(smoke_dict(results_dir=base.results_dir, experiment=base.experiment, rl=rl))
    run = RunId.parse("rl/qwen3-tiny/fullft/lr0.001/seed0")
    info = TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), tmp_path / "run")
    assert info["status"] == "completed" and read_json(tmp_path / "run" / "run.json")["steps_completed"] == 6
    steps = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert all(0.0 <= s["reward"] <= 1.0 and 0.0 <= s["train_reward"] <= 1.0 for s in steps)
    if lever.get("reward") == "random":  # coins, not the checker: the two rewards part ways
        assert any(s["train_reward"] != s["reward"] for s in steps)
    if "advantage_sign" in lever:  # the checker is still what the update learns from
        assert all(s["train_reward"] == s["reward"] for s in steps)


def test_refill_asks_for_the_missing_groups_within_the_budget():
    from rankone.train.rl import refill_size

    assert refill_size(missing=3, left=100, G=4) == 3
    assert refill_size(missing=3, left=9, G=4) == 2  # two whole groups left in the budget
    assert refill_size(missing=3, left=3, G=4) == 0  # not one group: stop
    assert refill_size(missing=0, left=100, G=4) == 0


def test_variance_filter_refills_groups_and_stops_at_plain_rls_episodes(study, tmp_path):
    from rankone.config import RunId, validate
    from rankone.io import read_json, read_jsonl
    from rankone.train import TRAINERS
    from tests.conftest import smoke_dict

    base, at = study
    rl = {"steps": 6, "prompts_per_step": 4, "group_size": 4, "log_every": 6, "checkpoint_every": 2}
    runs = {}
    for name, extra in {"plain": {}, "filter": {"variance_filter": True}}.items():
        cfg = validate(smoke_dict(results_dir=base.results_dir, experiment=base.experiment, rl={**rl, **extra}))
        run = RunId.parse("rl/qwen3-tiny/fullft/lr0.001/seed0")
        TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), tmp_path / name)
        runs[name] = read_jsonl(tmp_path / name / "metrics.jsonl"), read_json(tmp_path / name / "run.json")
    plain, filtered = runs["plain"][0], runs["filter"][0]
    budget = 6 * 4 * 4
    assert [s["episodes"] for s in plain] == [16 * (i + 1) for i in range(6)]
    assert filtered[-1]["episodes"] == budget == runs["filter"][1]["episodes"]  # equal episodes, exactly
    for s in filtered:
        assert s["groups_used"] <= 4 and s["groups_sampled"] * 4 <= budget
        assert s["groups_used"] == round(s["groups_sampled"] * (1 - s["zero_variance_share"]))
    # A step that sampled more than one batch refilled until 4 groups carried signal, or the budget ran out.
    refilled = [s for s in filtered[:-1] if s["groups_sampled"] > 4]
    assert all(s["groups_used"] == 4 for s in refilled)
    if any(s["zero_variance_share"] > 0 for s in plain):  # wasted groups exist: the filter spends them elsewhere
        assert len(filtered) < len(plain) or refilled
