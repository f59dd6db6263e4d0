"""Supervised fine-tuning: next-token cross-entropy on the answer tokens.

Examples are visited in a fresh seeded shuffle each epoch; loss is the mean
negative log-likelihood per answer token (nats), logged every step.
"""

from __future__ import annotations

import functools
import random
import time
from pathlib import Path

import torch

from rankone.config import RunId, StudyConfig
from rankone.info import NATS_TO_BITS
from rankone.data import read_split
from rankone.io import log
from rankone.models.sequences import completion_logprobs, encode_completions, encode_prompts
from rankone.train.folder import RunFolder, RunState, progress
from rankone.train.learner import Learner, diverged


def batches(rows: list[dict], batch_size: int, seed: int):
    """Endless epochs of `rows` in a seeded shuffle, `batch_size` at a time (a table smaller than a
    batch fills it from as many epochs as it takes)."""
    rng = random.Random(f"sft:{seed}")
    order: list[dict] = []
    while True:
        while len(order) < batch_size:
            epoch = rows[:]
            rng.shuffle(epoch)
            order += epoch
        yield order[:batch_size]
        order = order[batch_size:]


def sft_loss(logprobs_B_C, tokens: int):
    """Negative log-likelihood of the answers, per answer token of the step (nats)."""
    return -logprobs_B_C.sum() / tokens


def accumulate(learner: Learner, batch: list[dict], micro_batch: int | None) -> tuple[torch.Tensor, int]:
    """Forward and backward over `batch` through the learner's accumulation loop (micro-batches of
    `micro_batch` examples, each padded on its own, and process shares), each part normalised by the
    whole batch's answer tokens, so that the accumulated gradients are the whole batch's. Returns the
    batch's loss and its answer tokens."""
    _, mask_B_C = encode_completions(learner.tokenizer, [row["answer"] for row in batch])
    tokens = int(mask_B_C.sum())
    loss, _ = learner.accumulate(
        len(batch),
        "examples a step (sft.batch_size)",
        functools.partial(_examples_loss, learner, batch, tokens),
        micro_batch,
    )
    return loss, tokens


def _examples_loss(learner: Learner, batch: list[dict], tokens: int, rows: slice):
    part = batch[rows]
    prompt_ids_b_L, prompt_mask_b_L = encode_prompts(learner.tokenizer, [row["prompt"] for row in part])
    completion_b_C, mask_b_C = encode_completions(learner.tokenizer, [row["answer"] for row in part])
    with learner.compute():
        logprobs_b_C = completion_logprobs(learner.policy, prompt_ids_b_L, prompt_mask_b_L, completion_b_C, mask_b_C)
    return sft_loss(logprobs_b_C, tokens), None


def train(cfg: StudyConfig, run: RunId, model_dir: Path, data_dir: Path, out_dir: Path) -> dict:
    sft = cfg.sft
    learner = Learner.start(cfg, run, model_dir)
    folder = RunFolder.open(cfg, run, model_dir, out_dir, learner, RunState())
    state = folder.state
    stream = batches(read_split(data_dir, "train"), sft.batch_size, run.seed)
    for _ in range(state.step):  # resuming: replay the batches already seen
        next(stream)
    status = "completed"
    with progress(run.path, sft.steps, state.step, "step") as bar:
        for step in range(state.step, sft.steps):
            t0 = time.time()
            batch = next(stream)
            loss, tokens = accumulate(learner, batch, sft.micro_batch)
            if diverged(float(loss)):
                status = "diverged"
                log.warning("%s: diverged at step %d", run.path, step)
                state.metrics.append({"step": step, "loss": float(loss)})
                break
            grad_norm = learner.update()
            metrics = {
                "step": step,
                "loss": float(loss),
                "loss_bits": float(loss) * NATS_TO_BITS,
                "grad_norm": grad_norm,
                "tokens": tokens,
                "examples": (step + 1) * len(batch),
            }
            state.record(metrics, {"step": step, "seconds": time.time() - t0})
            bar.update(1)
            bar.set_postfix(loss=f"{float(loss):.4f}", refresh=False)
            folder.after_step(sft.checkpoint_every, sft.steps, sft.steps)
            if (step + 1) % sft.log_every == 0 or step + 1 == sft.steps:
                log.info(
                    "%s step %d/%d loss %.4f (%.3f s/step)",
                    run.path,
                    step + 1,
                    sft.steps,
                    float(loss),
                    time.time() - t0,
                )
    return folder.finish(status)
