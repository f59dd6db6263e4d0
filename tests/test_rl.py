import torch

from rankone.info import entropy_bits
from rankone.models.load import load_base, make_policy
from rankone.models.sequences import completion_logprobs
from rankone.rollouts import make_engine
from rankone.train.rl import group_advantages, importance_ratio


def test_advantages_are_group_centred_without_std():
    rewards_P_G = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    advantages_P_G, keep_P = group_advantages(rewards_P_G)
    assert torch.allclose(advantages_P_G[0], torch.tensor([0.75, -0.25, -0.25, -0.25]))
    assert torch.allclose(advantages_P_G[3], torch.tensor([0.5, 0.5, -0.5, -0.5]))  # no division by std
    assert torch.allclose(advantages_P_G.sum(-1), torch.zeros(4))
    assert keep_P.tolist() == [True, False, False, True]  # all-equal groups are skipped


def test_entropy_of_known_distributions():
    assert entropy_bits([1, 1, 1, 1]) == 0.0
    assert entropy_bits([0, 1, 0, 1]) == 1.0
    assert abs(entropy_bits([0, 1, 2, 3]) - 2.0) < 1e-12


def test_importance_ratio_is_one_on_policy(study):
    cfg, at = study
    for model_name in cfg.models:
        model, tokenizer = load_base(at.model(model_name))
        policy = make_policy(model, 1, 32, "all-linear")
        with torch.no_grad():  # a non-zero adapter, so LoRA is really in the path
            for name, p in policy.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.1)
        engine = make_engine("hf", policy, tokenizer, 1.0, 4)
        torch.manual_seed(0)
        samples = engine.sample(["03+04=", "11+02="], 4)
        learner = completion_logprobs(policy, samples.prompt_ids_B_L, samples.prompt_mask_B_L,
                                      samples.completion_B_C, samples.completion_mask_B_C)
        mask = samples.completion_mask_B_C.float()
        ratio = importance_ratio(learner, samples.sampler_logprobs_B_C, mask)
        assert mask.sum() > 0
        assert torch.allclose(ratio[mask.bool()], torch.ones(int(mask.sum())), atol=1e-4)
        # and the ratio carries the policy gradient
        (ratio.sum()).backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters() if p.requires_grad)
