"""Shared fixtures: a tiny study built through the real stage functions (no Snakemake)."""

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
