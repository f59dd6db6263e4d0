"""The CPU image (`make image`): its packages are the lock's, and stages run inside it give the
bytes they give on the host.

Opt-in: the image is a local build (scripts/build-image: debootstrap and the lock's wheels, as
root), which CI does not make. Without it these tests skip; with RANKONE_IMAGE=1 a missing image
or a missing `ch-run` fails them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rankone.config import validate
from rankone.pins import parse_pins
from tests.conftest import ROOT, copy_workflow, venv_env
from tests.test_envs import LOCK

IMAGE = Path(os.environ.get("RANKONE_IMAGE_DIR", ROOT / "build" / "image" / "rankone-cpu"))
PYTHON = "/opt/rankone/bin/python"


@pytest.fixture(scope="module")
def image() -> Path:
    missing = [
        what
        for what, ok in (
            ("the image (make image)", (IMAGE / PYTHON.lstrip("/")).exists()),
            ("ch-run (apt-get install charliecloud)", shutil.which("ch-run")),
        )
        if not ok
    ]
    if missing:
        if os.environ.get("RANKONE_IMAGE") == "1":
            pytest.fail(f"RANKONE_IMAGE=1 but {' and '.join(missing)} is missing")
        pytest.skip(f"no {' and no '.join(missing)} here")
    return IMAGE


def in_image(image: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m rankone ARGS` inside the image, the work folder bound at /work (its results too)."""
    env = {**os.environ, "USER": os.environ.get("USER", "root")}
    return subprocess.run(
        [
            "ch-run",
            "-b",
            f"{workdir}:/work",
            "-c",
            "/work",
            str(image),
            "--",
            "env",
            "PYTHONPATH=src",
            PYTHON,
            "-m",
            "rankone",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
    )


def on_host(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rankone", *args],
        cwd=workdir,
        env=venv_env(PYTHONPATH="src"),
        capture_output=True,
        text=True,
    )


def test_the_images_packages_are_the_lock(image):
    assert parse_pins((image / "opt/rankone/pip-freeze.txt").read_text().splitlines()) == LOCK
    debian = dict(line.split("=", 1) for line in (image / "opt/rankone/debian-packages.txt").read_text().split())
    assert debian["python3.11"].startswith("3.11.") and "gcc-12" in debian


def test_data_models_and_a_train_cell_in_the_image_give_the_hosts_bytes(image, tmp_path):
    """The smoke study's data, one base model and one RL cell (every seed), once on the host and once
    in the image, each in its own copy of the workflow: every Parquet split, weight file and metrics
    line the same bytes. Provenance files differ by design (host, times, paths) and are left out."""
    runs = {}
    for where, run in (("host", on_host), ("image", lambda w, *a: in_image(image, w, *a))):
        workdir = copy_workflow(tmp_path / where)
        cfg = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())
        (workdir / "config" / "here.yaml").write_text(yaml.safe_dump({**cfg, "regimes": ["rl"]}))
        study = validate({**cfg, "regimes": ["rl"]})
        cell = next(r for r in study.runs() if r.model == "llama-tiny" and r.method == "lora-r1")
        cell_path = "/".join(cell.path.split("/")[:-1])  # the cell: every seed of it
        for args in (
            ("data", "--regime", "rl"),
            ("data", "--regime", "sft"),
            ("models", "--model", "llama-tiny"),
            ("train", "--run", cell_path),
        ):
            out = run(workdir, args[0], "--config", "config/here.yaml", *args[1:])
            assert out.returncode == 0, (where, args, out.stderr[-3000:])
        runs[where] = workdir / "results" / cfg["experiment"]
    compared = 0
    for path in sorted(runs["host"].rglob("*")):
        if path.suffix in (".parquet", ".safetensors") or path.name == "metrics.jsonl":
            twin = runs["image"] / path.relative_to(runs["host"])
            assert twin.is_file(), f"{path.relative_to(runs['host'])} missing in the image's run"
            assert path.read_bytes() == twin.read_bytes(), f"{path.relative_to(runs['host'])} differs"
            compared += 1
    assert compared >= 8, compared  # splits, model weights, each seed's metrics and weights
