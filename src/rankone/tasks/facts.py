"""Random facts, the SFT task: "qzkf:" -> "4071", a table of keys to random digit strings.

Each value is drawn uniformly, so the table holds exactly n_facts * digits *
log2(alphabet) bits (10 symbols by default, 2 for binary values) that no rule
compresses: a dataset whose information content is known and can be set above or below
what an adapter of a given size can store. A random table has nothing to generalise to,
so val and test are disjoint subsets of the trained facts (recall probes): the learning
rate is chosen on one set of facts, reported on another. The warm-up split is another
table of as many facts, with none of the train keys: it teaches the base model the
`key:value` format and nothing of the content.
"""

from __future__ import annotations

import itertools
import math
import string

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rankone.tasks.base import Task


# The most values answer_space lists (4 decimal digits): beyond it rl.explore is refused.
MAX_ANSWER_SPACE = 10_000


class FactsParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    n_facts: int = Field(2048, gt=0, description="Keys in the table (all are trained on).")
    key_letters: int = Field(4, ge=1, le=8, description="Letters per key.")
    digits: int = Field(4, ge=1, le=48, description="Digits per value.")
    alphabet: int = Field(
        10, ge=2, le=10, description="Each digit is drawn from 0 .. alphabet-1 (2: binary values, 1 bit a digit)."
    )
    n_val: int = Field(256, gt=0, description="Facts probed for validation.")
    n_test: int = Field(256, gt=0, description="Facts probed for test (disjoint from val).")

    @model_validator(mode="after")
    def _fits(self) -> FactsParams:
        if self.n_val + self.n_test > self.n_facts:
            raise ValueError("n_val + n_test exceeds n_facts")
        if self.n_facts > 26**self.key_letters // 4:  # room for the warm-up table too
            raise ValueError(f"n_facts is too large for {self.key_letters}-letter keys")
        return self


class Facts(Task):
    name = "facts"
    Params = FactsParams
    stores_table = True  # what a run stored is measured in bits (evaluate, either regime)

    @classmethod
    def splits(cls, params: FactsParams, seed: int) -> dict[str, list[dict]]:
        rng = cls.rng(seed, cls.name)
        keys: set[str] = set()

        def table() -> list[dict]:
            ordered = []
            while len(ordered) < params.n_facts:
                key = "".join(rng.choice(string.ascii_lowercase) for _ in range(params.key_letters))
                if key not in keys:
                    keys.add(key)
                    ordered.append(key)
            symbols = string.digits[: params.alphabet]
            return [
                {"prompt": f"{key}:", "answer": "".join(rng.choice(symbols) for _ in range(params.digits))}
                for key in ordered
            ]

        rows = table()
        probes = rows[:]
        rng.shuffle(probes)
        return {
            "train": rows,
            "val": probes[: params.n_val],
            "test": probes[params.n_val : params.n_val + params.n_test],
            "warmup": table(),  # drawn after the train keys, never one of them
        }

    @classmethod
    def information_bits(cls, params: FactsParams, rows: list[dict]) -> float:
        return len(rows) * params.digits * math.log2(params.alphabet)

    @classmethod
    def answer_space(cls, params: FactsParams) -> list[str] | None:
        """Every value of the table's kind (alphabet ** digits of them), up to MAX_ANSWER_SPACE."""
        if params.alphabet**params.digits > MAX_ANSWER_SPACE:
            return None
        symbols = string.digits[: params.alphabet]
        return ["".join(v) for v in itertools.product(symbols, repeat=params.digits)]

    @staticmethod
    def parse_answer(completion: str) -> str | None:
        # Values are digit strings where leading zeros matter.
        text = completion.strip()
        return text if text.isdigit() else None
