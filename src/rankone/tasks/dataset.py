"""A task from any dataset of questions and reference answers, configured rather than coded.

`tasks: {rl: {name: dataset, params: {...}}}` reads rows with `datasets.load_dataset`: a local
file (.jsonl, .json, .csv, .parquet), a local folder in a hub repository's layout, or a hub
dataset id at a pinned revision. Each row becomes a prompt (a `str.format` template over its
fields, after an optional system prompt) and a reference answer (one field), and completions
are scored by a checker chosen by name: `exact` (the stripped completion is the reference),
`number` (the last number in the completion equals the reference's) or `math` (math-verify's
equivalence, as the gsm8k and math tasks score). Val is carved from the source's train split;
test is its test split, or carved from train after val when the source has none. Both are
shuffled with the study's seed.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rankone.tasks.base import Task
from rankone.tasks.hub import carve
from rankone.tasks.math_answers import MathAnswerTask

FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class DatasetParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(
        description="A local file (.jsonl, .json, .csv, .parquet), a local folder in a hub repository's layout, "
        "or a hub dataset id."
    )
    revision: str | None = Field(None, description="Pinned commit of a hub dataset (required for a hub id).")
    name: str | None = Field(None, description="The dataset's config name, if it has several.")
    train_split: str = Field("train", description="The split train and val rows come from.")
    test_split: str | None = Field(
        "test", description="The split test rows come from; null (or a source without it): carved from train."
    )
    prompt: str = Field(
        "{question}",
        description="The prompt: a Python format string over each row's fields, e.g. 'Q: {question}\\nA:'.",
    )
    answer: str = Field("answer", description="The field holding the reference answer.")
    system_prompt: str | None = Field(None, description="Text put before every prompt, a blank line between.")
    checker: Literal["exact", "number", "math"] = Field(
        "exact",
        description="How a completion is scored against the reference: exact (equal once stripped), number (the "
        "last number in it equals the reference's) or math (math-verify's equivalence).",
    )
    n_train: int | None = Field(None, gt=0, description="Training rows (None: all that are left).")
    n_val: int = Field(64, gt=0, description="Validation rows, from the train split.")
    n_test: int = Field(128, gt=0, description="Test rows.")


def last_number(text: str) -> str | None:
    """The last number in `text` (thousands separators dropped), normalised: '1,200.0' -> '1200'."""
    found = _NUMBER.findall(text.replace(",", ""))
    if not found:
        return None
    value = float(found[-1])
    return str(int(value)) if value.is_integer() else str(value)


class ExactChecker:
    @staticmethod
    def parse_answer(completion: str) -> str | None:
        return completion.strip() or None

    @classmethod
    def reward(cls, completion: str, answer: str) -> float:
        return 1.0 if completion.strip() == answer.strip() else 0.0


class NumberChecker:
    @staticmethod
    def parse_answer(completion: str) -> str | None:
        return last_number(completion)

    @classmethod
    def reward(cls, completion: str, answer: str) -> float:
        got = last_number(completion)
        return 1.0 if got is not None and got == last_number(answer) else 0.0


CHECKERS = {"exact": ExactChecker, "number": NumberChecker, "math": MathAnswerTask}


def load_rows(params: DatasetParams, split: str) -> list[dict] | None:
    """The rows of one split of the source; None when the source has no such split."""
    import datasets

    from rankone.io import InputError

    path = Path(params.path)
    if path.is_file():
        builder = FILE_BUILDERS.get(path.suffix)
        if builder is None:
            raise InputError(f"task dataset: {params.path}: a file must end in {', '.join(FILE_BUILDERS)}")
        source = {"path": builder, "data_files": {"train": str(path)}}
    elif path.is_dir():
        source = {"path": str(path), "name": params.name}
    elif params.revision is None:
        raise InputError(f"task dataset: {params.path!r} is no local file or folder; a hub id needs a revision")
    else:
        source = {"path": params.path, "name": params.name, "revision": params.revision}
    try:
        loaded = datasets.load_dataset(**source)
    except (ConnectionError, OSError, ValueError) as err:
        raise InputError(
            f"task dataset: cannot load {params.path} with datasets.load_dataset (no network?): "
            f"{str(err).splitlines()[0]}"
        ) from None
    return list(loaded[split]) if split in loaded else None


class Dataset(Task):
    """A task from any dataset of questions and reference answers, configured rather than coded: a local
    file, a local folder in a hub layout or a hub id at a revision; a prompt template over each row's
    fields and an optional system prompt; a checker by name (exact, number, math). `configured` binds
    the checker the params name."""

    name = "dataset"
    Params = DatasetParams

    @classmethod
    def configured(cls, params: dict | DatasetParams) -> type[Task]:
        name = DatasetParams.model_validate(params).checker
        checker = CHECKERS[name]
        return type(
            f"Dataset[{name}]",
            (cls,),
            {"parse_answer": staticmethod(checker.parse_answer), "reward": classmethod(checker.reward.__func__)},
        )

    @classmethod
    def example(cls, params: DatasetParams, row: dict) -> dict:
        from rankone.io import InputError

        try:
            prompt = params.prompt.format(**row)
            answer = str(row[params.answer])
        except (KeyError, IndexError) as err:
            raise InputError(
                f"task dataset: a row has no field {err} (its fields: {', '.join(row)}); set params.prompt and "
                "params.answer"
            ) from None
        if params.system_prompt:
            prompt = f"{params.system_prompt}\n\n{prompt}"
        return {"prompt": prompt, "answer": answer}

    @classmethod
    def splits(cls, params: DatasetParams, seed: int) -> dict[str, list[dict]]:
        from rankone.io import InputError

        train = load_rows(params, params.train_split)
        if train is None:
            raise InputError(f"task dataset: {params.path} has no split {params.train_split!r}")
        test = load_rows(params, params.test_split) if params.test_split else None
        rows = {"train": [cls.example(params, r) for r in train]}
        if test is not None:
            rows["test"] = [cls.example(params, r) for r in test]
        for split, part in rows.items():
            random.Random(f"{cls.name}:{split}:{seed}").shuffle(part)
        if "test" not in rows:  # carved from train, after val
            rows["test"] = rows["train"][params.n_val : params.n_val + params.n_test]
            rows["train"] = rows["train"][: params.n_val] + rows["train"][params.n_val + params.n_test :]
        where = f"task dataset: {params.path}"
        return carve(where, rows["train"], rows["test"], params.n_val, params.n_test, params.n_train)
