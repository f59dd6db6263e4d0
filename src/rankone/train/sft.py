"""Supervised fine-tuning: next-token cross-entropy on the answer tokens.

Examples are visited in a fresh seeded shuffle each epoch; loss is the mean
negative log-likelihood per answer token (nats), logged every step.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from rankone.config import RunId, StudyConfig
from rankone.info import NATS_TO_BITS
from rankone.data import read_split
from rankone.io import log
from rankone.models.sequences import completion_logprobs, encode_completions, encode_prompts
from rankone.train.common import Run, diverged, progress


def batches(rows: list[dict], batch_size: int, seed: int):
    """Endless epochs of `rows` in a seeded shuffle, `batch_size` at a time."""
    rng = random.Random(f"sft:{seed}")
    order: list[dict] = []
    while True:
        if len(order) < batch_size:
            epoch = rows[:]
            rng.shuffle(epoch)
            order += epoch
        yield order[:batch_size]
        order = order[batch_size:]


def sft_loss(logprobs_B_C, tokens: int):
    """Negative log-likelihood of the answers, per answer token of the step (nats)."""
    return -logprobs_B_C.sum() / tokens


def accumulate(ctx, batch: list[dict], micro_batch: int | None) -> tuple[torch.Tensor, int]:
    """Forward and backward over `batch` in micro-batches of `micro_batch` examples (all at once when
    None), each padded on its own and normalised by the whole batch's answer tokens, so that the
    accumulated gradients are the whole batch's. Returns the batch's loss and its answer tokens; a
    loss that is not finite gets no backward (the trainer stops on it). With several processes each
    takes its share of the examples, and the loss is summed over them."""
    _, mask_B_C = encode_completions(ctx.tokenizer, [row["answer"] for row in batch])
    tokens = int(mask_B_C.sum())
    loss = torch.zeros((), device=ctx.device)
    share = batch[ctx.group.rows(len(batch), "examples a step (sft.batch_size)")]  # all of it in one process
    for i in range(0, len(share), micro_batch or len(share)):
        part = share[i : i + (micro_batch or len(share))]
        prompt_ids_b_L, prompt_mask_b_L = encode_prompts(ctx.tokenizer, [row["prompt"] for row in part])
        completion_b_C, mask_b_C = encode_completions(ctx.tokenizer, [row["answer"] for row in part])
        with ctx.compute():
            logprobs_b_C = completion_logprobs(ctx.policy, prompt_ids_b_L, prompt_mask_b_L, completion_b_C, mask_b_C)
        part_loss = sft_loss(logprobs_b_C, tokens)
        if diverged(float(part_loss.detach())) and ctx.group.size == 1:  # a group makes every call together
            return part_loss.detach(), tokens
        part_loss.backward()
        loss += part_loss.detach()
    return ctx.group.sum(loss), tokens


def train(cfg: StudyConfig, run: RunId, model_dir: Path, data_dir: Path, out_dir: Path) -> dict:
    sft = cfg.sft
    ctx = Run.start(cfg, run, model_dir, out_dir)
    rows = read_split(data_dir, "train")
    stream = batches(rows, sft.batch_size, run.seed)
    for _ in range(ctx.start_step):  # resuming: replay the batches already seen
        next(stream)
    status = "completed"
    with progress(run.path, sft.steps, ctx.start_step, "step") as bar:
        for step in range(ctx.start_step, sft.steps):
            t0 = time.time()
            batch = next(stream)
            loss, tokens = accumulate(ctx, batch, sft.micro_batch)
            if diverged(float(loss)):
                status = "diverged"
                log.warning("%s: diverged at step %d", run.path, step)
                ctx.metrics.append({"step": step, "loss": float(loss)})
                break
            grad_norm = ctx.step_optimizer()
            ctx.metrics.append(
                {
                    "step": step,
                    "loss": float(loss),
                    "loss_bits": float(loss) * NATS_TO_BITS,
                    "grad_norm": grad_norm,
                    "tokens": tokens,
                    "examples": (step + 1) * len(batch),
                }
            )
            ctx.timings.append({"step": step, "seconds": time.time() - t0})
            bar.update(1)
            bar.set_postfix(loss=f"{float(loss):.4f}", refresh=False)
            ctx.checkpoint(sft.checkpoint_every, sft.steps)
            ctx.snapshot(sft.steps)
            if (step + 1) % sft.log_every == 0 or step + 1 == sft.steps:
                log.info(
                    "%s step %d/%d loss %.4f (%.3f s/step)",
                    run.path,
                    step + 1,
                    sft.steps,
                    float(loss),
                    time.time() - t0,
                )
    return ctx.finish(status)
