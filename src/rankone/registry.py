"""An entry of a registry looked up by name (rollout engines, RL baselines and losses): its help
and where its code lives, imported only when a run asks for it, so that the registries, and the
config checks and DAG build that read them, import no torch or vLLM."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    code: str  # "module:name"
    about: str  # one line of help: the config reference and the unknown-name error print it

    def load(self):
        """The entry's code, imported now."""
        from importlib import import_module

        module, name = self.code.split(":")
        return getattr(import_module(module), name)
