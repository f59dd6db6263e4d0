"""Real vLLM on CPU against transformers + peft: parity, freshness, and a stale engine caught."""

from __future__ import annotations

import pytest
import torch

from rankone.models.load import load_base, make_policy
from rankone.models.sequences import completion_logprobs, sample
from rankone.train.pg import StaleSamplerError, check_fresh, group_advantages, policy_gradient_loss, sampler_gap

pytest.importorskip("vllm")

PROMPTS = ["3+4=", "1+2=", "7+7=", "9+1="]  # the smoke study's format (operands 0-9)


@pytest.fixture(scope="module")
def engines(study):
    """One vLLM engine per (model, method), started once and reused, as in a run."""
    from rankone.rollouts import make_engine

    cfg, at = study
    made = {}

    def get(model_name: str, rank: int | None, random_adapter: bool = False):
        key = (model_name, rank, random_adapter)
        if key not in made:
            model, tokenizer = load_base(at.model(model_name))
            policy = make_policy(model, "fullft" if rank is None else f"lora-r{rank}", cfg.lora, "all-linear")
            if random_adapter:
                with torch.no_grad():  # a random non-zero adapter: LoRA is really in the path
                    gen = torch.Generator().manual_seed(1)
                    for name, p in policy.named_parameters():
                        if "lora_B" in name:
                            p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
            engine = make_engine("vllm", policy, tokenizer, 1.0, 4, at.model(model_name), rank, 0)
            made[key] = (policy, tokenizer, engine)
        return made[key]

    yield get
    for _, _, engine in made.values():
        engine.close()


def learner_logprobs(policy, samples):
    with torch.no_grad():
        return completion_logprobs(
            policy, samples.prompt_ids_B_L, samples.prompt_mask_B_L, samples.completion_B_C, samples.completion_mask_B_C
        )


def assert_parity(
    policy, tokenizer, engine, prompts: list[str], max_new_tokens: int, mean_tol: float, max_tol: float
) -> None:
    """vLLM's sampled tokens score the same under transformers + peft, and greedy decoding agrees."""
    torch.manual_seed(0)
    samples = engine.sample(prompts, 4)
    assert samples.completion_mask_B_C.sum() > 0
    gap_mean, gap_max = sampler_gap(
        learner_logprobs(policy, samples), samples.sampler_logprobs_B_C, samples.completion_mask_B_C
    )
    assert gap_mean < mean_tol and gap_max < max_tol, (gap_mean, gap_max)
    greedy_vllm = engine.sample(prompts, 1, greedy=True)
    policy.eval()
    greedy_hf = sample(policy, tokenizer, prompts, 1, 1.0, max_new_tokens, greedy=True)
    assert greedy_vllm.texts == greedy_hf.texts
    width = greedy_vllm.completion_B_C.shape[1]
    assert torch.equal(
        greedy_vllm.completion_B_C * greedy_vllm.completion_mask_B_C,
        greedy_hf.completion_B_C[:, :width] * greedy_vllm.completion_mask_B_C,
    )


@pytest.mark.parametrize("model_name", ["qwen3-tiny", "llama-tiny"])
def test_vllm_matches_transformers_peft_rank1(engines, model_name):
    # fp32 noise: the mean stays near 1e-6; the max over tokens reached 1.3e-4 on a low-probability token
    # of the smoke models (the trainer stops a run at a *mean* gap of rl.max_logprob_gap = 1e-3).
    assert_parity(*engines(model_name, 1, random_adapter=True), PROMPTS, 4, mean_tol=1e-5, max_tol=1e-3)


def rl_update(policy, engine, lr: float = 0.05, prompts: list[str] = PROMPTS) -> None:
    """One policy-gradient step as the trainer takes it: rollouts from the engine, group-centred
    advantages, the trainer's importance-ratio loss. The reward (the group's first completion
    again) has variance whenever a group's samples differ, so the step really moves the weights."""
    torch.manual_seed(11)
    G = 8
    samples = engine.sample(prompts, G)
    groups = [samples.texts[i : i + G] for i in range(0, len(samples.texts), G)]
    rewards_P_G = torch.tensor([[float(t == group[0]) for t in group] for group in groups])
    advantages_P_G, keep_P = group_advantages(rewards_P_G)
    assert keep_P.any()
    policy.train()
    learner = completion_logprobs(
        policy, samples.prompt_ids_B_L, samples.prompt_mask_B_L, samples.completion_B_C, samples.completion_mask_B_C
    )
    loss = policy_gradient_loss(
        learner, samples.sampler_logprobs_B_C, samples.completion_mask_B_C.float(), advantages_P_G, keep_P
    )
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=lr)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    policy.eval()


@pytest.mark.parametrize("rank", [1, None], ids=["lora-r1", "fullft"])
def test_sampler_follows_the_learner_after_an_update(engines, rank):
    policy, tokenizer, engine = engines("qwen3-tiny", rank)
    torch.manual_seed(5)
    before = engine.sample(PROMPTS, 2)
    old = learner_logprobs(policy, before)
    rl_update(policy, engine)
    engine.sync(policy)
    torch.manual_seed(5)
    after = engine.sample(PROMPTS, 2)
    new = learner_logprobs(policy, after)
    gap_mean, gap_max = sampler_gap(new, after.sampler_logprobs_B_C, after.completion_mask_B_C)
    assert gap_max < 1e-4
    # the sampler's log-probs moved: rescore the old samples under the new policy
    moved = (learner_logprobs(policy, before) - old).abs().max()
    assert moved > 1e-3
    check_fresh(gap_mean, 1e-3, "fresh")  # does not raise


@pytest.mark.parametrize("rank", [1, None], ids=["lora-r1", "fullft"])
def test_a_stale_engine_fails_the_check(engines, rank):
    policy, tokenizer, engine = engines("llama-tiny", rank)
    rl_update(policy, engine, lr=0.1)  # and no engine.sync: the bug
    torch.manual_seed(3)
    samples = engine.sample(PROMPTS, 4)
    gap_mean, _ = sampler_gap(
        learner_logprobs(policy, samples), samples.sampler_logprobs_B_C, samples.completion_mask_B_C
    )
    with pytest.raises(StaleSamplerError, match="not sampling the current policy"):
        check_fresh(gap_mean, 1e-3, "stale")
    engine.sync(policy)  # repaired, the same check passes
    torch.manual_seed(3)
    samples = engine.sample(PROMPTS, 4)
    gap_mean, _ = sampler_gap(
        learner_logprobs(policy, samples), samples.sampler_logprobs_B_C, samples.completion_mask_B_C
    )
    check_fresh(gap_mean, 1e-3, "repaired")


@pytest.fixture(scope="module")
def real_engine(smollm2):
    """vLLM serving SmolLM2-135M-Instruct (converted from its GGUF) with a random rank-1 adapter."""
    from rankone.rollouts import make_engine

    cfg, at, _ = smollm2
    model, tokenizer = load_base(at.model("smollm2-135m"))
    policy = make_policy(model, "lora-r1", cfg.lora, "all-linear")
    with torch.no_grad():
        gen = torch.Generator().manual_seed(1)
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    engine = make_engine("vllm", policy, tokenizer, 1.0, 8, at.model("smollm2-135m"), 1, 0)
    yield policy, tokenizer, engine
    engine.close()


REAL_PROMPTS = ["Calculate 3 + 4.", "Calculate -2 + 9."]


def test_vllm_matches_transformers_peft_on_a_real_135m_llama(real_engine):
    # 30 layers of fp32 in two implementations: a looser per-token bound than the tiny models'.
    assert_parity(*real_engine, REAL_PROMPTS, 8, mean_tol=1e-4, max_tol=1e-2)


def test_the_sampler_follows_the_learner_on_a_real_135m_llama(real_engine):
    policy, tokenizer, engine = real_engine
    rl_update(policy, engine, lr=0.01, prompts=REAL_PROMPTS)  # and no engine.sync yet: stale
    torch.manual_seed(3)
    samples = engine.sample(REAL_PROMPTS, 4)
    stale, _ = sampler_gap(learner_logprobs(policy, samples), samples.sampler_logprobs_B_C, samples.completion_mask_B_C)
    with pytest.raises(StaleSamplerError):
        check_fresh(stale, 1e-3, "stale")
    engine.sync(policy)
    torch.manual_seed(3)
    samples = engine.sample(REAL_PROMPTS, 4)
    fresh, _ = sampler_gap(learner_logprobs(policy, samples), samples.sampler_logprobs_B_C, samples.completion_mask_B_C)
    check_fresh(fresh, 1e-3, "fresh")
    assert fresh < stale / 10
