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
    assert set(prompts) == {"train", "val", "test", "warmup"}
    for one, other in [
        ("train", "val"),
        ("train", "test"),
        ("val", "test"),
        ("warmup", "train"),
        ("warmup", "val"),
        ("warmup", "test"),
    ]:
        assert not prompts[one] & prompts[other], (one, other)
    assert sum(len(p) for p in prompts.values()) == 31 * 31  # every problem in exactly one split
    assert 50 <= len(prompts["val"]) <= 51 and 60 <= len(prompts["test"]) <= 61
    for row in a["train"]:
        x, y = row["prompt"].rstrip("=").split("+")
        assert int(row["answer"]) == int(x) + int(y)


def test_arithmetic_splits_keep_both_orders_of_a_pair_together():
    """`b+a` is a trivial variant of `a+b`: it must never sit in another split (above all not
    in the warm-up, which would make RL sharpen what the base already holds)."""
    splits = Arithmetic.splits(ArithmeticParams(max_operand=99, n_val=256, n_test=256), 0)
    where = {}
    for split, rows in splits.items():
        for row in rows:
            a, b = row["prompt"].rstrip("=").split("+")
            where.setdefault(frozenset((int(a), int(b))), set()).add(split)
    assert all(len(s) == 1 for s in where.values())
    swapped_in_train = [
        r
        for r in splits["test"]
        if "+".join(reversed(r["prompt"][:-1].split("+"))) + "="
        in {t["prompt"] for t in splits["train"] + splits["warmup"]}
    ]
    assert swapped_in_train == []


def test_facts_warmup_table_shares_no_key_with_the_trained_table():
    params = FactsParams(n_facts=300, digits=2, n_val=20, n_test=30)
    splits = Facts.splits(params, 1)
    assert len(splits["warmup"]) == 300
    assert not {r["prompt"] for r in splits["warmup"]} & {r["prompt"] for r in splits["train"]}


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


def test_binary_facts_hold_one_bit_a_fact():
    from rankone.tasks.facts import Facts, FactsParams

    params = FactsParams(n_facts=400, digits=1, alphabet=2, n_val=20, n_test=30)
    splits = Facts.splits(params, seed=0)
    answers = [r["answer"] for r in splits["train"]]
    assert set(answers) == {"0", "1"} and 150 < answers.count("1") < 250
    assert Facts.information_bits(params, splits["train"]) == 400.0
    ten = FactsParams(n_facts=400, digits=2, n_val=20, n_test=30)
    assert Facts.information_bits(ten, Facts.splits(ten, 0)["train"]) == pytest.approx(400 * 2 * 3.321928, rel=1e-6)


def test_a_stated_confidence_is_read_and_the_answer_checked_without_it():
    from rankone.tasks.confidence import split_confidence, with_confidence
    from rankone.tasks.facts import Facts

    assert split_confidence(" 52:9 ") == ("52", 1.0)
    assert split_confidence("52:0") == ("52", 0.0)
    assert split_confidence("52") == ("52", None)
    assert split_confidence("52:") == ("52:", None) and split_confidence("52:10") == ("52:10", None)
    stated = with_confidence(Arithmetic)
    assert stated.states_confidence and not Arithmetic.states_confidence and stated is with_confidence(Arithmetic)
    assert stated.reward("52:3", "52") == 1.0 and stated.reward("52", "52") == 1.0  # the digit is not the answer
    assert stated.reward("51:9", "52") == 0.0 and stated.reward("52:x", "52") == 0.0
    assert with_confidence(Facts).parse_answer("0071:4") == "0071"  # leading zeros kept by the task's own parser


def test_the_warm_up_corpus_gets_an_uninformative_confidence_digit():
    from rankone.tasks.confidence import with_confidence

    rows = Arithmetic.splits(ArithmeticParams(max_operand=9, n_val=8, n_test=8), seed=0)["warmup"]
    plain = Arithmetic.corpus(rows, 0.3, 2000, seed=1)
    stated = with_confidence(Arithmetic).corpus(rows, 0.3, 2000, seed=1)
    assert [(q, a) for q, a in plain] == [(q, a.rsplit(":", 1)[0]) for q, a in stated]  # the same pairs
    digits = [a.rsplit(":", 1)[1] for _, a in stated]
    assert set(digits) == set("0123456789")
    # The digits are drawn apart from the pairs: a corpus with no wrong answers states the same ones.
    clean = with_confidence(Arithmetic).corpus(rows, 0.0, 2000, seed=1)
    assert [a.rsplit(":", 1)[1] for _, a in clean] == digits


def test_brier_score_and_calibration_error_on_known_cases():
    from rankone.tasks.confidence import brier_terms, calibration

    # Confidence 1 and right, 0 and wrong: perfect.
    assert calibration(["5:9", "6:0"], [1.0, 0.0]) == {"brier": 0.0, "ece": 0.0, "confidence_stated": 1.0}
    # Always p = 1/3 (digit 3), right one time in three: calibrated (ECE 0) but not sharp (Brier 2/9).
    out = calibration(["5:3", "6:3", "7:3"], [1.0, 0.0, 0.0])
    assert abs(out["ece"]) < 1e-12 and abs(out["brier"] - 2 / 9) < 1e-12
    # Always certain, right half the time: ECE 0.5; a missing confidence scores (p - y)^2 = 1.
    assert calibration(["5:9", "6:9"], [1.0, 0.0])["ece"] == 0.5
    assert brier_terms(["5", "5:9"], [1.0, 1.0]) == [1.0, 0.0]
    out = calibration(["5", "6:9"], [1.0, 1.0])
    assert out["confidence_stated"] == 0.5 and out["brier"] == 0.5 and out["ece"] == 0.0


def capitals(path, n: int = 40):
    """A JSONL file of made-up questions: the 'question' and 'answer' fields a user's data might have."""
    import json

    rows = [{"question": f"What is {i} times 3?", "answer": str(3 * i), "id": i} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_task_from_a_local_file_and_a_checker_named_in_the_config(tmp_path):
    """`dataset`: a JSONL file, a prompt template over its fields, a system prompt, the number checker;
    test carved from train (the file has one split), the same splits for the same seed."""
    from types import SimpleNamespace

    from rankone.tasks import params_of, task_of

    spec = SimpleNamespace(
        name="dataset",
        confidence=False,
        params={
            "path": str(capitals(tmp_path / "mine.jsonl")),
            "prompt": "Q{id}: {question}",
            "system_prompt": "Answer with a number.",
            "checker": "number",
            "n_val": 8,
            "n_test": 10,
        },
    )
    task, params = task_of(spec), params_of(spec)
    splits = task.splits(params, seed=0)
    assert [len(splits[s]) for s in ("train", "val", "test")] == [22, 8, 10]
    assert splits == task.splits(params, seed=0) and splits != task.splits(params, seed=1)
    prompts = [r["prompt"] for s in ("train", "val", "test") for r in splits[s]]
    assert len(set(prompts)) == 40 and all(p.startswith("Answer with a number.\n\nQ") for p in prompts)
    row = splits["test"][0]
    assert task.reward(f"So it is {row['answer']}.", row["answer"]) == 1.0
    assert task.reward(f"{int(row['answer']) + 1}", row["answer"]) == 0.0
    assert task.reward("no idea", row["answer"]) == 0.0
    task.check_references(splits)


@pytest.mark.parametrize(
    "checker, completion, answer, reward",
    [
        ("exact", " Paris ", "Paris", 1.0),
        ("exact", "paris", "Paris", 0.0),
        ("number", "about 1,200.0 people", "1200", 1.0),
        ("number", "12 or 13", "12", 0.0),
        ("math", "so x = \\frac{1}{2}", "0.5", 1.0),
        ("math", "x = 2", "0.5", 0.0),
        # a number's answer is a number: restating the problem as an expression is no answer
        ("math", "To calculate -(44 + 91), I'll use a combination of", "-135", 0.0),
        ("math", "44 + 91", "135", 0.0),
        ("math", "-(44 + 91) = -135.", "-135", 1.0),
        ("math", "about 1,200 people", "1200", 1.0),
        # an expression's answer is compared by value
        ("math", "the answer is $\\sqrt{12}$", "2\\sqrt{3}", 1.0),
    ],
)
def test_each_named_checker(tmp_path, checker, completion, answer, reward):
    from rankone.tasks.dataset import Dataset, DatasetParams

    task = Dataset.configured(DatasetParams(path="unused", checker=checker))
    assert task.reward(completion, answer) == reward


def test_a_field_the_rows_lack_is_a_one_line_error(tmp_path):
    from rankone.io import InputError
    from rankone.tasks.dataset import Dataset, DatasetParams

    params = DatasetParams(path=str(capitals(tmp_path / "mine.jsonl")), prompt="{problem}")
    with pytest.raises(InputError, match="a row has no field 'problem' .its fields: question, answer, id"):
        Dataset.splits(params, 0)


class Doubling(Arithmetic):
    """A task an installed package adds (through the entry point group rankone.tasks)."""

    name = "doubling"


def test_an_installed_package_adds_a_task_through_the_entry_point(monkeypatch):
    from importlib.metadata import EntryPoint

    from rankone import tasks

    found = {"rankone.tasks": [EntryPoint("doubling", "tests.test_tasks:Doubling", "rankone.tasks")]}
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: found.get(group, []))
    assert tasks.installed() == {"doubling": Doubling}
    found["rankone.tasks"].append(EntryPoint("clash", "tests.test_tasks:Doubling", "rankone.tasks"))
    with pytest.raises(ValueError, match="task name 'doubling' is taken"):
        tasks.installed()
    found["rankone.tasks"] = [EntryPoint("bad", "tests.test_tasks:capitals", "rankone.tasks")]
    with pytest.raises(ValueError, match="entry point 'bad' .* is not a rankone.tasks.Task subclass"):
        tasks.installed()


def test_the_data_stage_builds_a_configured_task_from_a_study_config(tmp_path):
    """The worked example of docs/running.md: a study's RL task from a file, no change to src/."""
    from rankone import data
    from rankone.checks import validate
    from rankone.data import read_split
    from tests.conftest import smoke_dict

    path = capitals(tmp_path / "mine.jsonl")
    task = {"name": "dataset", "params": {"path": str(path), "checker": "number", "n_val": 8, "n_test": 8}}
    cfg = validate(smoke_dict(tasks={**smoke_dict()["tasks"], "rl": task}, levers=None))
    manifest = data.build(cfg, "rl", tmp_path / "rl")
    assert manifest["task"] == "dataset" and len(read_split(tmp_path / "rl", "test")) == 8


def test_the_measurement_scripts_say_in_one_line_what_they_cannot_measure(tmp_path):
    """scripts/checker-restatements (the measurement behind real-cpu's withdrawal) refuses a study whose
    RL task math-verify does not check, and a config that is not there; scripts/base-pass-at-k a config
    that is not there and a study whose models are not built (here, in an empty folder); one line each."""
    import subprocess
    import sys

    from tests.conftest import ROOT, venv_env

    refusals = (
        ("checker-restatements", "config/default.yaml", "is not checked by math-verify"),
        ("checker-restatements", "nope.yaml", "nope.yaml"),
        ("base-pass-at-k", "nope.yaml", "nope.yaml"),
        ("base-pass-at-k", "config/default.yaml", "not built; run the study's data and models stages first"),
    )
    for name, study, says in refusals:
        out = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / name), str(ROOT / study), "llama-tiny"],
            cwd=tmp_path,
            env=venv_env(PYTHONPATH=str(ROOT / "src")),
            capture_output=True,
            text=True,
        )
        assert out.returncode != 0 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
