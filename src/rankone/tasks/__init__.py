"""Verifiable tasks, looked up by name: each module defines one task (data + reward).

A task makes deterministic train/val/test splits of {"prompt", "answer"} rows and
scores a completion against an answer. A new task is one module and one line here.
"""

from __future__ import annotations

from rankone.tasks.arithmetic import Arithmetic
from rankone.tasks.base import Task
from rankone.tasks.facts import Facts
from rankone.tasks.hub import GSM8K, MATH
from rankone.tasks.reasoning_gym import ReasoningGym

TASKS: dict[str, type[Task]] = {task.name: task for task in (Arithmetic, Facts, ReasoningGym, GSM8K, MATH)}


def task_of(spec) -> type[Task]:
    """The task a config's task entry (rankone.config.TaskConfig: name, confidence) names."""
    from rankone.tasks.confidence import with_confidence

    return with_confidence(TASKS[spec.name]) if spec.confidence else TASKS[spec.name]


def params_of(spec):
    """A config task entry's params, as its task's typed Params."""
    return task_of(spec).Params.model_validate(spec.params)


def measures_storage(cfg, regime: str) -> bool:
    """Whether `regime`'s runs get their final train NLL measured (bits absorbed, bits stored):
    always for SFT, and for RL on a table of known bits (the facts task)."""
    return regime == "sft" or task_of(cfg.tasks[regime]).stores_table


__all__ = ["TASKS", "Task", "measures_storage", "params_of", "task_of"]
