"""Stated confidence: any task's answer followed by `:d`, the policy's probability d/9 that it is right.

`tasks.<regime>.confidence: true` wraps the task (`with_confidence`): the base model's warm-up
corpus appends a confidence digit drawn uniformly and independently of the answer, so the base
states confidences that carry no information (it starts uncalibrated); the answer checker reads
the answer before the `:d` and ignores the confidence, so accuracy is scored the same way for the
base, plain RL and calibrated RL. The calibration lever (`rl.calibration_alpha`) adds the
Brier term -alpha * (p - y)^2 to the reward (the tinker-cookbook `math_with_confidence` recipe
uses alpha = 0.2). A completion that states no confidence is scored as the worst one, (p - y)^2 = 1.
"""

from __future__ import annotations

import functools

from rankone.tasks.base import Task

LEVELS = 10  # confidence digits 0..9: p = d / 9, so 0 and 1 can be stated


def split_confidence(completion: str) -> tuple[str, float | None]:
    """The completion before a trailing `:d`, and p = d/9 (None when no confidence is stated)."""
    text = completion.strip()
    head, sep, tail = text.rpartition(":")
    if sep and len(tail) == 1 and tail.isdigit():
        return head, int(tail) / (LEVELS - 1)
    return text, None


def brier_terms(completions: list[str], correct: list[float]) -> list[float]:
    """(p - y)^2 per completion, y = 1 when the answer is right; 1.0 where no confidence is stated."""
    out = []
    for text, y in zip(completions, correct):
        p = split_confidence(text)[1]
        out.append(1.0 if p is None else (p - float(y > 0)) ** 2)
    return out


def calibration(completions: list[str], correct: list[float]) -> dict:
    """Brier score (mean of `brier_terms`), expected calibration error over the completions that
    state a confidence (one bin per level: sum over levels of share x |accuracy - p|) and the share
    that state one."""
    stated = [
        (p, float(y > 0)) for text, y in zip(completions, correct) if (p := split_confidence(text)[1]) is not None
    ]
    bins: dict[float, list[float]] = {}
    for p, y in stated:
        bins.setdefault(p, []).append(y)
    ece = sum(len(ys) * abs(sum(ys) / len(ys) - p) for p, ys in bins.items()) / len(stated) if stated else 1.0
    return {
        "brier": sum(brier_terms(completions, correct)) / len(completions),
        "ece": ece,
        "confidence_stated": len(stated) / len(completions),
    }


@functools.cache
def with_confidence(task: type[Task]) -> type[Task]:
    """`task` whose completions state a confidence after the answer (see the module docstring)."""

    class Stated(task):
        states_confidence = True

        @staticmethod
        def parse_answer(completion: str) -> str | None:
            return task.parse_answer(split_confidence(completion)[0])

        @classmethod
        def corpus(cls, rows: list[dict], corruption: float, n: int, seed: int) -> list[tuple[str, str]]:
            rng = cls.rng(seed, "confidence")  # the same pairs as the plain task's, a digit appended
            return [(q, f"{a}:{rng.randrange(LEVELS)}") for q, a in task.corpus(rows, corruption, n, seed)]

    Stated.__name__ = Stated.__qualname__ = f"{task.__name__}WithConfidence"
    return Stated
