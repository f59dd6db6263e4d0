"""Token-level plumbing shared by every stage: encoding, sampling, log-probs.

Shapes are suffixed: B batch (sequences), L prompt length, C completion length, T = L + C,
V vocabulary; the trainers add P (prompts) and G (samples per prompt, a group).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class Samples:
    """What a sampler returns for B = len(prompts) * n sequences (prompt-major order)."""

    prompt_ids_B_L: torch.Tensor
    prompt_mask_B_L: torch.Tensor
    completion_B_C: torch.Tensor
    completion_mask_B_C: torch.Tensor  # 1 up to and including <eos>
    sampler_logprobs_B_C: torch.Tensor  # log p_sampler(token), 0 where masked
    texts: list[str]  # completion text before <eos>
    finish_reasons: list[str]  # "stop" (emitted <eos>) or "length"

    def to(self, device) -> Samples:
        """The same samples with every tensor on `device`."""
        tensors = {
            k: getattr(self, k).to(device)
            for k in (
                "prompt_ids_B_L",
                "prompt_mask_B_L",
                "completion_B_C",
                "completion_mask_B_C",
                "sampler_logprobs_B_C",
            )
        }
        return Samples(**tensors, texts=self.texts, finish_reasons=self.finish_reasons)

    @classmethod
    def cat(cls, parts: list[Samples], pad_id: int) -> Samples:
        """The rows of several samplers' batches in one, in order: prompts left-padded and completions
        right-padded with `pad_id` to the widest, masks and log-probs 0 there."""
        L, C = (max(getattr(p, k).shape[1] for p in parts) for k in ("prompt_ids_B_L", "completion_B_C"))

        def padded(key: str, width: int, value, left: bool) -> torch.Tensor:
            rows = []
            for part in parts:
                t = getattr(part, key)
                gap = width - t.shape[1]
                rows.append(F.pad(t, (gap, 0) if left else (0, gap), value=value))
            return torch.cat(rows)

        return cls(
            padded("prompt_ids_B_L", L, pad_id, True),
            padded("prompt_mask_B_L", L, 0, True),
            padded("completion_B_C", C, pad_id, False),
            padded("completion_mask_B_C", C, 0, False),
            padded("sampler_logprobs_B_C", C, 0.0, False),
            [t for p in parts for t in p.texts],
            [r for p in parts for r in p.finish_reasons],
        )


def encode_prompts(tokenizer, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompt ids and mask. A tokenizer with a chat template (kept by the models stage
    for chat presets only) gets each prompt as one user message, rendered with the template up to
    the assistant's turn; the template then brings its own special tokens."""
    if tokenizer.chat_template:
        texts = [
            tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
            for p in prompts
        ]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    else:
        enc = tokenizer(prompts, return_tensors="pt", padding=True)
    return enc.input_ids, enc.attention_mask


def encode_completions(tokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded completion ids, each ending in <eos>, with their mask."""
    rows = [tokenizer(t, add_special_tokens=False).input_ids + [tokenizer.eos_token_id] for t in texts]
    width = max(len(r) for r in rows)
    ids_B_C = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask_B_C = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids_B_C[i, : len(r)] = torch.tensor(r)
        mask_B_C[i, : len(r)] = 1
    return ids_B_C, mask_B_C


def completion_mask(completion_B_C: torch.Tensor, eos_id: int) -> torch.Tensor:
    """1 for every token up to and including the first <eos>, 0 after."""
    is_eos_B_C = (completion_B_C == eos_id).long()
    after_eos_B_C = is_eos_B_C.cumsum(-1) - is_eos_B_C  # eos tokens seen strictly before
    return (after_eos_B_C == 0).long()


def decode_completions(tokenizer, rows: list[list[int]]) -> list[str]:
    """Completion text before the first <eos> (the whole row when there is none)."""
    eos = tokenizer.eos_token_id
    return [tokenizer.decode(r[: r.index(eos)] if eos in r else r, skip_special_tokens=True) for r in rows]


# Log-probs are taken over the vocabulary for at most this many (sequence, position) pairs at a time,
# so the fp32 copy of the logits and its log-softmax are never vocabulary-sized for the whole batch.
LOGPROB_CHUNK_TOKENS = 8192


def completion_logprobs(
    model,
    prompt_ids_B_L,
    prompt_mask_B_L,
    completion_B_C,
    completion_mask_B_C,
    temperature: float = 1.0,
    entropy: bool = False,
):
    """log p(completion token | prefix) under `model` at `temperature`, on the model's device; 0 where masked.
    With `entropy`, (log-probs, the entropy of the distribution each token was drawn from, 0 where masked).

    The fp32 log-softmax runs over chunks of sequences (LOGPROB_CHUNK_TOKENS); each row's
    values are what one pass over the whole batch gives, bit for bit. Off the CPU only the completion's
    positions get logits (`logits_to_keep`; the CPU studies keep their bytes), and low-precision logits
    (bf16 autocast) go through `ChosenLogprob`, which keeps no fp32 copy of them for the backward."""
    device = model.device
    prompt_ids_B_L, prompt_mask_B_L, completion_B_C, completion_mask_B_C = (
        t.to(device) for t in (prompt_ids_B_L, prompt_mask_B_L, completion_B_C, completion_mask_B_C)
    )
    ids_B_T = torch.cat([prompt_ids_B_L, completion_B_C], dim=1)
    attn_B_T = torch.cat([prompt_mask_B_L, torch.ones_like(completion_B_C)], dim=1)
    positions_B_T = (attn_B_T.cumsum(-1) - 1).clamp(min=0)
    L, (B, C) = prompt_ids_B_L.shape[1], completion_B_C.shape
    keep = {} if device.type == "cpu" else {"logits_to_keep": C + 1}  # the completion's positions, and one more
    logits_B_T_V = model(input_ids=ids_B_T, attention_mask=attn_B_T, position_ids=positions_B_T, **keep).logits
    if keep:
        L = 1  # the kept logits start at position L - 1
    rows = max(1, LOGPROB_CHUNK_TOKENS // max(C, 1))
    if entropy:
        parts = [
            chosen_and_entropy(
                logits_B_T_V[i : i + rows, L - 1 : -1].float() / temperature, completion_B_C[i : i + rows]
            )
            for i in range(0, B, rows)
        ]
        return (
            torch.cat([p[0] for p in parts]) * completion_mask_B_C,
            torch.cat([p[1] for p in parts]) * completion_mask_B_C,
        )
    if logits_B_T_V.dtype != torch.float32:
        parts = [
            ChosenLogprob.apply(logits_B_T_V[i : i + rows, L - 1 : -1], completion_B_C[i : i + rows], temperature)
            for i in range(0, B, rows)
        ]
        return torch.cat(parts) * completion_mask_B_C
    logprobs_B_C = torch.cat(
        [
            chosen_logprobs(logits_B_T_V[i : i + rows, L - 1 : -1].float() / temperature, completion_B_C[i : i + rows])
            for i in range(0, B, rows)
        ]
    )
    return logprobs_B_C * completion_mask_B_C


def own_width(prompt_ids_b_L, prompt_mask_b_L, completion_b_C, completion_mask_b_C):
    """Some rows of a step cut to their own width: the prompt columns that are padding in every row
    (prompts are left-padded) and the completion columns past every row's last scored token go."""
    first = int(prompt_mask_b_L.any(0).nonzero()[0]) if prompt_mask_b_L.any() else 0
    last = int(completion_mask_b_C.any(0).nonzero()[-1]) + 1 if completion_mask_b_C.any() else 1
    return (
        prompt_ids_b_L[:, first:],
        prompt_mask_b_L[:, first:],
        completion_b_C[:, :last],
        completion_mask_b_C[:, :last],
    )


class ChosenLogprob(torch.autograd.Function):
    """log softmax(logits / temperature) at the chosen tokens, in fp32, from low-precision logits; keeps
    only the logits themselves and one log-sum-exp per position for the backward, which recomputes the
    fp32 softmax (autograd's log-softmax keeps its fp32 output: 4 bytes a vocabulary entry a token, ~10 GB
    at gpu-1's shapes)."""

    @staticmethod
    def forward(ctx, logits_B_C_V, tokens_B_C, temperature: float):
        scores_B_C_V = logits_B_C_V.float() / temperature
        lse_B_C = torch.logsumexp(scores_B_C_V, -1)
        chosen_B_C = torch.gather(scores_B_C_V, -1, tokens_B_C.unsqueeze(-1)).squeeze(-1) - lse_B_C
        ctx.save_for_backward(logits_B_C_V, tokens_B_C, lse_B_C)
        ctx.temperature = temperature
        return chosen_B_C

    @staticmethod
    def backward(ctx, grad_B_C):
        logits_B_C_V, tokens_B_C, lse_B_C = ctx.saved_tensors
        # d/ds (s_token - lse) = onehot(token) - softmax(s); s = logits / temperature
        grad_B_C_V = torch.exp(logits_B_C_V.float() / ctx.temperature - lse_B_C.unsqueeze(-1))
        grad_B_C_V.mul_(-grad_B_C.unsqueeze(-1))
        grad_B_C_V.scatter_add_(-1, tokens_B_C.unsqueeze(-1), grad_B_C.unsqueeze(-1))
        return (grad_B_C_V / ctx.temperature).to(logits_B_C_V.dtype), None, None


def chosen_logprobs(scores_B_C_V: torch.Tensor, tokens_B_C: torch.Tensor) -> torch.Tensor:
    """log softmax(scores) at the chosen tokens."""
    return torch.gather(F.log_softmax(scores_B_C_V, -1), -1, tokens_B_C.unsqueeze(-1)).squeeze(-1)


def chosen_and_entropy(scores_B_C_V: torch.Tensor, tokens_B_C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log softmax(scores) at the chosen tokens, and the entropy of softmax(scores) at each position."""
    logp_B_C_V = F.log_softmax(scores_B_C_V, -1)
    chosen_B_C = torch.gather(logp_B_C_V, -1, tokens_B_C.unsqueeze(-1)).squeeze(-1)
    return chosen_B_C, -(logp_B_C_V.exp() * logp_B_C_V).sum(-1)


@torch.no_grad()
def sample(
    model,
    tokenizer,
    prompts: list[str],
    n: int,
    temperature: float,
    max_new_tokens: int,
    greedy: bool = False,
) -> Samples:
    """`n` completions per prompt, with the sampler's log-probs.

    A lean version of transformers' `generate` (multinomial sampling, or argmax when `greedy`):
    it draws the same tokens from the same logits, bit for bit (tests/test_sequences.py checks it
    against `generate`), without `generate`'s per-call set-up. Tokens are drawn from
    softmax(logits / temperature) and nothing else: the model's own generation config
    (repetition penalty and the like) is never applied, so the log-probs returned are those of
    the distribution sampled.

    Sampling uses torch's global RNG: seed it before calling for reproducible draws.
    """
    prompt_ids_B_L, prompt_mask_B_L = (t.to(model.device) for t in encode_prompts(tokenizer, prompts))
    prompt_ids_B_L = prompt_ids_B_L.repeat_interleave(n, 0)
    prompt_mask_B_L = prompt_mask_B_L.repeat_interleave(n, 0)
    completion_B_C, logprobs_B_C = draw(
        model,
        prompt_ids_B_L,
        prompt_mask_B_L,
        temperature,
        max_new_tokens,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
        greedy,
    )
    mask_B_C = completion_mask(completion_B_C, tokenizer.eos_token_id)
    rows = completion_B_C.tolist()
    texts = decode_completions(tokenizer, rows)
    reasons = ["stop" if tokenizer.eos_token_id in row else "length" for row in rows]
    return Samples(prompt_ids_B_L, prompt_mask_B_L, completion_B_C, mask_B_C, logprobs_B_C * mask_B_C, texts, reasons)


def draw(
    model,
    prompt_ids_B_L,
    prompt_mask_B_L,
    temperature: float,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    greedy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The token loop of `sample`: one completion per row and each token's float32 log-prob under
    the scores it was drawn from (logits / temperature; the raw logits when `greedy`), the only
    part of the vocabulary-sized scores kept. Every input the model sees
    is what `generate` (transformers 5.19, `_sample` with a DynamicCache) would pass it:
    position ids from the attention mask, no mask when nothing is padded, logits for the last
    position only, and the same batch shapes (even one prompt's repeated rows go through the
    model together: a matmul's last bits can depend on how many rows it multiplies). A row that
    has emitted <eos> gets the pad token after it; the loop stops when every row has, or at
    `max_new_tokens`."""
    from transformers import DynamicCache

    positions_B_T = (prompt_mask_B_L.cumsum(-1) - 1).masked_fill(prompt_mask_B_L == 0, 0)
    mask_B_T = None if bool(prompt_mask_B_L.all()) else prompt_mask_B_L
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    ids_B_T = prompt_ids_B_L
    unfinished_B = torch.ones(len(prompt_ids_B_L), dtype=torch.long, device=prompt_ids_B_L.device)
    tokens, logprobs = [], []
    while True:
        out = model(
            input_ids=ids_B_T,
            attention_mask=mask_B_T,
            position_ids=positions_B_T,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
            return_dict=True,
        )
        logits_B_V = out.logits[:, -1].to(dtype=torch.float32)
        if greedy:
            scores_B_V = logits_B_V
            token_B = scores_B_V.argmax(-1)
        else:
            scores_B_V = logits_B_V / temperature if temperature != 1.0 else logits_B_V
            token_B = torch.multinomial(F.softmax(scores_B_V, dim=-1), num_samples=1).squeeze(1)
        token_B = token_B * unfinished_B + pad_id * (1 - unfinished_B)
        tokens.append(token_B)
        logprobs.append(chosen_logprobs(scores_B_V, token_B))
        unfinished_B = unfinished_B & (token_B != eos_id).long()
        if len(tokens) == max_new_tokens or not unfinished_B.any():
            return torch.stack(tokens, dim=1), torch.stack(logprobs, dim=1)
        ids_B_T, positions_B_T = token_B[:, None], positions_B_T[:, -1:] + 1
        if mask_B_T is not None:
            mask_B_T = torch.cat([mask_B_T, mask_B_T.new_ones((len(mask_B_T), 1))], dim=-1)
