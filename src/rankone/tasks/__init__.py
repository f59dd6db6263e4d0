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

__all__ = ["TASKS", "Task"]
