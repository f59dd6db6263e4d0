"""Two-operand addition, the RL task: "07+45=" -> "52", exact-match reward.

The problem space is split on **unordered** operand pairs, so `a+b` and `b+a` always
land in the same split, into four disjoint parts: the warm-start pool (the only
problems the base model is pretrained on), RL train, val and test. RL therefore
never sees a prompt (or its swapped form) that the base model was taught: a gain
is learning the skill on new problems, not sharpening answers it already holds.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rankone.tasks.base import Task


class ArithmeticParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    max_operand: int = Field(99, ge=1, le=9999, description="Operands are drawn from 0..max_operand.")
    n_val: int = Field(256, gt=0, description="Validation problems (whole unordered pairs: at most one more).")
    n_test: int = Field(256, gt=0, description="Test problems (whole unordered pairs: at most one more).")
    warmup_share: float = Field(
        0.5, gt=0, lt=1, description="Share of the remaining pairs given to the warm-start pool; the rest is RL train."
    )

    @model_validator(mode="after")
    def _fits(self) -> ArithmeticParams:
        space = (self.max_operand + 1) ** 2
        if self.n_val + self.n_test + 4 > space:
            raise ValueError(f"n_val + n_test leaves too few of the {space} distinct problems for warm-up and train")
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
        pairs = [(a, b) for a in range(params.max_operand + 1) for b in range(a, params.max_operand + 1)]
        cls.rng(seed, cls.name).shuffle(pairs)
        rest, chunks = pairs, {}
        for split, size in (("val", params.n_val), ("test", params.n_test)):
            taken, problems = 0, 0
            while problems < size:
                problems += 1 if rest[taken][0] == rest[taken][1] else 2
                taken += 1
            chunks[split], rest = rest[:taken], rest[taken:]
        n_warmup = round(len(rest) * params.warmup_share)
        chunks["warmup"], chunks["train"] = rest[:n_warmup], rest[n_warmup:]
        return {split: cls.rows(params, chunk) for split, chunk in chunks.items()}

    @classmethod
    def rows(cls, params: ArithmeticParams, pairs: list[tuple[int, int]]) -> list[dict]:
        """Both orders of every pair, side by side."""
        orders = [order for a, b in pairs for order in ([(a, b)] if a == b else [(a, b), (b, a)])]
        return [{"prompt": cls.prompt(params, a, b), "answer": str(a + b)} for a, b in orders]
