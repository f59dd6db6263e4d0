"""Policy-gradient kernels: tensors in, tensors out; no model, no config, no files.

- Advantages (`Advantages`): a reward minus a baseline chosen by name (`rl.baseline`, the
  registry rankone.objectives.BASELINES: group, batch, fixed, running), kept to one sign for
  the PSR/NSR levers, and which groups carry signal (any advantage not 0).
- Losses (`rl.loss`, rankone.objectives.LOSSES: pg, grpo, dapo, ppo): each scales the
  advantages it is given, names the whole step's normaliser (kept episodes or kept tokens),
  and gives the loss of some rows of the step divided by it, so that the gradients of a step's
  micro-batches and processes add up to the whole step's.
- The importance ratio (optionally truncated), the sampler/learner gap and the freshness check.

Shapes: P prompts, G samples per prompt, B = P x G sequences, C completion tokens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from rankone.config import RLConfig
from rankone.objectives import BASELINES, LOSSES

log = logging.getLogger(__name__)


class StaleSamplerError(RuntimeError):
    """The sampler's log-probs disagree with the learner's: rollouts are not on-policy."""


def importance_ratio(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, cap: float | None = None) -> torch.Tensor:
    """p_learner / p_sampler per token (sampler side carries no gradient); 0 where masked.

    With `cap` (truncated importance sampling, Yao et al. 2025), each token's gradient is
    weighted by min(ratio, cap) instead of the ratio, and so is its value."""
    ratio_B_C = torch.exp(learner_logprobs_B_C - sampler_logprobs_B_C.detach())
    if cap is not None:  # value min(ratio, cap); gradient min(ratio, cap) * grad log p_learner
        ratio_B_C = ratio_B_C.detach().clamp(max=cap) * torch.exp(learner_logprobs_B_C - learner_logprobs_B_C.detach())
    return ratio_B_C * mask_B_C


def sampler_gap(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C) -> tuple[float, float]:
    """Mean and max |log p_learner - log p_sampler| over the sampled (unmasked) tokens."""
    mask_B_C = mask_B_C.float()
    gap_B_C = (learner_logprobs_B_C.detach() - sampler_logprobs_B_C).abs() * mask_B_C
    return float(gap_B_C.sum() / mask_B_C.sum().clamp(min=1)), float(gap_B_C.max())


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

    Staleness is checked exactly: the engine names the learner version whose weights it serves
    (`served`: the updates handed to it by `sync`; vLLM's LoRA adapter id counts them), and the
    run stops when that is not the learner's own (`current`), whatever the gap.

    The log-prob gap is checked against step 0's, the noise floor: the engine was just built from
    the learner's weights, so what differs is rounding (kernels, batch shapes, KV cache against one
    full pass): ~1e-6 in fp32, ~4e-2 in bf16 (SmolLM2-135M). Where that floor is small against
    max_gap (rl.max_logprob_gap; fp32), a gap above max_gap stops the run, as before. Where it is
    not (bf16), a gap above `factor` x the floor is rounding of weights the engine verifiably serves
    (a synced vLLM step has read 2.1x on the CPU): `check` returns True, an alarm the trainer logs
    and counts, and `rl.truncated_is` caps its effect on the gradient, instead of ending the run.
    A gap above `max_floor` (rl.max_noise_floor) stops the run at any step: no rounding is that
    large, so the engine is serving other weights."""

    max_gap: float
    factor: float
    max_floor: float
    floor: float | None = None

    def check(self, gap_mean: float, where: str, served: int = 0, current: int = 0) -> bool:
        """Raise when the sampler is not the learner; True (and a warning) for a low-precision gap above the floor."""
        if served != current:
            raise StaleSamplerError(
                f"{where}: the engine serves the weights of update {served}, the learner has made {current}; "
                "the rollout engine is not sampling the current policy"
            )
        if self.floor is None:
            check_fresh(gap_mean, self.max_floor, f"{where} (same weights on both sides)", "rl.max_noise_floor")
            self.floor = gap_mean
        if self.factor * self.floor <= self.max_gap:
            check_fresh(gap_mean, self.max_gap, where)
            return False
        check_fresh(gap_mean, self.max_floor, where, "rl.max_noise_floor")
        if gap_mean <= self.factor * self.floor:
            return False
        log.warning(
            "%s: low-precision sampler/learner gap %.2e > %g x the step-0 floor %.2e, from the weights the "
            "engine serves (rounding; rl.truncated_is caps its weight)",
            where,
            gap_mean,
            self.factor,
            self.floor,
        )
        return True


# Baselines (rl.baseline): the value each reward is measured from, broadcastable to rewards_P_G.


def group_mean(rewards_P_G: torch.Tensor, advantages: Advantages) -> torch.Tensor:
    return rewards_P_G.mean(-1, keepdim=True)


def batch_mean(rewards_P_G: torch.Tensor, advantages: Advantages) -> torch.Tensor:
    return rewards_P_G.mean()


def fixed_value(rewards_P_G: torch.Tensor, advantages: Advantages) -> torch.Tensor:
    return torch.tensor(advantages.value, dtype=rewards_P_G.dtype, device=rewards_P_G.device)


def running_mean(rewards_P_G: torch.Tensor, advantages: Advantages) -> torch.Tensor:
    value = advantages.value if advantages.running is None else advantages.running
    return torch.tensor(value, dtype=rewards_P_G.dtype, device=rewards_P_G.device)


@dataclass
class Advantages:
    """Rewards to advantages: reward minus the named baseline, scaled as the loss asks (GRPO's std),
    kept to one sign for the PSR/NSR levers. `running` is the running mean's state (checkpointed)."""

    baseline: str = "group"
    sign: str = "both"  # "positive": only samples that beat their baseline (PSR); "negative": only those below (NSR)
    value: float = 0.5  # the fixed baseline; the running mean before its first step
    decay: float = 0.9  # the running mean's weight on its old value
    loss: str = "pg"  # whose scaling applies
    running: float | None = None

    @classmethod
    def of(cls, rl: RLConfig, running: float | None = None) -> Advantages:
        return cls(rl.baseline, rl.advantage_sign, rl.baseline_value, rl.baseline_decay, rl.loss, running)

    def __call__(self, rewards_P_G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantages of a round's rewards, and which of its groups carry signal (an advantage not 0)."""
        advantages_P_G = rewards_P_G - BASELINES[self.baseline].load()(rewards_P_G, self)
        advantages_P_G = LOSSES[self.loss].load().scale(advantages_P_G, rewards_P_G)
        if self.sign == "positive":
            advantages_P_G = advantages_P_G.clamp(min=0)
        elif self.sign == "negative":
            advantages_P_G = advantages_P_G.clamp(max=0)
        keep_P = (advantages_P_G != 0).any(-1)
        return advantages_P_G, keep_P

    def observe(self, rewards_B: torch.Tensor) -> None:
        """After a step: the running mean moves towards the step's mean reward (other baselines keep no state)."""
        if self.baseline == "running":
            old = self.value if self.running is None else self.running
            self.running = self.decay * old + (1 - self.decay) * float(rewards_B.mean())


def group_advantages(rewards_P_G: torch.Tensor, sign: str = "both") -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards minus their group mean (no std division), and which groups carry signal: the
    default estimator (`Advantages()`) with the sign lever."""
    return Advantages(sign=sign)(rewards_P_G)


# Losses (rl.loss). Each is called on some rows of a step, with the whole step's normaliser.


@dataclass
class ImportanceSampledPG:
    """-sum over tokens of ratio x advantage, divided by the step's kept episodes."""

    cap: float | None = None  # truncated importance sampling (rl.truncated_is)
    clip_epsilon: float = 0.2  # used by PPOClip only
    entropy_coef: float = 0.0  # the entropy bonus (rl.entropy_coef), beside every loss

    def bonus(self, entropy_B_C: torch.Tensor, mask_B_C: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """What the entropy bonus adds to the loss for some rows: -entropy_coef x their tokens' entropy,
        summed, over the whole step's `tokens`."""
        return -self.entropy_coef * (entropy_B_C * mask_B_C).sum() / tokens

    @staticmethod
    def scale(advantages_P_G: torch.Tensor, rewards_P_G: torch.Tensor) -> torch.Tensor:
        return advantages_P_G

    @staticmethod
    def normaliser(mask_B_C: torch.Tensor, keep_B: torch.Tensor) -> torch.Tensor:
        """The whole step's count each part divides by: the episodes of groups with signal."""
        return keep_B.float().sum().clamp(min=1)

    def __call__(self, learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, advantages_B, keep_B, normaliser):
        ratio_B_C = importance_ratio(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, self.cap)
        return -(ratio_B_C * advantages_B[:, None] * keep_B[:, None]).sum() / normaliser


class GRPO(ImportanceSampledPG):
    """Advantages divided by their group's reward std (+1e-4, as TRL's scale_rewards="group"); each
    sequence's tokens averaged (1/|o_i|), then the sequences, over the step's kept episodes."""

    @staticmethod
    def scale(advantages_P_G: torch.Tensor, rewards_P_G: torch.Tensor) -> torch.Tensor:
        return advantages_P_G / (rewards_P_G.std(-1, keepdim=True) + 1e-4)

    def __call__(self, learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, advantages_B, keep_B, normaliser):
        ratio_B_C = importance_ratio(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, self.cap)
        per_sequence_B = (ratio_B_C * advantages_B[:, None]).sum(-1) / mask_B_C.sum(-1).clamp(min=1)
        return -(per_sequence_B * keep_B).sum() / normaliser


class DAPO(ImportanceSampledPG):
    """Token-level normalisation: the sum over tokens divided by the step's tokens in kept groups."""

    @staticmethod
    def normaliser(mask_B_C: torch.Tensor, keep_B: torch.Tensor) -> torch.Tensor:
        return (mask_B_C * keep_B.float()[:, None]).sum().clamp(min=1)


class PPOClip(ImportanceSampledPG):
    """min(ratio x A, clip(ratio, 1 - eps, 1 + eps) x A) per token, summed, over the step's kept
    episodes: once an update has moved a token's ratio past the clip in A's favour, it stops pulling."""

    def __call__(self, learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, advantages_B, keep_B, normaliser):
        ratio_B_C = importance_ratio(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, self.cap)
        clipped_B_C = ratio_B_C.clamp(1 - self.clip_epsilon, 1 + self.clip_epsilon) * mask_B_C
        A_B1 = advantages_B[:, None]
        return -(torch.minimum(ratio_B_C * A_B1, clipped_B_C * A_B1) * keep_B[:, None]).sum() / normaliser


def loss_of(rl: RLConfig) -> ImportanceSampledPG:
    """The config's loss (rl.loss), with its truncation cap, clip and entropy bonus."""
    return LOSSES[rl.loss].load()(rl.truncated_is, rl.clip_epsilon, rl.entropy_coef)


def policy_gradient_loss(
    learner_logprobs_B_C,
    sampler_logprobs_B_C,
    mask_B_C,
    advantages_P_G,
    keep_P,
    episodes: torch.Tensor | None = None,
    cap: float | None = None,
):
    """The default loss (pg) of a whole step given per group: -sum over tokens of ratio x advantage,
    averaged over the episodes of groups that carry signal (or over `episodes`)."""
    G = advantages_P_G.shape[1]
    keep_B = keep_P.repeat_interleave(G).float()
    loss = ImportanceSampledPG(cap)
    episodes = loss.normaliser(mask_B_C, keep_B) if episodes is None else episodes
    return loss(learner_logprobs_B_C, sampler_logprobs_B_C, mask_B_C, advantages_P_G.reshape(-1), keep_B, episodes)
