"""The task interface."""

from __future__ import annotations

import random
import re

from pydantic import BaseModel

# warmup: what the base model may be pretrained on, disjoint from train, val and test.
SPLITS = ("train", "val", "test", "warmup")
_INTEGER = re.compile(r"\s*(-?\d+)\s*")


class Task:
    """A verifiable task. Subclasses set `name`, `Params` and implement `splits`."""

    name: str
    Params: type[BaseModel]
    stores_table = False  # True: a table of known entropy, so evaluate measures the bits a run stored
    states_confidence = False  # True: completions end in a stated confidence (rankone.tasks.confidence)

    @classmethod
    def configured(cls, params: dict) -> type[Task]:
        """The task as a config's `params` (as written) configure it: a generic task binds its checker
        here; most tasks are themselves whatever their params."""
        return cls

    @classmethod
    def splits(cls, params: BaseModel, seed: int) -> dict[str, list[dict]]:
        """Rows {"prompt": str, "answer": str} of each of SPLITS, a pure function of (params, seed)."""
        raise NotImplementedError

    @classmethod
    def information_bits(cls, params: BaseModel, rows: list[dict]) -> float | None:
        """Entropy of the answers given the prompts under the generating process, if known."""
        return None

    @classmethod
    def answer_space(cls, params: BaseModel) -> list[str] | None:
        """Every answer the task can have, when they are few enough to list (rl.explore draws from
        them); None: not listable."""
        return None

    @staticmethod
    def parse_answer(completion: str) -> str | None:
        """The final answer in a completion: the integer it consists of, else None."""
        m = _INTEGER.fullmatch(completion)
        return str(int(m[1])) if m else None

    @classmethod
    def reward(cls, completion: str, answer: str) -> float:
        """Exact match of the parsed final answer: 1.0 or 0.0."""
        return 1.0 if cls.parse_answer(completion) == answer else 0.0

    @classmethod
    def check_references(cls, splits: dict[str, list[dict]]) -> None:
        """Refuse data whose reference answers the task's own checker cannot parse (it would score
        every completion wrong): a reference must earn full reward as a completion of its own."""
        from rankone.io import InputError

        for split, rows in splits.items():
            for i, row in enumerate(rows):
                if cls.reward(row["answer"], row["answer"]) != 1.0:
                    raise InputError(
                        f"task {cls.name!r}, {split} row {i} (prompt {row['prompt'][:60]!r}): the answer "
                        f"checker cannot parse the reference answer {row['answer']!r}"
                    )

    @classmethod
    def corpus(cls, rows: list[dict], corruption: float, n: int, seed: int) -> list[tuple[str, str]]:
        """Pretraining pairs (prompt, answer) drawn from `rows`, a share `corruption` of them
        given the answer of another row, so the warm-started policy is right only part of the time."""
        rng = cls.rng(seed, "corpus")
        out = []
        for _ in range(n):
            row = rows[rng.randrange(len(rows))]
            answer = rows[rng.randrange(len(rows))]["answer"] if rng.random() < corruption else row["answer"]
            out.append((row["prompt"], answer))
        return out

    @staticmethod
    def rng(seed: int, salt: str) -> random.Random:
        return random.Random(f"{salt}:{seed}")
