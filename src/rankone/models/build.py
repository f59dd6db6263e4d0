"""The models stage: build a base model and warm-start it.

A tiny preset is a real transformers model built from its config class, then
pretrained on the RL task's warm-up split (problems disjoint from RL train, val and
test) with answers partly corrupted, so that on the RL prompts, which it has never
seen, the base policy is right some of the time but not always (RL needs reward
variance to learn from, and has to learn rather than recall). Its pass@1 on RL train
prompts is recorded.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from rankone.config import StudyConfig
from rankone.io import atomic_path, log, provenance, read_jsonl, seed_everything, write_json
from rankone.models import HubPreset, LocalPreset, build_tokenizer, preset
from rankone.models.sequences import completion_logprobs, encode_completions, encode_prompts, sample


def build(cfg: StudyConfig, model_name: str, data_root: Path, out_dir: Path) -> dict:
    """`data_root` holds the data stage's folders, one per regime (rl/, sft/)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.time()
    seed_everything(cfg.seed, cfg.threads)
    spec = preset(model_name, cfg.local_models)
    with atomic_path(out_dir) as tmp:
        if isinstance(spec, (HubPreset, LocalPreset)):
            source = spec.path if isinstance(spec, LocalPreset) else spec.repo_id
            revision = None if isinstance(spec, LocalPreset) else spec.revision
            model = AutoModelForCausalLM.from_pretrained(source, revision=revision)
            tokenizer = AutoTokenizer.from_pretrained(source, revision=revision)
            stats = {}
        else:
            tokenizer = build_tokenizer()
            config = spec.make_config(
                cfg.architecture,
                len(tokenizer),
                tokenizer.bos_token_id,
                tokenizer.eos_token_id,
                tokenizer.pad_token_id,
            )
            model = AutoModelForCausalLM.from_config(config)
            stats = pretrain(cfg, model, tokenizer, data_root, model_name)
        model.generation_config.do_sample = True
        model.generation_config.top_k = None
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        info = {
            "model": model_name,
            "class": type(model).__name__,
            "parameters": sum(p.numel() for p in model.parameters()),
            **stats,
            "provenance": provenance(cfg, "models", None, started),
        }
        write_json(tmp / "rankone.json", info)
    return info


def pretrain(cfg: StudyConfig, model, tokenizer, data_root: Path, model_name: str) -> dict:
    p = cfg.pretrain
    task = cfg.tasks["rl"].task()
    total = p.steps * p.batch_size
    n_format = round(total * p.sft_format_share) if "sft" in cfg.tasks else 0
    corpus = task.corpus(read_jsonl(data_root / "rl" / "warmup.jsonl"), p.corruption, total - n_format, cfg.seed)
    if n_format:
        # The SFT task's warm-up table: its format, none of the facts SFT trains on.
        warmup = read_jsonl(data_root / "sft" / "warmup.jsonl")
        corpus += cfg.tasks["sft"].task().corpus(warmup, 0.0, n_format, cfg.seed)
        random.Random(f"mix:{cfg.seed}").shuffle(corpus)
    optimizer = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=0.0)
    model.train()
    t0 = time.time()
    losses = []
    for step in range(p.steps):
        batch = corpus[step * p.batch_size : (step + 1) * p.batch_size]
        prompt_ids_B_L, prompt_mask_B_L = encode_prompts(tokenizer, [q for q, _ in batch])
        completion_B_C, mask_B_C = encode_completions(tokenizer, [a for _, a in batch])
        logprobs_B_C = completion_logprobs(model, prompt_ids_B_L, prompt_mask_B_L, completion_B_C, mask_B_C)
        loss = -logprobs_B_C.sum() / mask_B_C.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % max(1, p.steps // 10) == 0 or step + 1 == p.steps:
            log.info("%s pretrain step %d/%d loss %.4f (%.0f s)", model_name, step + 1, p.steps, loss.item(), time.time() - t0)
    model.eval()
    torch.manual_seed(cfg.seed)
    rows = read_jsonl(data_root / "rl" / "train.jsonl")  # never in the warm-up
    prompts = [r["prompt"] for r in rows[: p.eval_prompts]]
    answers = [r["answer"] for r in rows[: p.eval_prompts]]
    samples = sample(model, tokenizer, prompts, 1, 1.0, cfg.rollout.max_new_tokens)
    pass_at_1 = sum(task.reward(t, a) for t, a in zip(samples.texts, answers)) / len(prompts)
    log.info("%s base pass@1 on %d RL train prompts: %.3f", model_name, len(prompts), pass_at_1)
    return {
        "pretrain_seconds": round(time.time() - t0, 2),
        "pretrain_final_loss": sum(losses[-20:]) / len(losses[-20:]),
        "base_pass_at_1": pass_at_1,
        "base_pass_at_1_prompts": len(prompts),
    }
