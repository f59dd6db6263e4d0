"""GSM8K and MATH from the Hugging Face hub, through `datasets.load_dataset` at a pinned revision.

For users with the internet (paper-scale studies); `path` may also name a local folder in
the hub repository's layout (its README's `configs:` and Parquet files), which is how the
tests load a small fixture in the real schema offline. Val is carved from the source's
train split (disjoint from the train rows used), test from its test split; both are
shuffled with the study's seed. Answers are checked with math-verify.
"""

from __future__ import annotations

import random
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from rankone.tasks.math_answers import MathAnswerTask


class HubParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="Hub dataset id, or a local folder in the same layout.")
    name: str | list[str] | None = Field(None, description="Dataset config name, or a list of them, concatenated.")
    revision: str = Field(description="Pinned commit of the hub dataset (ignored for a local folder).")
    n_train: int | None = Field(None, gt=0, description="Training rows (None: all that are left after val).")
    n_val: int = Field(256, gt=0, description="Validation rows, from the source's train split.")
    n_test: int = Field(512, gt=0, description="Test rows, from the source's test split.")


class GSM8KParams(HubParams):
    path: str = Field("openai/gsm8k", description="Hub dataset id, or a local folder in the same layout.")
    name: str | None = Field("main", description="Dataset config name.")
    revision: str = Field(
        "cc7b047b6e5bb11b4f1af84efc572db110a51b3c", description="Pinned commit of the hub dataset (ignored locally)."
    )


class MATHParams(HubParams):
    path: str = Field("EleutherAI/hendrycks_math", description="Hub dataset id, or a local folder in the same layout.")
    name: str | list[str] | None = Field(
        "algebra",
        description="Subject, or a list of subjects: algebra, counting_and_probability, geometry, "
        "intermediate_algebra, number_theory, prealgebra, precalculus.",
    )
    revision: str = Field(
        "21a5633873b6a120296cce3e2df9d5550074f4a3", description="Pinned commit of the hub dataset (ignored locally)."
    )


def load_split(params: HubParams, split: str) -> list[dict]:
    """One split of the source dataset (each named config's, in order); without the network
    (and not cached), a clear error."""
    import datasets

    from rankone.io import InputError

    local = Path(params.path).is_dir()
    rows: list[dict] = []
    for name in params.name if isinstance(params.name, list) else [params.name]:
        try:
            rows += datasets.load_dataset(params.path, name, split=split, revision=None if local else params.revision)
        except (ConnectionError, OSError, ValueError) as err:  # offline: ConnectionError / FileNotFoundError
            where = params.path if local else f"{params.path}@{params.revision}"
            raise InputError(
                f"cannot load {where} ({name}, {split}) with datasets.load_dataset (no network?): "
                f"{str(err).splitlines()[0]}"
            ) from None
    return rows


class HubTask(MathAnswerTask):
    """A hub dataset of (question, reference) rows; subclasses say how to read one example."""

    @classmethod
    def example(cls, row: dict) -> dict:
        raise NotImplementedError

    @classmethod
    def splits(cls, params: HubParams, seed: int) -> dict[str, list[dict]]:

        out = {}
        for source in ("train", "test"):
            rows = [cls.example(r) for r in load_split(params, source)]
            random.Random(f"{cls.name}:{source}:{seed}").shuffle(rows)
            out[source] = rows
        return carve(params.path, out["train"], out["test"], params.n_val, params.n_test, params.n_train)


def carve(source: str, train: list[dict], test: list[dict], n_val: int, n_test: int, n_train: int | None) -> dict:
    """The splits from shuffled rows: val the first `n_val` of `train`, train the next `n_train` (all
    when None), test the first `n_test` of `test`; a source too small for them is a one-line error."""
    from rankone.io import InputError

    if len(train) <= n_val or len(test) < n_test:
        raise InputError(
            f"{source} has {len(train)} train and {len(test)} test rows; n_val = {n_val} and n_test = {n_test} "
            "do not fit"
        )
    end = n_val + n_train if n_train else None
    return {"train": train[n_val:end], "val": train[:n_val], "test": test[:n_test], "warmup": []}


class GSM8K(HubTask):
    name = "gsm8k"
    Params = GSM8KParams

    @classmethod
    def example(cls, row: dict) -> dict:
        """The reference is what follows '####' in the worked answer, without thousands separators."""
        return {"prompt": row["question"], "answer": row["answer"].split("####")[-1].strip().replace(",", "")}


def last_boxed(text: str) -> str | None:
    r"""The content of the last \boxed{...} in `text` (braces balanced), else None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None


class MATH(HubTask):
    name = "math"
    Params = MATHParams

    @classmethod
    def example(cls, row: dict) -> dict:
        """The reference is the last boxed expression of the worked solution."""
        return {"prompt": row["problem"], "answer": last_boxed(row["solution"]) or ""}
