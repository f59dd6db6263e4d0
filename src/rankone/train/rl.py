"""Policy-gradient RL, the way the original LoRA-vs-FullFT runs did it, with its choices named.

A step, top to bottom (`train`): draw prompts; sample a round, a group per prompt, scored and
turned into advantages (`Rollouts`, a typed `Batch` of `Round`s, rankone.train.batch); the
loss and its gradients (`Batch.backward`, through the learner's one accumulation loop); the
freshness check; the update; the log.

Simplifications of GRPO, each deliberate, and the config field that names each choice:
- `rl.baseline` "group" (default): advantages are rewards minus the group mean, without std
  normalisation (std division re-weights easy and hard prompts; the original runs did not use
  it); "batch", "fixed" and "running" measure rewards from the step's mean, a constant or a
  running mean instead, so a group whose samples all agree still teaches (rankone.objectives);
- groups whose advantages are all zero are skipped: they carry no gradient;
- `rl.loss` "pg" (default): no KL penalty and no clipping, one gradient step per batch of
  rollouts (`rl.epochs` 1), so the importance ratio p_learner / p_sampler is 1 in value and only
  its gradient acts; loss = -sum over tokens of ratio x advantage, averaged over kept episodes.
  "grpo" divides advantages by the group's std and averages each sequence's tokens, "dapo"
  normalises by the step's tokens, "ppo" clips the ratio (`rl.clip_epsilon`) and may take
  `rl.epochs` > 1 passes over a batch (rankone.train.pg).

Levers (config `rl`, all off by default): `advantage_sign` learns from positive-only
(PSR) or negative-only (NSR) advantages; `reward` swaps the task's checker for a
format-only reward or a fair coin (the controls); `variance_filter` drops groups that carry
no signal (under the group baseline: rewards all equal) and refills the batch from fresh
prompts, and the run then ends at plain RL's episode budget; `calibration_alpha` subtracts a
Brier term on the stated confidence (tasks that state one also log the batch's Brier score and
calibration error each step); `explore` replaces a seeded share of the samples by answers drawn
uniformly from the task's answers (the exploration floor, rankone.train.explore), logged as
`explored_share` and `explored_reward`. The logged `reward` is always the task's checker on the
policy's own samples; `train_reward` is what the update saw.

Every step checks that the sampler is the learner: the mean |log p_sampler -
log p_learner| over sampled tokens is logged and the run stops when it passes
`rl.max_logprob_gap` and the rounding noise of the dtype and engine, measured at step 0
(`Freshness`; a stale sampler is the classic way to fake "LoRA matches"). With
`rl.truncated_is` the importance ratio is capped (truncated importance sampling).
`rl.micro_batch` splits the step's sequences into forward/backward passes whose
gradients add up to the whole step's. With several processes (FSDP,
rankone.train.distributed) every process holds the whole batch's samples (`GroupEngine`)
and updates on its share of it.
"""

from __future__ import annotations

import functools
import math
import random
from collections import Counter
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch

from rankone.config import RunId, StudyConfig
from rankone.data import read_split
from rankone.device import sampler_share
from rankone.info import entropy_bits
from rankone.io import InputError, log
from rankone.rollouts import make_engine
from rankone.tasks import task_of
from rankone.tasks.confidence import brier_terms, calibration
from rankone.train.batch import Batch, Round
from rankone.train.distributed import GroupEngine
from rankone.train.explore import ExplorationFloor
from rankone.train.folder import RunFolder, RunState, progress
from rankone.train.learner import Learner, diverged
from rankone.train.pg import Advantages, Freshness, StaleSamplerError, importance_ratio, loss_of, sampler_gap


@dataclass
class RLState(RunState):
    """RL's running totals, beside the metrics: checkpointed, and written into run.json."""

    gap_floor: float | None = None  # the freshness check's step-0 noise floor
    gap_alarms: int = 0  # low-precision steps whose gap passed rl.gap_noise_factor x the floor (Freshness)
    info_bound_bits: float = 0.0  # episodes x their group's reward entropy, summed
    episodes: int = 0
    running_baseline: float | None = None  # rl.baseline "running": its value after the last step


def training_rewards(
    kind: str,
    task,
    texts: list[str],
    answers: list[str],
    seed: int,
    step: int,
    calibration_alpha: float = 0.0,
    correct: list[float] | None = None,
    group_size: int = 1,
) -> torch.Tensor:
    """The reward the trainer learns from: the task's checker, format only, a seeded fair coin, or
    agreement with the group's majority answer (`texts` in groups of `group_size` consecutive
    samples of one prompt; reads no reference answer: entropy minimisation); with
    `calibration_alpha`, minus calibration_alpha x the Brier term of the stated confidence.
    `correct`: the task checker's rewards of `texts`, when the caller has them already."""
    if correct is None and (kind == "task" or calibration_alpha):
        correct = [task.reward(t, a) for t, a in zip(texts, answers)]
    if kind == "task":
        values = list(correct)
    elif kind == "format":
        values = [float(task.parse_answer(t) is not None) for t in texts]
    elif kind == "random":  # a function of (seed, step) only, so a resumed run draws the same coins
        coins = random.Random(f"reward:{seed}:{step}")
        values = [float(coins.random() < 0.5) for _ in texts]
    elif kind == "majority":
        values = majority_agreement([task.parse_answer(t) for t in texts], group_size)
    else:
        raise ValueError(f"unknown reward kind {kind!r}")
    if calibration_alpha:
        values = [v - calibration_alpha * b for v, b in zip(values, brier_terms(texts, correct))]
    return torch.tensor(values)


def majority_agreement(parsed: list[str | None], group_size: int) -> list[float]:
    """1 for each sample whose parsed answer is its group's most common parsed answer, else 0
    (unparseable answers never vote and never agree; a tie goes to the answer given first, so the
    reward is a function of the samples alone). The sharpening control that reads no answer."""
    if group_size < 1 or len(parsed) % group_size:
        raise ValueError(f"{len(parsed)} samples do not split into groups of {group_size}")
    values = []
    for start in range(0, len(parsed), group_size):
        group = parsed[start : start + group_size]
        votes = Counter(a for a in group if a is not None)
        top = max(votes.values(), default=0)
        mode = next((a for a in group if a is not None and votes[a] == top), None)
        values += [float(a is not None and a == mode) for a in group]
    return values


def unparseable_share(task, texts: list[str]) -> float:
    """Share of completions from which the task's answer checker cannot parse an answer."""
    return sum(task.parse_answer(t) is None for t in texts) / len(texts)


def format_collapse(shares: list[float], level: float, window: int) -> dict:
    """Whether, and from which step, the mean unparseable share over `window` steps passed `level`."""
    first = next(
        (i for i in range(window - 1, len(shares)) if sum(shares[i - window + 1 : i + 1]) / window > level), None
    )
    return {
        "flagged": first is not None,
        "step": first,
        "level": level,
        "window": window,
        "max_share": max(shares, default=0.0),
    }


def refill_size(missing: int, left: int, G: int) -> int:
    """Prompts to sample next under the variance filter: the groups still missing from the
    batch, as far as the episodes left in the budget allow."""
    return max(0, min(missing, left // G))


class Rollouts:
    """The sampler's side of a step: its prompts (a seeded draw, replayed on resume), a group of
    samples per prompt scored by the task (or the lever's reward) with advantages, and under
    `rl.variance_filter` refills from fresh prompts until prompts_per_step groups carry signal
    or the episode budget is spent."""

    def __init__(
        self, engine, task, rows: list[dict], cfg: StudyConfig, seed: int, device, advantages, step: int, floor=None
    ):
        self.engine, self.task, self.rows, self.rl, self.seed, self.device = engine, task, rows, cfg.rl, seed, device
        self.temperature, self.advantages, self.floor = cfg.rollout.temperature, advantages, floor
        self.prompt_rng = random.Random(f"prompts:{seed}")
        for _ in range(step):  # resuming: replay the prompt draws already made
            self.prompt_rng.sample(rows, self.rl.prompts_per_step)

    def draw(self, episodes: int) -> list[dict]:
        """The next step's prompts, as many as the episode budget leaves room for (none: the run is done)."""
        rl = self.rl
        size = refill_size(rl.prompts_per_step, rl.episode_budget - episodes, rl.group_size)
        return self.prompt_rng.sample(self.rows, rl.prompts_per_step)[:size] if size else []

    def sample(self, prompts: list[dict], step: int, episodes: int) -> Batch:
        """The step's batch: a round of `prompts`, and the variance filter's refills within the budget."""
        rl, G = self.rl, self.rl.group_size
        torch.manual_seed(self.seed * 1_000_003 + step)
        rounds = [self.round(prompts, step, 0)]
        if rl.variance_filter:  # refill the groups without signal from fresh prompts, within the budget
            refill = random.Random(f"refill:{self.seed}:{step}")
            while n := refill_size(
                rl.prompts_per_step - sum(int(x.keep_P.sum()) for x in rounds),
                rl.episode_budget - episodes - sum(len(x) for x in rounds),
                G,
            ):
                torch.manual_seed(zlib.crc32(f"refill:{self.seed}:{step}:{len(rounds)}".encode()))
                rounds.append(self.round(refill.sample(self.rows, n), step, len(rounds)))
        self.engine.sleep()  # on CUDA, vLLM gives its memory back to the learner until the next sync
        return Batch(rounds, self.temperature)

    def round(self, prompts: list[dict], step: int, index: int) -> Round:
        """Sample a group per prompt (the `index`-th rollout call of the step; under rl.explore some
        samples replaced by the floor's answers) and score it: what one rollout call adds to the step."""
        rl, G = self.rl, self.rl.group_size
        samples = self.engine.sample([row["prompt"] for row in prompts], G).to(self.device)
        explored_B = None
        if self.floor is not None:
            samples, explored_B = self.floor.apply(samples, step, index)
        answers = [prompts[i // G]["answer"] for i in range(len(samples.texts))]
        task_rewards_B = training_rewards("task", self.task, samples.texts, answers, self.seed, step)
        plain = rl.reward == "task" and not rl.calibration_alpha
        rewards_B = (
            task_rewards_B
            if plain
            else training_rewards(
                rl.reward,
                self.task,
                samples.texts,
                answers,
                self.seed,
                step,
                rl.calibration_alpha,
                task_rewards_B.tolist(),
                G,
            )
        )
        advantages_P_G, keep_P = self.advantages(rewards_B.to(self.device).view(len(prompts), G))
        return Round(samples, task_rewards_B, rewards_B, advantages_P_G, keep_P, explored_B)


def open_engine(cfg: StudyConfig, run: RunId, learner: Learner, model_dir: Path):
    """The run's rollout engine over the learner's policy (under FSDP, the group's: GroupEngine)."""
    r, group = cfg.rollout, learner.group
    if group.size > 1 and cfg.rl.variance_filter:
        raise InputError(
            f"{run.path}: under FSDP ({group.size} processes) rl.variance_filter is not built (its "
            "refills make a step's rows a number the processes may not share evenly)"
        )
    if learner.device.type == "cuda" and r.gpu_memory_utilization is None:  # what the learner leaves
        adam = 8 * sum(getattr(p, "to_local", lambda p=p: p)().numel() for p in learner.trainable())
        share = sampler_share(*torch.cuda.mem_get_info(learner.device), adam, cfg.plan.usable_share)
        r = r.model_copy(update={"gpu_memory_utilization": share})
    if r.max_num_seqs is None:  # a whole step decoded together
        r = r.model_copy(update={"max_num_seqs": max(256, cfg.rl.prompts_per_step * cfg.rl.group_size)})
    make = functools.partial(
        make_engine,
        r.engine,
        tokenizer=learner.tokenizer,
        temperature=r.temperature,
        max_new_tokens=r.max_new_tokens,
        model_dir=model_dir,
        rank=run.rank,
        seed=run.seed,
        dtype=cfg.dtype,
        options=r,
        processes=group.size,
    )
    if group.size == 1:
        return make(learner.policy)
    return GroupEngine(group, r.engine, learner.policy, make, learner.replica, learner.tokenizer.pad_token_id)


def update(learner: Learner, batch: Batch, loss, rl) -> float:
    """The optimizer step on the batch's gradients, then `rl.epochs` - 1 more passes over the same
    rollouts (PPO), each its own step; returns the first step's gradient norm (0 without signal)."""
    if not batch.updates(loss):
        return 0.0
    grad_norm = learner.update()
    for _ in range(1, rl.epochs):
        batch.backward(learner, loss, rl.micro_batch)
        learner.update()
    return grad_norm


def step_metrics(
    step: int, batch: Batch, learner_B_C, gap: tuple[float, float], loss, grad_norm: float, state, task, rl
):
    """One line of metrics.jsonl: what the step sampled, how fresh it was, what it learned. The step's
    episodes and information bound (each episode x its group's reward entropy) join `state`'s totals."""
    mask_B_C, sampler_B_C, rewards_B = batch.sampled_mask_B_C, batch.sampler_logprobs_B_C, batch.rewards_B
    ratio_vals = importance_ratio(learner_B_C, sampler_B_C, mask_B_C)[mask_B_C.bool()]
    unparseable = unparseable_share(task, batch.texts)
    calibrated = calibration(batch.texts, batch.task_rewards_B.tolist()) if task.states_confidence else {}
    group_bits_P = torch.tensor([entropy_bits(g.tolist()) for g in rewards_B.view(-1, batch.G)])
    state.info_bound_bits += float(group_bits_P.sum() * batch.G)
    state.episodes += len(rewards_B)
    return {
        "step": step,
        "reward": float(batch.sampled(batch.task_rewards_B).mean()),  # the task's checker on the policy's samples
        "train_reward": float(rewards_B.mean()),
        "zero_variance_share": float(1 - batch.keep_P.float().mean()),  # of the groups sampled
        "logprob_gap_mean": gap[0],
        "logprob_gap_max": gap[1],
        "ratio_mean": float(ratio_vals.mean()),
        "ratio_min": float(ratio_vals.min()),
        "ratio_max": float(ratio_vals.max()),
        "entropy": float(-(sampler_B_C * mask_B_C).sum() / mask_B_C.sum()),
        "reward_entropy_bits": entropy_bits(rewards_B.tolist()),
        "advantage_entropy_bits": float(group_bits_P.mean()),
        "info_bound_bits": state.info_bound_bits,
        "episodes": state.episodes,
        "grad_norm": grad_norm,
        "loss": float(loss.detach()),
        "tokens": int(batch.mask_B_C.sum()),
        "unparseable_share": unparseable,
        **({"groups_sampled": len(batch.keep_P), "groups_used": int(batch.keep_P.sum())} if rl.variance_filter else {}),
        **calibrated,
        **(explored(batch) if rl.explore else {}),
    }


def explored(batch: Batch) -> dict:
    """The exploration floor's share of the step's rows, and the checker's mean reward on them (the
    logged `reward` is the other rows': the policy's own samples)."""
    explored_B = batch.explored_B.to(batch.task_rewards_B.device)
    n = int(explored_B.sum())
    return {
        "explored_share": n / len(explored_B),
        "explored_reward": float(batch.task_rewards_B[explored_B].mean()) if n else None,
    }


def train(cfg: StudyConfig, run: RunId, model_dir: Path, data_dir: Path, out_dir: Path) -> dict:
    """One RL run. Each step: draw prompts; sample a round and estimate its advantages (`Rollouts`);
    the loss and its gradients (`Batch.backward`); check freshness; update; log; checkpoint."""
    if run.method == "majority":  # the control that reads no answer: FullFT rewarded for its group's majority
        cfg = cfg.model_copy(update={"rl": cfg.rl.model_copy(update={"reward": "majority"})})
    rl = cfg.rl
    learner = Learner.start(cfg, run, model_dir)
    task = task_of(cfg.tasks["rl"])
    folder = RunFolder.open(cfg, run, model_dir, out_dir, learner, RLState())
    state = folder.state
    engine = open_engine(cfg, run, learner, model_dir)
    advantages, loss = Advantages.of(rl, state.running_baseline), loss_of(rl)
    floor = ExplorationFloor.of(cfg, run.path, learner, run.seed)
    rollouts = Rollouts(
        engine, task, read_split(data_dir, "train"), cfg, run.seed, learner.device, advantages, state.step, floor
    )
    fresh = Freshness(rl.max_logprob_gap, rl.gap_noise_factor, rl.max_noise_floor, state.gap_floor)
    status, step = "completed", state.step
    with progress(run.path, rl.episode_budget, state.episodes, "episode") as bar:
        while prompts := rollouts.draw(state.episodes):  # plain RL: rl.steps steps
            t0 = time.time()
            batch = rollouts.sample(prompts, step, state.episodes)
            t_sample = time.time() - t0
            step_loss, learner_B_C = batch.backward(learner, loss, rl.micro_batch)
            gap = sampler_gap(learner_B_C, batch.sampler_logprobs_B_C, batch.sampled_mask_B_C)
            try:  # never learn from another policy's rollouts
                state.gap_alarms += fresh.check(gap[0], f"{run.path} step {step}", engine.version, learner.version)
            except StaleSamplerError:
                folder.finish("stale-sampler")
                engine.close()  # after the weights are saved: under FSDP closing vLLM ends the process group
                raise
            grad_norm = update(learner, batch, loss, rl)
            engine.sync(learner.policy, learner.version)  # the next rollouts come from the weights just updated
            advantages.observe(batch.rewards_B)
            state.gap_floor, state.running_baseline = fresh.floor, advantages.running
            metrics = step_metrics(step, batch, learner_B_C, gap, step_loss, grad_norm, state, task, rl)
            state.record(metrics, {"step": step, "sample_seconds": t_sample, "seconds": time.time() - t0})
            bar.update(len(batch.rewards_B))
            bar.set_postfix(step=step + 1, reward=f"{metrics['reward']:.3f}", refresh=False)
            if diverged(metrics["loss"]) or diverged(grad_norm):
                status = "diverged"
                log.warning(
                    "%s: diverged at step %d (loss %s, grad norm %s)", run.path, step, metrics["loss"], grad_norm
                )
                break
            folder.after_step(rl.checkpoint_every, rl.steps if not rl.variance_filter else math.inf, rl.steps)
            if (step + 1) % rl.log_every == 0 or state.episodes >= rl.episode_budget:
                log.info(
                    "%s step %d, %d/%d episodes: reward %.3f zero-var %.2f gap %.1e (%.2f s/step)",
                    run.path,
                    step + 1,
                    state.episodes,
                    rl.episode_budget,
                    metrics["reward"],
                    metrics["zero_variance_share"],
                    gap[0],
                    time.time() - t0,
                )
            step += 1
    collapse = format_collapse(
        [m["unparseable_share"] for m in state.metrics], rl.format_collapse_share, rl.format_collapse_window
    )
    if collapse["flagged"]:
        log.warning(
            "%s: format collapse from step %d (unparseable share over %d steps > %.2f)",
            run.path,
            collapse["step"],
            rl.format_collapse_window,
            rl.format_collapse_share,
        )
    info = folder.finish(status, {"engine": cfg.rollout.engine, "format_collapse": collapse})
    engine.close()
    return info
