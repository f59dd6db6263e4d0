"""Answers checked by math-verify, for tasks whose completions are free text (chat models).

The checker extracts the final mathematical answer from a completion with
`math_verify.parse` (LaTeX, boxed or plain expressions: "So 5 + 3 = 8.", "x = 1/2") and
compares it with the reference by value (`math_verify.verify`), so it tolerates the
model's phrasing. The reference is parsed as `\\boxed{answer}`. The same checker scores
the base model, every trained run and every evaluation.

Where the reference is a number, the completion's answer must be written as one (an integer, a
decimal or a fraction): math-verify evaluates a plain expression, so a completion that only restates
the problem ("To calculate -(44 + 91), I'll ...") would otherwise score as its answer (-135). An
answer that is itself an expression (MATH's "2\\sqrt{3}") is compared by value as before.
"""

from __future__ import annotations

import functools
import re

from rankone.tasks.base import Task

# A number as math-verify writes what it extracted: "-135", "3.5", "1/2", "\\frac{1}{2}".
NUMBER = re.compile(r"[+-]?(\d+(\.\d+)?|\d+/\d+|\\frac\{\d+\}\{\d+\})")


def is_number(text: str) -> bool:
    return NUMBER.fullmatch(text.replace(" ", "").replace(",", "")) is not None


@functools.lru_cache(maxsize=65536)
def parse_reference(answer: str) -> tuple:
    from math_verify import parse

    return tuple(parse(f"\\boxed{{{answer}}}"))


def parse_completion(completion: str) -> list:
    from math_verify import parse

    return parse(completion)


def equal_by_value(parsed: list, answer: str) -> bool:
    """math-verify's equivalence alone of an extracted answer (`parse_completion`) and the reference,
    however the answer is written: the checker before it asked for a number where the reference is one."""
    from math_verify import verify

    gold = parse_reference(answer)
    return bool(gold) and bool(parsed) and verify(list(gold), parsed)


class MathAnswerTask(Task):
    """A task whose reward is math-verify's equivalence of the completion's answer and the reference."""

    @staticmethod
    def parse_answer(completion: str) -> str | None:
        parsed = parse_completion(completion)
        return str(parsed[-1]) if parsed else None

    @classmethod
    def reward(cls, completion: str, answer: str) -> float:
        parsed = parse_completion(completion)
        if parsed and is_number(answer) and not is_number(str(parsed[-1])):
            return 0.0  # an expression where a number is asked for (the module's docstring)
        return 1.0 if equal_by_value(parsed, answer) else 0.0
