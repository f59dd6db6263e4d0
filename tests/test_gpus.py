"""A local GPU box (rankone.gpus): jobs under `snakemake --resources gpu=N` each take their own
GPU ids from a pool, never one another's, and a killed job frees its ids. On a fake pool of
two ids: no GPU is needed to check who holds what."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from rankone import gpus
from rankone.io import InputError
from tests.conftest import ROOT, venv_env

SNAKEFILE = """
rule all:
    input: expand("out/{i}.jsonl", i=range(4))

rule hold:
    output: "out/{i}.jsonl"
    resources: gpu=1
    shell: "RANKONE_GPUS={resources.gpu} python -m rankone.gpus --hold 1.5 > {output}"
"""


def test_four_one_gpu_jobs_on_two_ids_never_share_one(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    env = venv_env(RANKONE_GPU_IDS="0,1", PYTHONPATH=str(ROOT / "src"))
    env.pop("SLURM_JOB_ID", None)
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "4", "--resources", "gpu=2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = []
    for i in range(4):
        claimed, ended = (json.loads(line) for line in (tmp_path / f"out/{i}.jsonl").read_text().splitlines())
        jobs.append((claimed["gpus"], claimed["claimed"], ended["end"]))
    assert all(len(ids) == 1 for ids, _, _ in jobs) and {ids[0] for ids, _, _ in jobs} == {"0", "1"}
    together = 0
    for a, (ids_a, start_a, end_a) in enumerate(jobs):
        for ids_b, start_b, end_b in jobs[a + 1 :]:
            if start_a < end_b and start_b < end_a:  # ran at the same time
                together += 1
                assert ids_a != ids_b, jobs
    assert together >= 1, jobs  # two ran at once (gpu=2), on the two ids


def test_a_killed_job_frees_its_ids(tmp_path, monkeypatch):
    env = venv_env(RANKONE_GPU_IDS="0,1", RANKONE_GPUS="2", PYTHONPATH=str(ROOT / "src"))
    env.pop("SLURM_JOB_ID", None)
    holder = subprocess.Popen(
        [sys.executable, "-m", "rankone.gpus", "--hold", "60"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert json.loads(holder.stdout.readline())["gpus"] == ["0", "1"]
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("RANKONE_GPU_IDS", "0,1")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # claim sets it: undone after the test
        with pytest.raises(InputError, match="no 1 free GPU"):
            gpus.claim(1, wait_s=1.0, poll_s=0.2)  # both held
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert gpus.claim(2, wait_s=2.0, poll_s=0.2) == ["0", "1"]  # freed by the kernel, with no clean-up
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    finally:
        holder.kill()
        for f in gpus._HELD:
            f.close()
        gpus._HELD.clear()


def test_a_job_asking_more_gpus_than_the_pool_has_is_told_so(monkeypatch):
    monkeypatch.setenv("RANKONE_GPU_IDS", "0")
    with pytest.raises(InputError, match="needs 2 GPU.*pool has 1"):
        gpus.claim(2)
