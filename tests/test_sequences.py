"""The lean sampler draws what transformers' `generate` draws, bit for bit.

Every published run sampled with `generate` before the lean loop replaced it (to speed the
RL step up), so the two must agree on every token and every logit: same seed, same tokens,
same sampler log-probs, on both tiny architectures, through a LoRA adapter, on the real
SmolLM2 checkpoint with its chat template, greedy and at temperatures other than 1, with
and without left padding, and when every row stops early at <eos>.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rankone.models.load import load_base, make_policy
from rankone.models.sequences import (
    ChosenLogprob,
    completion_logprobs,
    completion_mask,
    encode_prompts,
    own_width,
    sample,
)


def generated(model, tokenizer, prompts, n, temperature, max_new_tokens, greedy=False):
    """What the sampler did before the lean loop: `generate`, with the sampler's log-probs."""
    ids_P_L, mask_P_L = encode_prompts(tokenizer, prompts)
    ids_B_L, mask_B_L = ids_P_L.repeat_interleave(n, 0), mask_P_L.repeat_interleave(n, 0)
    sampling = {} if greedy else {"temperature": temperature, "top_k": 0, "top_p": 1.0}
    with torch.no_grad():
        out = model.generate(
            input_ids=ids_B_L,
            attention_mask=mask_B_L,
            do_sample=not greedy,
            max_new_tokens=max_new_tokens,
            min_new_tokens=0,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **sampling,
        )
    completion_B_C = out.sequences[:, ids_B_L.shape[1] :]
    logits_B_C_V = torch.stack(out.logits, dim=1).float() / (1.0 if greedy else temperature)
    logprobs_B_C = torch.gather(F.log_softmax(logits_B_C_V, -1), 2, completion_B_C.unsqueeze(-1)).squeeze(-1)
    return completion_B_C, logprobs_B_C * completion_mask(completion_B_C, tokenizer.eos_token_id)


def assert_same_draws(model, tokenizer, prompts, n, temperature, max_new_tokens, greedy=False, seeds=range(4)):
    model.eval()
    lengths = set()
    for seed in seeds:
        torch.manual_seed(seed)
        expected_B_C, expected_logprobs_B_C = generated(
            model, tokenizer, prompts, n, temperature, max_new_tokens, greedy
        )
        torch.manual_seed(seed)
        got = sample(model, tokenizer, prompts, n, temperature, max_new_tokens, greedy)
        assert torch.equal(got.completion_B_C, expected_B_C), seed
        assert torch.equal(got.sampler_logprobs_B_C, expected_logprobs_B_C), seed
        assert got.prompt_ids_B_L.shape[0] == len(prompts) * n
        lengths.add(expected_B_C.shape[1])
    return lengths


@pytest.mark.parametrize("model_name", ["qwen3-tiny", "llama-tiny"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_lean_sampler_draws_what_generate_draws(study, model_name, temperature):
    cfg, at = study
    model, tokenizer = load_base(at.model(model_name))
    padded = ["3+4=", "12+30=", "7+8=", "1+1="]  # different lengths: left padding
    assert_same_draws(model, tokenizer, padded, 8, temperature, 6)
    assert_same_draws(model, tokenizer, ["3+4=", "5+6="], 3, temperature, 6)  # one length: no mask at all
    assert_same_draws(model, tokenizer, padded, 1, temperature, 6, greedy=True, seeds=[0])


def test_lean_sampler_through_a_lora_adapter_and_early_stops(study):
    cfg, at = study
    model, tokenizer = load_base(at.model("qwen3-tiny"))
    policy = make_policy(model, "lora-r2", cfg.lora, cfg.scope("lora-r2"))
    with torch.no_grad():  # a trained-looking adapter, so it changes what is drawn
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    assert_same_draws(policy, tokenizer, ["3+4=", "12+30=", "7+8="], 4, 1.0, 6)
    # An <eos> made almost certain: every row stops before max_new_tokens, and generate stops with them.
    bias_V = torch.zeros(model.lm_head.out_features)
    bias_V[tokenizer.eos_token_id] = 8.0
    model.lm_head.bias = torch.nn.Parameter(bias_V, requires_grad=False)
    lengths = assert_same_draws(policy, tokenizer, ["3+4=", "12+30="], 4, 1.0, 6)
    assert max(lengths) < 6


def test_lean_sampler_on_the_real_checkpoint(smollm2):
    cfg, at, _ = smollm2
    model, tokenizer = load_base(at.model("smollm2-135m"))
    assert tokenizer.chat_template and tokenizer.pad_token_id == tokenizer.eos_token_id
    prompts = ["What is 3 + 4?", "Compute 12 * 30 and give only the number."]
    assert_same_draws(model, tokenizer, prompts, 4, 1.0, 8, seeds=[0])


def test_a_tokenizer_without_a_pad_token_pads_prompts_with_eos(tmp_path):
    """Llama-3.x base tokenizers have no pad token: loaded (and saved by the models stage) through
    with_pad_token, a batch of prompts of different lengths still pads, and the sampler finishes rows."""
    import transformers

    from rankone.models import build_tokenizer
    from rankone.models.load import load_tokenizer
    from rankone.models.sequences import encode_prompts, sample

    bare = build_tokenizer()
    bare.pad_token = None
    assert bare.pad_token is None
    with pytest.raises(ValueError):
        encode_prompts(bare, ["3+4=", "12+30="])  # what the rollouts stage met before
    config = transformers.LlamaConfig(
        vocab_size=len(bare),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        bos_token_id=bare.bos_token_id,
        eos_token_id=bare.eos_token_id,
    )
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    bare.save_pretrained(tmp_path)
    tokenizer = load_tokenizer(tmp_path)
    assert tokenizer.pad_token_id == tokenizer.eos_token_id and tokenizer.padding_side == "left"
    ids_B_L, mask_B_L = encode_prompts(tokenizer, ["3+4=", "12+30="])
    assert mask_B_L[0, 0] == 0 and ids_B_L[0, 0] == tokenizer.eos_token_id  # left-padded with <eos>
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    torch.manual_seed(0)
    samples = sample(model, tokenizer, ["3+4=", "12+30="], 2, 1.0, 4)
    assert samples.completion_B_C.shape[0] == 4 and len(samples.texts) == 4


def test_chosen_logprob_from_bf16_logits_matches_autograds_log_softmax():
    """The bf16 path's log-probs and their gradient (recomputed in the backward, no fp32 copy kept)
    are autograd's fp32 log-softmax of the same logits at the chosen tokens."""
    gen = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(2, 5, 50, generator=gen)).to(torch.bfloat16).requires_grad_()
    tokens = torch.randint(0, 50, (2, 5), generator=gen)
    weights = torch.randn(2, 5, generator=gen)
    ours = ChosenLogprob.apply(logits, tokens, 0.7)
    (ours * weights).sum().backward()
    ours_grad, logits.grad = logits.grad.clone(), None
    reference = torch.gather(F.log_softmax(logits.float() / 0.7, -1), -1, tokens.unsqueeze(-1)).squeeze(-1)
    (reference * weights).sum().backward()
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, reference, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours_grad.float(), logits.grad.float(), rtol=1e-2, atol=1e-3)  # bf16 gradients
    assert ours_grad.dtype == torch.bfloat16 and ours_grad.abs().sum() > 0


def test_rows_cut_to_their_own_width_score_what_the_whole_width_scores(study):
    """A micro-batch cut to its own width (off the CPU) drops only padding: its rows' log-probs are
    those the step's full width gives, to fp32 rounding, and shorter than the step's."""
    cfg, at = study
    model, tokenizer = load_base(at.model("llama-tiny"))
    torch.manual_seed(0)
    s = sample(model, tokenizer, ["3+4=", "12+30=", "7+8=", "100+200="], 2, 1.0, 6)
    rows = slice(0, 2)  # the shortest prompt's samples: left padding the longer prompts needed
    whole = [t[rows] for t in (s.prompt_ids_B_L, s.prompt_mask_B_L, s.completion_B_C, s.completion_mask_B_C)]
    cut = own_width(*whole)
    assert cut[0].shape[1] < whole[0].shape[1] and bool(cut[1][:, 0].any())
    assert bool(cut[3][:, -1].any()) and cut[3].sum() == whole[3].sum()
    with torch.no_grad():
        full_C = completion_logprobs(model, *whole)
        cut_c = completion_logprobs(model, *cut)
    torch.testing.assert_close(F.pad(cut_c, (0, full_C.shape[1] - cut_c.shape[1])), full_C, rtol=1e-5, atol=1e-6)
