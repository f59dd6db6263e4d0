import math

import pytest

from rankone.tasks import TASKS
from rankone.tasks.arithmetic import Arithmetic, ArithmeticParams
from rankone.tasks.facts import Facts, FactsParams


@pytest.mark.parametrize(
    "completion, answer, reward",
    [
        ("52", "52", 1.0),
        (" 52 ", "52", 1.0),
        ("052", "52", 1.0),  # leading zero: same integer
        ("53", "52", 0.0),
        ("5 2", "52", 0.0),
        ("52+", "52", 0.0),
        ("", "52", 0.0),
        ("abc", "52", 0.0),
    ],
)
def test_arithmetic_reward(completion, answer, reward):
    assert Arithmetic.reward(completion, answer) == reward


def test_parse_answer():
    assert Arithmetic.parse_answer("198") == "198"
    assert Arithmetic.parse_answer("19 8") is None
    assert Facts.parse_answer("0071") == "0071"  # digits are a code: leading zeros matter
    assert Facts.reward("071", "0071") == 0.0


def test_arithmetic_splits_deterministic_disjoint_and_correct():
    params = ArithmeticParams(max_operand=30, n_val=50, n_test=60)
    a, b = Arithmetic.splits(params, 3), Arithmetic.splits(params, 3)
    assert a == b
    assert Arithmetic.splits(params, 4) != a
    prompts = {s: {r["prompt"] for r in rows} for s, rows in a.items()}
    assert not prompts["train"] & prompts["val"] and not prompts["train"] & prompts["test"]
    assert not prompts["val"] & prompts["test"]
    assert sum(len(p) for p in prompts.values()) == 31 * 31
    for row in a["train"]:
        x, y = row["prompt"].rstrip("=").split("+")
        assert int(row["answer"]) == int(x) + int(y)


def test_facts_bits_and_probes():
    params = FactsParams(n_facts=100, digits=3, n_val=20, n_test=30)
    splits = Facts.splits(params, 0)
    assert Facts.information_bits(params, splits["train"]) == pytest.approx(100 * 3 * math.log2(10))
    train = {r["prompt"]: r["answer"] for r in splits["train"]}
    assert len(train) == 100
    val, test = {r["prompt"] for r in splits["val"]}, {r["prompt"] for r in splits["test"]}
    assert not val & test and val <= set(train) and test <= set(train)


def test_registry():
    assert set(TASKS) >= {"arithmetic", "facts"}
