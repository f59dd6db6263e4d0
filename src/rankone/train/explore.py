"""The exploration floor (`rl.explore`): a seeded share of each round's samples replaced by answers
drawn uniformly from every answer the task can have (Task.answer_space).

Why: a policy sure of a wrong answer samples only it; every sample of its group earns the same
reward, so no baseline gives the prompt a gradient, and an entropy bonus's gradient vanishes near
certainty too (docs/experiments.md, the baselines pilots). A floor of uniform answers still shows
such a prompt its right answer, whose log-prob gradient does not vanish as its probability goes
to 0. The replaced rows are learned from like samples, without an importance correction (the
update then follows the floor's mixture, not the policy alone: a bias, and the point). Their
sampler log-probs are the learner's own at the weights that sample the round, so the ratio is 1
in value as for a sampled row, and the freshness check reads only the rows the engine sampled.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from rankone.io import InputError
from rankone.models.sequences import Samples, decode_completions, encode_completions
from rankone.tasks import answers_of


class ExplorationFloor:
    """Replaces a seeded share of a round's samples by uniform answers (`apply`), scored by `score`
    (samples -> the policy's log-probs of their tokens, B x C)."""

    def __init__(self, share: float, space: list[str], tokenizer, score, seed: int):
        self.share, self.space, self.tokenizer, self.score, self.seed = share, space, tokenizer, score, seed

    @classmethod
    def of(cls, cfg, where: str, learner, seed: int) -> ExplorationFloor | None:
        """The run's floor (None when rl.explore is 0); an error naming the problem when the task's
        answers cannot be listed or several processes share the step."""
        if not cfg.rl.explore:
            return None
        spec = cfg.tasks["rl"]
        space = answers_of(spec)
        if not space:
            raise InputError(f"{where}: rl.explore: task {spec.name!r} cannot list its answers (Task.answer_space)")
        if learner.group.size > 1:
            raise InputError(f"{where}: rl.explore is not built under FSDP ({learner.group.size} processes)")
        temperature = cfg.rollout.temperature

        def score(samples: Samples) -> torch.Tensor:
            with torch.no_grad():
                return learner.logprobs(samples, slice(0, len(samples.texts)), temperature)

        return cls(cfg.rl.explore, space, learner.tokenizer, score, seed)

    def draw(self, n: int, step: int, round_: int) -> dict[int, str]:
        """Which of a round's `n` rows are replaced, and by what: a function of (seed, step, round) only,
        so a resumed run draws the same."""
        rng = random.Random(f"explore:{self.seed}:{step}:{round_}")
        picks = {}
        for i in range(n):
            if rng.random() < self.share:
                picks[i] = rng.choice(self.space)
        return picks

    def apply(self, samples: Samples, step: int, round_: int) -> tuple[Samples, torch.Tensor]:
        """The round's samples with the drawn rows replaced (each answer, then <eos>), and which rows
        were (a bool per row)."""
        B, width = samples.completion_B_C.shape
        device = samples.completion_B_C.device
        explored_B = torch.zeros(B, dtype=torch.bool, device=device)
        picks = self.draw(B, step, round_)
        if not picks:
            return samples, explored_B
        rows = sorted(picks)
        ids_b_C, mask_b_C = encode_completions(self.tokenizer, [picks[i] for i in rows])
        C = max(width, ids_b_C.shape[1])
        pad_id = self.tokenizer.pad_token_id

        def widened(t: torch.Tensor, value, replace: torch.Tensor) -> torch.Tensor:
            out = F.pad(t, (0, C - t.shape[1]), value=value).clone()
            out[rows] = F.pad(replace.to(device, out.dtype), (0, C - replace.shape[1]), value=value)
            return out

        completion_B_C = widened(samples.completion_B_C, pad_id, ids_b_C)
        mask_B_C = widened(samples.completion_mask_B_C, 0, mask_b_C)
        logprobs_B_C = F.pad(samples.sampler_logprobs_B_C, (0, C - width)).clone()
        texts, reasons = list(samples.texts), list(samples.finish_reasons)
        for i, text in zip(rows, decode_completions(self.tokenizer, ids_b_C.tolist())):
            texts[i], reasons[i] = text, "stop"
        out = Samples(
            samples.prompt_ids_B_L, samples.prompt_mask_B_L, completion_B_C, mask_B_C, logprobs_B_C, texts, reasons
        )
        logprobs_B_C[rows] = self.score(out)[rows].to(logprobs_B_C.dtype)  # out's own tensor
        explored_B[rows] = True
        return out, explored_B
