"""Policy-gradient RL, the way the original LoRA-vs-FullFT runs did it.

Simplifications of GRPO, each deliberate:
- advantages are rewards minus the group mean, without std normalisation (std
  division re-weights easy and hard prompts; the original runs did not use it);
- groups whose advantages are all zero are skipped: they carry no gradient;
- no KL penalty and no clipping: one gradient step per batch of rollouts, so the
  importance ratio p_learner / p_sampler is 1 in value and only its gradient acts;
- loss = -sum over tokens of ratio * advantage, averaged over kept episodes.

Levers (config `rl`, all off by default): `advantage_sign` learns from positive-only
(PSR) or negative-only (NSR) advantages; `reward` swaps the task's checker for a
format-only reward or a fair coin (the controls); `variance_filter` drops groups whose
rewards are all equal and refills the batch from fresh prompts, and the run then ends
at plain RL's episode budget; `calibration_alpha` subtracts a Brier term on the stated
confidence (tasks that state one also log the batch's Brier score and calibration error
each step). The logged `reward` is always the task's checker; `train_reward` is what
the update saw.

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

import math
import random
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch

from rankone.config import RunId, StudyConfig
from rankone.info import entropy_bits
from rankone.data import read_split
from rankone.io import InputError, log
from rankone.models.sequences import Samples, completion_logprobs
from rankone.rollouts import make_engine
from rankone.tasks.confidence import brier_terms, calibration
from rankone.train.common import Run, diverged, progress
from rankone.train.distributed import GroupEngine
from rankone.tasks import task_of


class StaleSamplerError(RuntimeError):
    """The sampler's log-probs disagree with the learner's: rollouts are not on-policy."""


def group_advantages(rewards_P_G: torch.Tensor, sign: str = "both") -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards minus their group mean (no std division), and which groups carry signal.

    `sign` "positive" keeps only the samples that beat their group (PSR), "negative" only those
    below it (NSR); the others get advantage 0."""
    advantages_P_G = rewards_P_G - rewards_P_G.mean(-1, keepdim=True)
    if sign == "positive":
        advantages_P_G = advantages_P_G.clamp(min=0)
    elif sign == "negative":
        advantages_P_G = advantages_P_G.clamp(max=0)
    keep_P = (advantages_P_G != 0).any(-1)
    return advantages_P_G, keep_P


def training_rewards(
    kind: str,
    task,
    texts: list[str],
    answers: list[str],
    seed: int,
    step: int,
    calibration_alpha: float = 0.0,
    correct: list[float] | None = None,
) -> torch.Tensor:
    """The reward the trainer learns from: the task's checker, format only, or a seeded fair coin;
    with `calibration_alpha`, minus calibration_alpha x the Brier term of the stated confidence.
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
    else:
        raise ValueError(f"unknown reward kind {kind!r}")
    if calibration_alpha:
        values = [v - calibration_alpha * b for v, b in zip(values, brier_terms(texts, correct))]
    return torch.tensor(values)


def importance_ratio(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, cap: float | None = None) -> torch.Tensor:
    """p_learner / p_sampler per token (sampler side carries no gradient); 0 where masked.

    With `cap` (truncated importance sampling, Yao et al. 2025), each token's gradient is
    weighted by min(ratio, cap) instead of the ratio, and so is its value."""
    ratio_B_C = torch.exp(learner_logprobs_B_C - sampler_logprobs_B_C.detach())
    if cap is not None:  # value min(ratio, cap); gradient min(ratio, cap) * grad log p_learner
        ratio_B_C = ratio_B_C.detach().clamp(max=cap) * torch.exp(learner_logprobs_B_C - learner_logprobs_B_C.detach())
    return ratio_B_C * mask_B_C


def policy_gradient_loss(
    learner_logprobs_B_C,
    sampler_logprobs_B_C,
    mask_B_C,
    advantages_P_G,
    keep_P,
    episodes: torch.Tensor | None = None,
    cap: float | None = None,
):
    """-sum over tokens of ratio * advantage, averaged over the episodes of groups that carry signal.

    A micro-batch of a larger step passes the step's kept `episodes` as the normaliser, so the
    gradients its parts accumulate are the whole step's (rows of it: advantages_P_G of shape (B, 1))."""
    G = advantages_P_G.shape[1]
    ratio_B_C = importance_ratio(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, cap)
    keep_B = keep_P.repeat_interleave(G).float()
    advantages_B = advantages_P_G.reshape(-1)
    episodes = keep_B.sum().clamp(min=1) if episodes is None else episodes
    return -(ratio_B_C * advantages_B[:, None] * keep_B[:, None]).sum() / episodes


def sampler_gap(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C) -> tuple[float, float]:
    """Mean and max |log p_learner - log p_sampler| over the sampled (unmasked) tokens."""
    mask_B_C = mask_B_C.float()
    gap_B_C = (learner_logprobs_B_C.detach() - sampler_logprobs_B_C).abs() * mask_B_C
    return float(gap_B_C.sum() / mask_B_C.sum().clamp(min=1)), float(gap_B_C.max())


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


def check_fresh(gap_mean: float, threshold: float, where: str, what: str = "rl.max_logprob_gap") -> None:
    """Raise when the sampler is not the learner: the mean gap passes `threshold`."""
    if gap_mean > threshold:
        raise StaleSamplerError(
            f"{where}: sampler/learner log-prob gap {gap_mean:.2e} > {what} {threshold:.2e}; "
            "the rollout engine is not sampling the current policy"
        )


@dataclass
class Freshness:
    """The per-step freshness check, in any dtype and engine.

    Step 0's gap is the noise floor: the engine was just built from the learner's weights,
    so what differs is rounding (kernels, batch shapes, KV cache against one full pass):
    ~1e-6 in fp32, ~4e-2 in bf16 (SmolLM2-135M). Every step, the run stops when the mean
    gap passes max_gap (rl.max_logprob_gap) and `factor` x that floor (in fp32 the first
    is the larger, as before); it stops at step 0 when the floor itself passes `max_floor`
    (an engine serving other weights). A stale sampler is caught once the policy has moved
    further from it than `factor` x the rounding noise; a smaller drift is as off-policy as
    bf16 rounding already makes every sample (truncated_is is the remedy for both)."""

    max_gap: float
    factor: float
    max_floor: float
    floor: float | None = None

    def check(self, gap_mean: float, where: str) -> None:
        if self.floor is None:
            check_fresh(gap_mean, self.max_floor, f"{where} (same weights on both sides)", "rl.max_noise_floor")
            self.floor = gap_mean
        if self.factor * self.floor > self.max_gap:
            check_fresh(
                gap_mean,
                self.factor * self.floor,
                where,
                f"rl.gap_noise_factor x the step-0 noise floor {self.floor:.2e} =",
            )
        else:
            check_fresh(gap_mean, self.max_gap, where)


def pad_cat(tensors_B_C: list[torch.Tensor]) -> torch.Tensor:
    """Rows of several batches in one tensor, each right-padded with zeros to the longest completion."""
    C = max(t.shape[1] for t in tensors_B_C)
    return torch.cat([torch.nn.functional.pad(t, (0, C - t.shape[1])) for t in tensors_B_C])


def refill_size(missing: int, left: int, G: int) -> int:
    """Prompts to sample next under the variance filter: the groups still missing from the
    batch, as far as the episodes left in the budget allow."""
    return max(0, min(missing, left // G))


@dataclass
class Round:
    """One rollout call of a step: a group of samples per prompt, scored."""

    samples: Samples
    task_rewards_B: torch.Tensor  # the task's checker
    rewards_B: torch.Tensor  # what the update learns from
    advantages_P_G: torch.Tensor
    keep_P: torch.Tensor  # groups that carry signal


def micro_batches(n: int, size: int | None) -> list[slice]:
    """Rows 0..n in slices of `size` (all at once when None)."""
    size = size or n
    return [slice(i, i + size) for i in range(0, n, size)]


def micro_batch_backward(
    learner_logprobs,
    sampler_logprobs_B_C,
    mask_B_C,
    advantages_P_G,
    keep_P,
    size: int,
    episodes: torch.Tensor,
    cap: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward and backward of the policy-gradient loss over slices of `size` rows, each normalised by
    the whole step's kept `episodes`, so the accumulated gradients are the whole batch's.
    `learner_logprobs(rows)` gives the learner's log-probs of those rows, with gradients. Returns the
    batch's learner log-probs (detached) and its loss."""
    G = advantages_P_G.shape[1]
    advantages_B1, keep_B = advantages_P_G.reshape(-1, 1), keep_P.repeat_interleave(G)
    parts, loss = [], torch.zeros((), device=mask_B_C.device)
    for rows in micro_batches(len(mask_B_C), size):
        logprobs_b_C = learner_logprobs(rows)
        part = policy_gradient_loss(
            logprobs_b_C,
            sampler_logprobs_B_C[rows],
            mask_B_C[rows].float(),
            advantages_B1[rows],
            keep_B[rows],
            episodes,
            cap,
        )
        part.backward()
        parts.append(logprobs_b_C.detach())
        loss = loss + part.detach()
    return torch.cat(parts), loss


def shard_backward(
    group, x: Round, learner_logprobs, learns: bool, size: int | None, episodes: torch.Tensor, cap: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One process's part of a step under FSDP: forward (and, when the step learns, backward) over
    its share of the round's rows, normalised by the whole step's kept episodes, so the gradients
    FSDP sums over processes are the whole step's. Returns every process's log-probs and the loss."""
    G = x.advantages_P_G.shape[1]
    rows = group.rows(len(x.samples.texts), "sequences a step (rl.prompts_per_step x rl.group_size)")
    s = x.samples
    if learns:
        part_b_C, loss = micro_batch_backward(
            lambda sub: learner_logprobs(x, slice(rows.start + sub.start, min(rows.stop, rows.start + sub.stop))),
            s.sampler_logprobs_B_C[rows],
            s.completion_mask_B_C[rows],
            x.advantages_P_G.reshape(-1, 1)[rows],
            x.keep_P.repeat_interleave(G)[rows],
            size or rows.stop - rows.start,
            episodes,
            cap,
        )
    else:
        part_b_C, loss = learner_logprobs(x, rows).detach(), torch.zeros((), device=episodes.device)
    return group.gather_rows(part_b_C), group.sum(loss)


def train(cfg: StudyConfig, run: RunId, model_dir: Path, data_dir: Path, out_dir: Path) -> dict:
    r, rl = cfg.rollout, cfg.rl
    ctx = Run.start(cfg, run, model_dir, out_dir)
    policy, task, device, group = ctx.policy, task_of(cfg.tasks["rl"]), ctx.device, ctx.group
    if group.size > 1 and rl.variance_filter:
        raise InputError(
            f"{run.path}: under FSDP ({group.size} processes) rl.variance_filter is not built (its "
            "refills make a step's rows a number the processes may not share evenly)"
        )

    def make(model):
        return make_engine(
            r.engine,
            model,
            ctx.tokenizer,
            r.temperature,
            r.max_new_tokens,
            model_dir,
            run.rank,
            run.seed,
            dtype=cfg.dtype,
            options=r,
            processes=group.size,
        )

    engine = (
        make(policy)
        if group.size == 1
        else GroupEngine(group, r.engine, policy, make, ctx.replica, ctx.tokenizer.pad_token_id)
    )
    rows = read_split(data_dir, "train")
    prompt_rng = random.Random(f"prompts:{run.seed}")
    for _ in range(ctx.start_step):  # resuming: replay the prompt draws already made
        prompt_rng.sample(rows, rl.prompts_per_step)
    G = rl.group_size
    status, info_bound_bits = "completed", ctx.state.get("info_bound_bits", 0.0)
    episodes = ctx.state.get("episodes", ctx.start_step * rl.prompts_per_step * G)
    fresh = Freshness(rl.max_logprob_gap, rl.gap_noise_factor, rl.max_noise_floor, ctx.state.get("gap_floor"))

    def play(batch: list[dict], step: int) -> Round:
        """Sample a group per prompt and score it: what one rollout call adds to the step."""
        samples = engine.sample([row["prompt"] for row in batch], G).to(device)
        answers = [batch[i // G]["answer"] for i in range(len(samples.texts))]
        task_rewards_B = training_rewards("task", task, samples.texts, answers, run.seed, step)
        plain = rl.reward == "task" and not rl.calibration_alpha
        rewards_B = (
            task_rewards_B
            if plain
            else training_rewards(
                rl.reward, task, samples.texts, answers, run.seed, step, rl.calibration_alpha, task_rewards_B.tolist()
            )
        )
        advantages_P_G, keep_P = group_advantages(rewards_B.to(device).view(len(batch), G), rl.advantage_sign)
        return Round(samples, task_rewards_B, rewards_B, advantages_P_G, keep_P)

    def learner_logprobs(x: Round, rows: slice) -> torch.Tensor:
        s = x.samples
        with ctx.compute():
            return completion_logprobs(
                policy,
                s.prompt_ids_B_L[rows],
                s.prompt_mask_B_L[rows],
                s.completion_B_C[rows],
                s.completion_mask_B_C[rows],
                r.temperature,
            )

    step = ctx.start_step
    with progress(run.path, rl.episode_budget, episodes, "episode") as bar:
        while size := refill_size(rl.prompts_per_step, rl.episode_budget - episodes, G):  # plain RL: rl.steps steps
            t0 = time.time()
            batch = prompt_rng.sample(rows, rl.prompts_per_step)[:size]
            torch.manual_seed(run.seed * 1_000_003 + step)
            rounds = [play(batch, step)]
            if rl.variance_filter:  # refill the groups without signal from fresh prompts, within the budget
                refill = random.Random(f"refill:{run.seed}:{step}")
                while n := refill_size(
                    rl.prompts_per_step - sum(int(x.keep_P.sum()) for x in rounds),
                    rl.episode_budget - episodes - sum(len(x.rewards_B) for x in rounds),
                    G,
                ):
                    torch.manual_seed(zlib.crc32(f"refill:{run.seed}:{step}:{len(rounds)}".encode()))
                    rounds.append(play(refill.sample(rows, n), step))
            engine.sleep()  # on CUDA, vLLM gives its memory back to the learner until the next sync
            t_sample = time.time() - t0

            task_rewards_B, rewards_B = (
                torch.cat([getattr(x, k) for x in rounds]) for k in ("task_rewards_B", "rewards_B")
            )
            advantages_P_G, keep_P = (torch.cat([getattr(x, k) for x in rounds]) for k in ("advantages_P_G", "keep_P"))
            group_bits_P = torch.tensor([entropy_bits(g.tolist()) for g in rewards_B.view(-1, G)])
            info_bound_bits += float(group_bits_P.sum() * G)
            episodes += len(rewards_B)
            mask_B_C = pad_cat([x.samples.completion_mask_B_C for x in rounds]).float()
            sampler_logprobs_B_C = pad_cat([x.samples.sampler_logprobs_B_C for x in rounds])

            # The learner's log-probs of the sampled tokens, with gradients when the step learns. With
            # rl.micro_batch each slice of rows is a forward and a backward of its own, normalised by the
            # whole step's kept episodes, so the accumulated gradients are the whole step's.
            learns = bool(keep_P.any())
            episodes_kept = keep_P.repeat_interleave(G).float().sum().clamp(min=1)
            parts, loss = [], torch.zeros((), device=device)
            with torch.set_grad_enabled(learns):
                if group.size > 1:  # one round (no variance filter); each process its share of the rows
                    learner_logprobs_B_C, loss = shard_backward(
                        group, rounds[0], learner_logprobs, learns, rl.micro_batch, episodes_kept, rl.truncated_is
                    )
                else:
                    for x in rounds:
                        if learns and rl.micro_batch:
                            logprobs_B_C, part = micro_batch_backward(
                                lambda rows, x=x: learner_logprobs(x, rows),
                                x.samples.sampler_logprobs_B_C,
                                x.samples.completion_mask_B_C,
                                x.advantages_P_G,
                                x.keep_P,
                                rl.micro_batch,
                                episodes_kept,
                                rl.truncated_is,
                            )
                            parts.append(logprobs_B_C)
                            loss = loss + part
                        else:
                            parts.append(learner_logprobs(x, slice(None)))
                    learner_logprobs_B_C = pad_cat(parts)
                    if not (learns and rl.micro_batch):
                        # Under the filter only the groups with signal enter the loss. In exact arithmetic this
                        # equals passing every row (keep_P already zeroes the rest), but the float sums differ in
                        # their last bits, and the levers experiment's filtered runs were measured this way: keep it
                        # so they reproduce.
                        groups_P, rows_B = (
                            (keep_P, keep_P.repeat_interleave(G)) if rl.variance_filter else (slice(None),) * 2
                        )
                        loss = policy_gradient_loss(
                            learner_logprobs_B_C[rows_B],
                            sampler_logprobs_B_C[rows_B],
                            mask_B_C[rows_B],
                            advantages_P_G[groups_P],
                            keep_P[groups_P],
                            cap=rl.truncated_is,
                        )
                        if learns:
                            loss.backward()

            gap_mean, gap_max = sampler_gap(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C)
            try:  # never learn from another policy's rollouts
                fresh.check(gap_mean, f"{run.path} step {step}")
            except StaleSamplerError:
                ctx.finish("stale-sampler")
                engine.close()  # after the weights are saved: under FSDP closing vLLM ends the process group
                raise
            ctx.state["gap_floor"] = fresh.floor
            grad_norm = ctx.step_optimizer() if learns else 0.0
            engine.sync(policy)  # the next rollouts must come from the weights just updated

            ratio_B_C = importance_ratio(learner_logprobs_B_C.detach(), sampler_logprobs_B_C, mask_B_C)
            ratio_vals = ratio_B_C[mask_B_C.bool()]
            ctx.metrics.append(
                {
                    "step": step,
                    "reward": float(task_rewards_B.mean()),  # the task's checker, whatever the trainer learns from
                    "train_reward": float(rewards_B.mean()),
                    "zero_variance_share": float(1 - keep_P.float().mean()),  # of the groups sampled
                    "logprob_gap_mean": gap_mean,
                    "logprob_gap_max": gap_max,
                    "ratio_mean": float(ratio_vals.mean()),
                    "ratio_min": float(ratio_vals.min()),
                    "ratio_max": float(ratio_vals.max()),
                    "entropy": float(-(sampler_logprobs_B_C * mask_B_C).sum() / mask_B_C.sum()),
                    "reward_entropy_bits": entropy_bits(rewards_B.tolist()),
                    "advantage_entropy_bits": float(group_bits_P.mean()),
                    "info_bound_bits": info_bound_bits,
                    "episodes": episodes,
                    "grad_norm": grad_norm,
                    "loss": float(loss.detach()),
                    "tokens": int(mask_B_C.sum()),
                    "unparseable_share": unparseable_share(task, [t for x in rounds for t in x.samples.texts]),
                    **({"groups_sampled": len(keep_P), "groups_used": int(keep_P.sum())} if rl.variance_filter else {}),
                    **(
                        calibration([t for x in rounds for t in x.samples.texts], task_rewards_B.tolist())
                        if task.states_confidence
                        else {}
                    ),
                }
            )
            ctx.timings.append({"step": step, "sample_seconds": t_sample, "seconds": time.time() - t0})
            bar.update(len(rewards_B))
            bar.set_postfix(step=step + 1, reward=f"{float(task_rewards_B.mean()):.3f}", refresh=False)
            if diverged(float(loss.detach())) or diverged(grad_norm):
                status = "diverged"
                log.warning("%s: diverged at step %d (loss %s, grad norm %s)", run.path, step, float(loss), grad_norm)
                break
            ctx.state.update(info_bound_bits=info_bound_bits, episodes=episodes)
            ctx.checkpoint(rl.checkpoint_every, rl.steps if not rl.variance_filter else math.inf)
            ctx.snapshot(rl.steps)
            if (step + 1) % rl.log_every == 0 or episodes >= rl.episode_budget:
                log.info(
                    "%s step %d, %d/%d episodes: reward %.3f zero-var %.2f gap %.1e (%.2f s/step)",
                    run.path,
                    step + 1,
                    episodes,
                    rl.episode_budget,
                    float(task_rewards_B.mean()),
                    float(1 - keep_P.float().mean()),
                    gap_mean,
                    time.time() - t0,
                )
            step += 1
    ctx.state.update(info_bound_bits=info_bound_bits, episodes=episodes)
    collapse = format_collapse(
        [m["unparseable_share"] for m in ctx.metrics], rl.format_collapse_share, rl.format_collapse_window
    )
    if collapse["flagged"]:
        log.warning(
            "%s: format collapse from step %d (unparseable share over %d steps > %.2f)",
            run.path,
            collapse["step"],
            rl.format_collapse_window,
            rl.format_collapse_share,
        )
    info = ctx.finish(status, {"engine": r.engine, "format_collapse": collapse})
    engine.close()
    return info
