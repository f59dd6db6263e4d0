"""Shared fixtures: a tiny study and the real SmolLM2 checkpoint, built through the real stage
functions (no Snakemake)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from rankone import data
from rankone.config import validate
from rankone.models.build import build
from rankone.paths import Layout

ROOT = Path(__file__).resolve().parents[1]
RGYM = {"name": "reasoning-gym", "params": {
    "dataset": "basic_arithmetic", "n_train": 16, "n_val": 4, "n_test": 4,
    "config": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1, "operators": ["+"]}}}


def smoke_dict(**overrides) -> dict:
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg.update(copy.deepcopy(overrides))
    return cfg


@pytest.fixture(scope="session")
def study(tmp_path_factory):
    """The smoke config rooted in a temp folder, with data and both base models built."""
    root = tmp_path_factory.mktemp("study")
    cfg = validate(smoke_dict(results_dir=str(root / "results"), reports_dir=str(root / "reports")))
    at = Layout(cfg)
    for regime in cfg.regimes:
        data.build(cfg, regime, at.data(regime))
    for model in cfg.models:
        build(cfg, model, at.data_root, at.model(model))
    return cfg, at


def real_config(tmp_path, **overrides) -> dict:
    """The smoke study on SmolLM2 and reasoning-gym, RL only, at a few steps."""
    return smoke_dict(**{
        "results_dir": str(tmp_path / "results"), "models": ["smollm2-135m"], "regimes": ["rl"],
        "tasks": {"rl": RGYM}, "methods": ["fullft", "lora-r1"], "capacity": None, "truncation": None,
        "levers": None, "rollout": {"engine": "hf", "n_prompts": 4, "samples_per_prompt": 2, "max_new_tokens": 8},
        "rl": {"steps": 2, "prompts_per_step": 2, "group_size": 2, "log_every": 1}, **overrides})


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """The smollm2-135m preset converted by the models stage, beside reasoning-gym data."""
    root = tmp_path_factory.mktemp("real")
    cfg = validate(real_config(root))
    at = Layout(cfg)
    data.build(cfg, "rl", at.data("rl"))
    info = build(cfg, "smollm2-135m", at.data_root, at.model("smollm2-135m"))
    return cfg, at, info
