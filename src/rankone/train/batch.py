"""A step's rollouts as typed records: a `Round` is one rollout call (a group of samples per
prompt, scored, with advantages and the groups that carry signal), a `Batch` the rounds of one
step (one, or more under the variance filter's refills), as tinker-cookbook's TrajectoryGroup.

`Batch.backward` is the step's loss and gradients: each round's rows go through the learner's
one accumulation loop (micro-batches and process shares alike, rankone.train.learner), each
part normalised by the whole step's count, so the accumulated gradients are the whole step's.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import torch

from rankone.models.sequences import Samples


def pad_cat(tensors_B_C: list[torch.Tensor]) -> torch.Tensor:
    """Rows of several batches in one tensor, each right-padded with zeros to the longest completion."""
    C = max(t.shape[1] for t in tensors_B_C)
    return torch.cat([torch.nn.functional.pad(t, (0, C - t.shape[1])) for t in tensors_B_C])


@dataclass
class Round:
    """One rollout call of a step: a group of samples per prompt, scored."""

    samples: Samples
    task_rewards_B: torch.Tensor  # the task's checker
    rewards_B: torch.Tensor  # what the update learns from
    advantages_P_G: torch.Tensor
    keep_P: torch.Tensor  # groups that carry signal
    explored_B: torch.Tensor | None = None  # rows the exploration floor replaced (rankone.train.explore)

    def __len__(self) -> int:
        return len(self.samples.texts)

    @property
    def keep_B(self) -> torch.Tensor:
        return self.keep_P.repeat_interleave(self.advantages_P_G.shape[1])


@dataclass
class Batch:
    """The rounds of one step, and what the update and the log read of them as one batch."""

    rounds: list[Round]
    temperature: float  # the samples' temperature, at which the learner scores them too

    def cat(self, key: str) -> torch.Tensor:
        return torch.cat([getattr(x, key) for x in self.rounds])

    @functools.cached_property
    def task_rewards_B(self) -> torch.Tensor:
        return self.cat("task_rewards_B")

    @functools.cached_property
    def rewards_B(self) -> torch.Tensor:
        return self.cat("rewards_B")

    @functools.cached_property
    def keep_P(self) -> torch.Tensor:
        return self.cat("keep_P")

    @functools.cached_property
    def mask_B_C(self) -> torch.Tensor:
        return pad_cat([x.samples.completion_mask_B_C for x in self.rounds]).float()

    @functools.cached_property
    def explored_B(self) -> torch.Tensor:
        """Rows the exploration floor replaced (none without it)."""
        return torch.cat(
            [x.explored_B if x.explored_B is not None else torch.zeros(len(x), dtype=torch.bool) for x in self.rounds]
        )

    @functools.cached_property
    def sampled_B(self) -> torch.Tensor | None:
        """The rows the engine sampled, where the floor replaced some but not all (None: read every row)."""
        explored_B = self.explored_B
        return ~explored_B if explored_B.any() and not explored_B.all() else None

    def sampled(self, values_B: torch.Tensor) -> torch.Tensor:
        """A value per row, on the rows the engine sampled (sampled_B)."""
        return values_B if self.sampled_B is None else values_B[self.sampled_B.to(values_B.device)]

    @functools.cached_property
    def sampled_mask_B_C(self) -> torch.Tensor:
        """mask_B_C on the rows the engine sampled (sampled_B): what the freshness check and the entropy read."""
        if self.sampled_B is None:
            return self.mask_B_C
        return self.mask_B_C * self.sampled_B.to(self.mask_B_C.device)[:, None]

    @functools.cached_property
    def sampler_logprobs_B_C(self) -> torch.Tensor:
        return pad_cat([x.samples.sampler_logprobs_B_C for x in self.rounds])

    @property
    def G(self) -> int:
        return self.rounds[0].advantages_P_G.shape[1]

    @property
    def texts(self) -> list[str]:
        return [t for x in self.rounds for t in x.samples.texts]

    @property
    def learns(self) -> bool:
        """Whether any group carries signal."""
        return bool(self.keep_P.any())

    def updates(self, loss) -> bool:
        """Whether the step takes an optimizer step: a group carries signal, or the loss has an entropy
        bonus (which every group's tokens carry)."""
        return self.learns or loss.entropy_coef > 0

    def backward(self, learner, loss, micro_batch: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The step's loss (rankone.train.pg) and its gradients, accumulated in the policy's: every round's
        rows in micro-batches of `micro_batch` and process shares (Learner.accumulate), each part divided by
        the whole step's normaliser; no gradients when no group carries signal. Returns the loss and the
        learner's log-probs of every sampled token (detached, every process's rows)."""
        keep_B = torch.cat([x.keep_B for x in self.rounds]).float()
        normaliser = loss.normaliser(self.mask_B_C, keep_B)
        tokens = self.mask_B_C.sum().clamp(min=1)  # the entropy bonus's count: every token of the step
        losses, logprobs = [], []
        for x in self.rounds:
            part, parts_b_C = learner.accumulate(
                len(x),
                "sequences a step (rl.prompts_per_step x rl.group_size)",
                functools.partial(_round_loss, learner, x, loss, (normaliser, tokens), self.temperature),
                micro_batch,
                self.updates(loss),
            )
            losses.append(part)
            logprobs.append(learner.group.gather_rows(torch.cat(parts_b_C)))
        return functools.reduce(operator.add, losses), pad_cat(logprobs)


def _round_loss(learner, x: Round, loss, counts: tuple, temperature: float, rows: slice):
    """The loss of some rows of a round (with gradients when enabled), and their log-probs, detached.
    `counts`: the whole step's normaliser (the loss's) and its tokens (the entropy bonus's)."""
    s = x.samples
    normaliser, tokens = counts
    mask_b_C = s.completion_mask_B_C[rows].float()
    if loss.entropy_coef:
        logprobs_b_C, entropy_b_C = learner.logprobs(s, rows, temperature, entropy=True)
    else:
        logprobs_b_C = learner.logprobs(s, rows, temperature)
    part = loss(
        logprobs_b_C,
        s.sampler_logprobs_B_C[rows],
        mask_b_C,
        x.advantages_P_G.reshape(-1)[rows],
        x.keep_B[rows].float(),
        normaliser,
    )
    if loss.entropy_coef:
        part = part + loss.bonus(entropy_b_C, mask_b_C, tokens)
    return part, logprobs_b_C.detach()
