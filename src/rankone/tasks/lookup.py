"""A random n-gram lookup table, the SFT task: "qzkfab=" -> "4071", answers read off a table.

A hidden table T maps every n-letter window to a uniformly random digit; the answer to a
string of letters is T applied to each window in turn. The table holds exactly
alphabet**order * log2(10) bits that no rule compresses: a dataset whose information
content is known and sits far above what a rank-1 adapter can store. Every answer
digit depends on letters at a fixed distance back, which small transformers pick up
fast, and val/test are fresh strings, so the test loss measures how much of the table
the model absorbed, not recall of seen examples.
"""

from __future__ import annotations

import itertools
import math
import string

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rankone.tasks.base import Task


class LookupParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    alphabet: int = Field(26, ge=2, le=26, description="Letters used (the first `alphabet` of a..z).")
    order: int = Field(3, ge=1, le=4, description="Window length n: each digit is T[n consecutive letters].")
    length: int = Field(12, ge=1, le=40, description="Letters per prompt.")
    n_train: int = Field(20000, gt=0, description="Training strings.")
    n_val: int = Field(256, gt=0, description="Validation strings (fresh).")
    n_test: int = Field(256, gt=0, description="Test strings (fresh).")

    @model_validator(mode="after")
    def _fits(self) -> LookupParams:
        if self.length < self.order:
            raise ValueError("length must be at least order")
        return self


class Lookup(Task):
    name = "lookup"
    Params = LookupParams

    @classmethod
    def table(cls, params: LookupParams, seed: int) -> dict[str, str]:
        rng = cls.rng(seed, "lookup-table")
        letters = string.ascii_lowercase[: params.alphabet]
        return {"".join(w): rng.choice(string.digits) for w in itertools.product(letters, repeat=params.order)}

    @classmethod
    def splits(cls, params: LookupParams, seed: int) -> dict[str, list[dict]]:
        table = cls.table(params, seed)
        letters = string.ascii_lowercase[: params.alphabet]
        rng = cls.rng(seed, cls.name)
        seen: set[str] = set()

        def fresh(n: int) -> list[dict]:
            rows = []
            while len(rows) < n:
                text = "".join(rng.choice(letters) for _ in range(params.length))
                if text in seen:
                    continue
                seen.add(text)
                windows = (text[i : i + params.order] for i in range(params.length - params.order + 1))
                rows.append({"prompt": f"{text}=", "answer": "".join(table[w] for w in windows)})
            return rows

        return {"val": fresh(params.n_val), "test": fresh(params.n_test), "train": fresh(params.n_train)}

    @classmethod
    def information_bits(cls, params: LookupParams, rows: list[dict]) -> float:
        return params.alphabet**params.order * math.log2(10)

    @staticmethod
    def parse_answer(completion: str) -> str | None:
        text = completion.strip()
        return text if text.isdigit() else None
