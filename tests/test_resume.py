"""A train job killed with SIGKILL resumes from its last checkpoint and ends byte-identical."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from rankone.config import RunId, load
from rankone.paths import Layout
from rankone.train import TRAINERS
from tests.conftest import smoke_dict


@pytest.mark.parametrize(
    "path, section",
    [("sft/qwen3-tiny/lora-r1/lr0.01/seed0", {"sft": {"steps": 300, "batch_size": 16, "checkpoint_every": 10}}),
     ("rl/llama-tiny/fullft/lr0.001/seed1",
      {"rl": {"steps": 80, "prompts_per_step": 4, "group_size": 4, "checkpoint_every": 5}})],
    ids=["sft-lora", "rl-fullft"],
)
def test_sigkill_then_rerun_matches_an_uninterrupted_run(study, tmp_path, path, section):
    base, at = study
    config = tmp_path / "resume.yaml"
    config.write_text(yaml.safe_dump(smoke_dict(results_dir=base.results_dir, experiment=base.experiment, **section)))
    cfg, run = load(config), RunId.parse(path)
    out = Layout(cfg).train(run)

    reference = tmp_path / "reference"
    TRAINERS[run.regime](cfg, run, at.model(run.model), at.data(run.regime), reference)

    cmd = [sys.executable, "-m", "rankone", "train", "--config", str(config), "--run", path]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the job ended before its first checkpoint; make it longer"
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "run.json").exists(), "a killed run must not look complete"
    assert (out / "checkpoint.pt").is_file()

    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resumed from step" in rerun.stderr
    assert (out / "metrics.jsonl").read_bytes() == (reference / "metrics.jsonl").read_bytes()
    for f in sorted((reference / "weights").glob("*.safetensors")):
        assert (out / "weights" / f.name).read_bytes() == f.read_bytes()
    assert not (out / "checkpoint.pt").exists()
