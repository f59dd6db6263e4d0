"""The rollout engines, looked up by name, as tasks (rankone.tasks.TASKS) and models
(rankone.presets.PRESETS) are.

The registry holds names and where each engine's factory lives, not the engines: their modules
import torch (and vLLM), which the config checks and the DAG build never need. A new engine is
one module under rankone/rollouts with a `make` function and one line here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    factory: str  # "module:function", imported by rankone.rollouts.make_engine when a run asks for it
    about: str

    def load(self):
        """The factory function, imported now (its module imports torch, vLLM's only when called)."""
        from importlib import import_module

        module, function = self.factory.split(":")
        return getattr(import_module(module), function)


ENGINES = {
    "hf": Engine("rankone.rollouts.hf:make", "transformers, generate's sampling loop"),
    "vllm": Engine("rankone.rollouts.vllm:make", "vllm.LLM with live adapters"),
}

__all__ = ["ENGINES", "Engine"]
