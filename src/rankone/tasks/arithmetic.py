"""Two-operand addition, the RL task: "07+45=" -> "52", exact-match reward.

The problem space (all operand pairs) is split into disjoint train/val/test sets,
so test accuracy measures the learned skill, not recall of seen problems.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rankone.tasks.base import Task


class ArithmeticParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    max_operand: int = Field(99, ge=1, le=9999, description="Operands are drawn from 0..max_operand.")
    n_val: int = Field(256, gt=0, description="Validation problems.")
    n_test: int = Field(256, gt=0, description="Test problems.")
    n_train: int = Field(0, ge=0, description="Train problems; 0 means all the rest.")

    @model_validator(mode="after")
    def _fits(self) -> ArithmeticParams:
        space = (self.max_operand + 1) ** 2
        if self.n_val + self.n_test + self.n_train > space:
            raise ValueError(f"n_train + n_val + n_test exceeds the {space} distinct problems")
        return self


class Arithmetic(Task):
    name = "arithmetic"
    Params = ArithmeticParams

    @classmethod
    def prompt(cls, params: ArithmeticParams, a: int, b: int) -> str:
        width = len(str(params.max_operand))
        return f"{a:0{width}d}+{b:0{width}d}="

    @classmethod
    def splits(cls, params: ArithmeticParams, seed: int) -> dict[str, list[dict]]:
        pairs = [(a, b) for a in range(params.max_operand + 1) for b in range(params.max_operand + 1)]
        cls.rng(seed, cls.name).shuffle(pairs)
        n_val, n_test = params.n_val, params.n_test
        n_train = params.n_train or len(pairs) - n_val - n_test
        chunks = {
            "val": pairs[:n_val],
            "test": pairs[n_val : n_val + n_test],
            "train": pairs[n_val + n_test : n_val + n_test + n_train],
        }
        return {
            split: [{"prompt": cls.prompt(params, a, b), "answer": str(a + b)} for a, b in chunk]
            for split, chunk in chunks.items()
        }
