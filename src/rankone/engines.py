"""The rollout engines, looked up by name, as tasks (rankone.tasks.TASKS) and models
(rankone.presets.PRESETS) are.

The registry holds names and where each engine's factory lives (rankone.registry.Entry), not the
engines: their modules import torch (and vLLM), which the config checks and the DAG build never
need. A new engine is one module under rankone/rollouts with a `make` function and one line here.
"""

from __future__ import annotations

from rankone.registry import Entry

ENGINES = {
    "hf": Entry("rankone.rollouts.hf:make", "transformers, generate's sampling loop"),
    "vllm": Entry("rankone.rollouts.vllm:make", "vllm.LLM with live adapters"),
}

__all__ = ["ENGINES"]
