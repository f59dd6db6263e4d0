"""Verifiable tasks, looked up by name: each module defines one task (data + reward).

A task makes deterministic train/val/test splits of {"prompt", "answer"} rows and
scores a completion against an answer. A new task needs no change here: `dataset` builds one
from any dataset and a checker named in the config (rankone.tasks.dataset), and an installed
package adds its own `Task` subclass through the entry point group `rankone.tasks`
(`[project.entry-points."rankone.tasks"] mytask = "mypackage.tasks:MyTask"`). Built in: one module
each and one line below.
"""

from __future__ import annotations

from rankone.tasks.arithmetic import Arithmetic
from rankone.tasks.base import Task
from rankone.tasks.dataset import Dataset
from rankone.tasks.facts import Facts
from rankone.tasks.hub import GSM8K, MATH
from rankone.tasks.reasoning_gym import ReasoningGym

BUILT_IN: tuple[type[Task], ...] = (Arithmetic, Facts, ReasoningGym, GSM8K, MATH, Dataset)
ENTRY_POINTS = "rankone.tasks"


def installed(group: str = ENTRY_POINTS) -> dict[str, type[Task]]:
    """The tasks installed packages add through the entry point group; a name a built-in task has,
    or an entry that is no Task, is an error naming the package."""
    from importlib.metadata import entry_points

    out: dict[str, type[Task]] = {}
    for entry in entry_points(group=group):
        task = entry.load()
        where = f"entry point {entry.name!r} ({entry.value}) of group {group!r}"
        if not (isinstance(task, type) and issubclass(task, Task)):
            raise ValueError(f"{where} is not a rankone.tasks.Task subclass")
        if task.name in {t.name for t in BUILT_IN} or task.name in out:
            raise ValueError(f"{where}: task name {task.name!r} is taken")
        out[task.name] = task
    return out


TASKS: dict[str, type[Task]] = {**{task.name: task for task in BUILT_IN}, **installed()}


def task_of(spec) -> type[Task]:
    """The task a config's task entry (rankone.config.TaskConfig: name, params, confidence) names, as its
    params configure it."""
    from rankone.tasks.confidence import with_confidence

    task = TASKS[spec.name].configured(spec.params)
    return with_confidence(task) if spec.confidence else task


def params_of(spec):
    """A config task entry's params, as its task's typed Params."""
    return TASKS[spec.name].Params.model_validate(spec.params)


def answers_of(spec) -> list[str] | None:
    """Every answer a config task entry's task can have (Task.answer_space), or None: not listable."""
    return task_of(spec).answer_space(params_of(spec))


def measures_storage(cfg, regime: str) -> bool:
    """Whether `regime`'s runs get their final train NLL measured (bits absorbed, bits stored):
    always for SFT, and for RL on a table of known bits (the facts task)."""
    return regime == "sft" or task_of(cfg.tasks[regime]).stores_table


__all__ = ["TASKS", "Task", "answers_of", "installed", "measures_storage", "params_of", "task_of"]
