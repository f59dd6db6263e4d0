"""Procedural tasks from reasoning-gym (106 generators, offline), for RL on real checkpoints.

`tasks.rl: {name: reasoning-gym, params: {dataset: basic_arithmetic, config: {...}}}` draws
questions from the named generator (its own config fields in `config`) with the study's
seed, removes repeated questions, and splits them into disjoint val, test, train and an
optional warm-up (for tiny presets that need one; real checkpoints are not warm-started).
Prompts are the generator's questions (plus `instruction`); answers are checked with
math-verify (`rankone.tasks.math_answers`), which reads a free-text answer, so this suits
generators whose answers are numbers or expressions (arithmetic, algebra, counting...).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rankone.tasks.math_answers import MathAnswerTask


class ReasoningGymParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    dataset: str = Field("basic_arithmetic", description="reasoning-gym generator name (reasoning_gym.factory).")
    config: dict = Field(default_factory=dict, description="The generator's own config fields (its *Config class).")
    instruction: str = Field("", description="Appended to every question (e.g. 'Answer with a number.').")
    n_train: int = Field(1024, gt=0, description="Distinct training questions.")
    n_val: int = Field(128, gt=0, description="Distinct validation questions.")
    n_test: int = Field(128, gt=0, description="Distinct test questions.")
    n_warmup: int = Field(0, ge=0, description="Distinct warm-up questions (tiny presets only).")

    @model_validator(mode="after")
    def _known_generator(self) -> ReasoningGymParams:
        import reasoning_gym

        if self.dataset not in reasoning_gym.factory.DATASETS:
            raise ValueError(f"dataset {self.dataset!r} is not a reasoning-gym generator")
        try:
            reasoning_gym.create_dataset(self.dataset, size=1, seed=0, **self.config)
        except (TypeError, ValueError, AssertionError) as err:
            raise ValueError(f"config of reasoning-gym generator {self.dataset!r}: {err}") from None
        return self


class ReasoningGym(MathAnswerTask):
    name = "reasoning-gym"
    Params = ReasoningGymParams

    @classmethod
    def splits(cls, params: ReasoningGymParams, seed: int) -> dict[str, list[dict]]:
        import reasoning_gym

        from rankone.io import InputError

        sizes = {"val": params.n_val, "test": params.n_test, "train": params.n_train, "warmup": params.n_warmup}
        wanted = sum(sizes.values())
        rows: dict[str, dict] = {}  # question -> row, first draw wins: no question in two splits
        for entry in reasoning_gym.create_dataset(params.dataset, size=4 * wanted, seed=seed, **params.config):
            prompt = entry["question"] + (f" {params.instruction}" if params.instruction else "")
            rows.setdefault(prompt, {"prompt": prompt, "answer": str(entry["answer"])})
            if len(rows) == wanted:
                break
        if len(rows) < wanted:
            raise InputError(
                f"reasoning-gym {params.dataset!r} gave {len(rows)} distinct questions in "
                f"{4 * wanted} draws; the splits need {wanted} (make the generator's range wider or "
                "the splits smaller)"
            )
        ordered, out, start = list(rows.values()), {}, 0
        for split, size in sizes.items():
            out[split], start = ordered[start : start + size], start + size
        return out
