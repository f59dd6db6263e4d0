"""Base models: building, loading and running them (the registry of presets is rankone.presets)."""

from rankone.models.tokenizer import build_tokenizer
from rankone.presets import PRESETS, SCALING_SHAPES, GgufPreset, HubPreset, LocalPreset, Shape, TinyPreset, preset

__all__ = [
    "PRESETS",
    "SCALING_SHAPES",
    "Shape",
    "TinyPreset",
    "HubPreset",
    "GgufPreset",
    "LocalPreset",
    "preset",
    "build_tokenizer",
]
