"""Rollout engines behind one small interface, looked up by name.

An engine samples completions for prompts from the *current* policy and returns,
per sample, the completion tokens, the sampler's per-token log-probs (used by the
importance ratio) and the finish reason, on the model's device. `sync(model)` hands the
learner's newest weights to the engine after every optimizer step, and `version` names the learner
version it serves (the freshness check's exact half); `sleep()`, called
between sampling and the update, lets an engine that holds memory of its own (vLLM on
CUDA) give it back until the next `sync` or `sample`.
"""

from __future__ import annotations

from pathlib import Path

from rankone.engines import ENGINES
from rankone.models.sequences import Samples
from rankone.rollouts.hf import HFEngine


def make_engine(
    name: str,
    model,
    tokenizer,
    temperature: float,
    max_new_tokens: int,
    model_dir: str | Path | None = None,
    rank: int | None = None,
    seed: int = 0,
    dtype: str = "float32",
    options=None,
    processes: int = 1,
):
    """An engine sampling from `model` in `dtype` (vLLM also needs the base model folder and LoRA rank;
    `options`, the config's `rollout` section, sets its memory share and eager mode; `processes` > 1:
    one vLLM engine in each process of an FSDP group)."""
    if name not in ENGINES:
        raise ValueError(f"unknown rollout engine {name!r}; known: {', '.join(ENGINES)}")
    make = ENGINES[name].load()  # vLLM is imported only when a run asks for it
    return make(model, tokenizer, temperature, max_new_tokens, model_dir, rank, seed, dtype, options, processes)


__all__ = ["ENGINES", "HFEngine", "Samples", "make_engine"]
