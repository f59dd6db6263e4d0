"""Rollout engines behind one small interface, looked up by name.

An engine samples completions for prompts from the *current* policy and returns,
per sample, the completion tokens, the sampler's per-token log-probs (used by the
importance ratio) and the finish reason. `sync(model)` hands the learner's newest
weights to the engine after every optimizer step.
"""

from __future__ import annotations

from rankone.models.sequences import Samples
from rankone.rollouts.hf import HFEngine

ENGINES = {"hf": HFEngine}


def make_engine(name: str, model, tokenizer, temperature: float, max_new_tokens: int):
    return ENGINES[name](model, tokenizer, temperature, max_new_tokens)


__all__ = ["ENGINES", "HFEngine", "Samples", "make_engine"]
