"""The SLURM profile (workflow/profiles/slurm) against a real single-node SLURM.

With RANKONE_SLURM=1 (set by .ci/run, which installs Debian's packages), the session starts
munged, slurmctld and slurmd with scripts/local-slurm, and one RL cell of the smoke study
(tests/conftest.py's SLURM_TARGET: its data, base model, training and evaluation) runs with
`--profile workflow/profiles/slurm`: every job through sbatch, while the whole smoke study runs
on this machine. Here: every job went through SLURM and gave the bytes the same job gave
locally, a failing job fails the run and its log is named, a controller that does not answer
stops the run clearly within a minute. The daemons are stopped by PID at the session's end
(tests/conftest.py). Without RANKONE_SLURM=1 the module is skipped.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from rankone.io import read_jsonl
from tests.conftest import SLURM_PROFILE, SLURM_TARGET, copy_workflow, finished, snakemake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(slurm_cluster):
    if slurm_cluster is None:
        pytest.skip("no local SLURM: set RANKONE_SLURM=1 (root, after scripts/local-slurm install)")
    return slurm_cluster


def test_every_job_went_through_sbatch_and_gave_the_local_runs_bytes(cluster, slurm_smoke, smoke):
    log = (slurm_smoke / "snakemake.log").read_text()
    assert "Using profile" in log and "workflow/profiles/slurm" in log
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)", log)
    finished = int(re.search(r"(\d+) of \d+ steps \(100%\) done", log)[1])
    assert len(submitted) == finished == 5  # data (rl, sft), the base model, the cell's training, its evaluation
    assert len({jobid for jobid, _ in submitted}) == len(submitted)
    for _, path in submitted:  # SLURM wrote each job's own log, and the job ran Snakemake's job step
        text = Path(path).read_text()
        assert "--executor slurm-jobstep" in text and "Finished jobid" in text, path
    cell = Path(SLURM_TARGET).parent  # .../evaluate/rl/llama-tiny/lora-r1
    runs = sorted((slurm_smoke / str(cell).replace("/evaluate/", "/train/")).glob("lr*/seed*/metrics.jsonl"))
    assert len(runs) == 2
    for run in runs:  # each seed trained through SLURM as on this machine's cores, byte for byte
        assert run.read_bytes() == (smoke / run.relative_to(slurm_smoke)).read_bytes(), run
    scores = [
        [{k: v for k, v in e.items() if k != "provenance"} for e in read_jsonl(root / SLURM_TARGET)]
        for root in (slurm_smoke, smoke)
    ]  # provenance: the host and times of each job
    assert scores[0] == scores[1]


def test_a_failing_job_fails_the_run_and_names_its_log(cluster):
    code, workdir = finished("slurm-broken")  # BROKEN_RULE, sent through SLURM with the session
    stderr = (workdir / "snakemake.log").read_text()
    assert code != 0
    assert re.search(r"SLURM-job '\d+' failed", stderr), stderr[-3000:]
    slurm_logs = re.findall(r"\S+/slurm_logs/rule_broken/\S+\.log", stderr)
    assert slurm_logs and (workdir / slurm_logs[0]).is_file(), stderr[-3000:]
    assert "log: broken.log" in stderr and "deliberate failure" in (workdir / "broken.log").read_text()
    assert not (workdir / "never.txt").exists()


def test_an_unreachable_controller_fails_clearly_within_a_minute(cluster, tmp_path):
    closed = tmp_path / "slurm.conf"  # this cluster's config, but a port nothing listens on
    closed.write_text(Path("/etc/slurm/slurm.conf").read_text() + "SlurmctldPort=6999\n")
    workdir = copy_workflow(tmp_path / "study")
    started = time.monotonic()
    # A hang is what this guards against: the subprocess is killed (and the test fails) after 60 s.
    out = snakemake(workdir, *SLURM_PROFILE, cores=False, env={"SLURM_CONF": str(closed)}, timeout=60)
    print(f"failed after {time.monotonic() - started:.1f} s")
    assert out.returncode != 0
    assert "cannot reach the SLURM controller" in out.stderr, out.stderr[-3000:]
    assert f"SLURM_CONF={closed}" in out.stderr and "Traceback" not in out.stderr
    assert "submitted with SLURM" not in out.stderr
