"""Live tracking (`tracking: trackio`): a training job sends each recorded step to trackio's local
store, one trackio run per run, and changes nothing a result reads."""

from __future__ import annotations

import json
import subprocess
import sys

from rankone.config import RunId
from rankone.paths import Layout
from rankone.train import TRAINERS

from .conftest import venv_env

RUN = "rl/qwen3-tiny/lora-r1/lr0.01/seed0"
READ = """
import json, sys
from trackio.sqlite_storage import SQLiteStorage
project, run = sys.argv[1:]
print(json.dumps({"runs": SQLiteStorage.get_runs(project), "logs": SQLiteStorage.get_logs(project, run)}))
"""


def test_trackio_gets_every_step_of_a_run_whose_outputs_do_not_change(study, fresh_study):
    from rankone.cli import write_resolved

    tmp_path, cfg = fresh_study
    _, at = study
    cfg, run = cfg.model_copy(update={"tracking": "trackio"}), RunId.parse(RUN)
    config = tmp_path / "tracked.yaml"
    write_resolved(cfg, config)
    out = Layout(cfg).train(run)
    store = tmp_path / "trackio"
    job = subprocess.run(
        [sys.executable, "-m", "rankone", "train", "--config", str(config), "--run", RUN],
        capture_output=True,
        text=True,
        env=venv_env(TRACKIO_DIR=str(store), HF_HUB_OFFLINE="1"),
    )
    assert job.returncode == 0, job.stderr[-3000:]
    assert (store / f"{cfg.experiment}.db").is_file()

    untracked = tmp_path / "untracked"  # the same run in this process, tracking off
    TRAINERS["rl"](cfg.model_copy(update={"tracking": "none"}), run, at.model(run.model), at.data("rl"), untracked)
    assert (out / "metrics.jsonl").read_bytes() == (untracked / "metrics.jsonl").read_bytes()

    read = subprocess.run(
        [sys.executable, "-c", READ, cfg.experiment, RUN],
        capture_output=True,
        text=True,
        env=venv_env(TRACKIO_DIR=str(store)),
        check=True,
    )
    tracked = json.loads(read.stdout)
    assert tracked["runs"] == [RUN]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [log["step"] for log in tracked["logs"]] == [row["step"] for row in rows] == list(range(cfg.rl.steps))
    for log, row in zip(tracked["logs"], rows):
        assert {k: log[k] for k in ("reward", "loss", "episodes", "info_bound_bits")} == {
            k: row[k] for k in ("reward", "loss", "episodes", "info_bound_bits")
        }
        assert log["seconds"] > 0


def test_tracking_is_not_part_of_any_digest(study):
    from rankone.stages import STAGES, config_digest

    cfg, _ = study
    tracked = cfg.model_copy(update={"tracking": "trackio"})
    assert tracked.digest() == cfg.digest()  # the study's config digest on its published page
    for stage in STAGES:
        assert config_digest(tracked, stage, "rl", lineage=True) == config_digest(cfg, stage, "rl", lineage=True)
