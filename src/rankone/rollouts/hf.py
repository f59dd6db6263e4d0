"""The transformers engine: samples (generate's token loop, `rankone.models.sequences.sample`) from the very
module being trained."""

from __future__ import annotations

from rankone.device import autocast
from rankone.models.sequences import Samples, sample


class HFEngine:
    """Samples from the learner's own module, so `sync` has nothing to copy."""

    name = "hf"

    def __init__(self, model, tokenizer, temperature: float, max_new_tokens: int, dtype: str = "float32"):
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.max_new_tokens, self.dtype = temperature, max_new_tokens, dtype
        self.version = 0  # the learner version it serves (rankone.train.pg.Freshness)

    def sync(self, model, version: int | None = None) -> None:
        """Serve `model` (the learner's module itself: nothing to copy) as learner version `version`
        (by default the next)."""
        self.model = model
        self.version = self.version + 1 if version is None else version

    def sleep(self) -> None:
        pass

    def close(self) -> None:
        pass

    def sample(self, prompts: list[str], n: int, greedy: bool = False) -> Samples:
        was_training = self.model.training
        self.model.eval()
        try:
            with autocast(self.model.device, self.dtype):
                return sample(self.model, self.tokenizer, prompts, n, self.temperature, self.max_new_tokens, greedy)
        finally:
            self.model.train(was_training)


def make(model, tokenizer, temperature, max_new_tokens, model_dir, rank, seed, dtype, options, processes):
    """The registry's factory (rankone.engines): the HF engine needs none of vLLM's arguments."""
    return HFEngine(model, tokenizer, temperature, max_new_tokens, dtype)
