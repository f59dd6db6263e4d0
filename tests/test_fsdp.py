"""FullFT sharded with FSDP over two processes under torchrun (gloo, on the CPU): the same run as
one process gives, to rounding, and a killed FSDP run resumes to the bytes of an uninterrupted one.

Why a tolerance and not bytes: each process takes half the rows of a step, so the learner's
forward multiplies half as many rows (a matmul's last bits can depend on it) and the gradients are
summed across processes in another order. The samples themselves are drawn by process 0's engine
(an unsharded replica loaded with the gathered weights) with the same seed, so rewards and tokens
agree exactly over these short runs; every float agrees to 1e-4 relative, but the sampler-learner
gaps (logprob_gap_*): a difference of two equal computations, the replica's and the sharded
learner's, each float noise, so they agree to 1e-5 absolute (the fp32 freshness threshold is 1e-3)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from rankone.config import RunId, load
from rankone.io import read_json, read_jsonl
from rankone.paths import Layout
from rankone.train import TRAINERS
from tests.conftest import run_here, smoke_dict

pytestmark = pytest.mark.slow
RL_RUN = (
    "rl/llama-tiny/fullft/lr0.001/seed1",
    {"rl": {"steps": 8, "prompts_per_step": 4, "group_size": 4, "checkpoint_every": 2, "micro_batch": 4}},
)
SFT_RUN = ("sft/llama-tiny/fullft/lr0.001/seed0", {"sft": {"steps": 10, "batch_size": 8, "checkpoint_every": 5}})


def setup(study, tmp_path: Path, path: str, section: dict):
    """The study config with `section`, the run's folder (emptied) and a one-process reference run of it."""
    base, at = study
    config = tmp_path / "fsdp.yaml"
    config.write_text(yaml.safe_dump(smoke_dict(results_dir=base.results_dir, experiment=base.experiment, **section)))
    cfg, run = load(config), RunId.parse(path)
    out = Layout(cfg).train(run)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    reference = tmp_path / "one-process"
    TRAINERS[run.regime](cfg, run, at.model(run.model), at.data(run.regime), reference)
    cmd = [sys.executable, "-m", "rankone", "train", "--config", str(config), "--run", path, "--processes", "2"]
    return cmd, out, reference


def assert_close_to(out: Path, reference: Path, lr: float = 1e-3) -> None:
    """Same steps, same integers and strings, floats within 1e-4 relative (1e-6 absolute; 1e-5 for the gaps)."""
    got, want = read_jsonl(out / "metrics.jsonl"), read_jsonl(reference / "metrics.jsonl")
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(b[key], float):
                noise = 1e-5 if key.startswith("logprob_gap") else 1e-6
                assert math.isclose(a[key], b[key], rel_tol=1e-4, abs_tol=noise), (a["step"], key, a[key], b[key])
            else:
                assert a[key] == b[key], (a["step"], key)
    mine = load_file(out / "weights" / "model.safetensors")
    theirs = load_file(reference / "weights" / "model.safetensors")
    assert mine.keys() == theirs.keys()
    # Adam divides by sqrt(v): an element whose gradient is rounding noise in both runs can step by up
    # to about lr either way (seen: 3.5e-5 on one gate_proj element at lr 1e-3, CI). So 99.9% of each
    # tensor's elements agree to 1e-4 relative, and none differs by more than two Adam steps (2 lr).
    for name in theirs:
        diff, tol = (mine[name] - theirs[name]).abs(), 1e-4 * theirs[name].abs().max() + 1e-6
        assert (diff <= tol).float().mean() >= 0.999, (name, (diff > tol).sum().item())
        assert diff.max() <= 2 * lr, (name, diff.max().item())


def test_sft_over_two_processes_matches_one(study, tmp_path):
    """As the train rule starts a job whose `gpu` resource is 2 (RANKONE_GPUS=2) on a box whose pool
    has two ids: the job claims both, and its two processes claim none of their own."""
    cmd, out, reference = setup(study, tmp_path, *SFT_RUN)
    env = {**os.environ, "RANKONE_GPUS": "2", "RANKONE_GPU_IDS": "0,1"}
    done = subprocess.run(cmd[: cmd.index("--processes")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "GPU(s) 0,1" in done.stderr and "FSDP over 2 processes" in done.stderr
    assert_close_to(out, reference)
    assert read_json(out / "run.json")["processes"] == 2


def stop_job(proc: subprocess.Popen, ready, timeout: float = 300) -> None:
    """SIGSTOP the job and every process under it (torchrun gives each worker a session of its own)
    at a moment when `ready()` holds, checked again once all are stopped (tests/test_resume.py's
    freeze_when, for a tree of processes)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "the job ended before the checkpoint was written; make it longer"
        if ready():
            tree = [proc.pid, *descendants(proc.pid)]
            for pid in tree:
                os.kill(pid, signal.SIGSTOP)
            while any(stat(pid)[0] not in "TZ" for pid in tree):
                time.sleep(0.001)
            if ready():
                return
            for pid in tree:
                os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError(f"no checkpoint within {timeout} s")


def stat(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name: state, parent pid, ...; ["X"] once gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return ["X"]


def descendants(pid: int) -> list[int]:
    children = {}
    for entry in Path("/proc").glob("[0-9]*"):
        fields = stat(int(entry.name))
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_group_of_another_size_than_the_job_is_refused(study, tmp_path):
    """torchrun started by hand with 2 processes for a job of 3 devices: each process refuses before
    it loads anything."""
    config = tmp_path / "fsdp.yaml"
    base, _ = study
    config.write_text(yaml.safe_dump(smoke_dict(results_dir=base.results_dir, experiment=base.experiment)))
    # After "--" torchrun's own parser leaves --run alone (it would take it for its --run-path).
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "rankone",
            "--",
            "train",
            "--config",
            str(config),
            "--run",
            RL_RUN[0],
            "--processes",
            "3",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode != 0
    assert "torchrun started 2 processes, but this job has 3 device(s)" in done.stderr, done.stderr[-3000:]


def test_rl_over_two_processes_matches_one_and_a_killed_run_resumes_to_the_same_bytes(study, tmp_path, caplog):
    cmd, out, reference = setup(study, tmp_path, *RL_RUN)
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_close_to(out, reference)
    uninterrupted = tmp_path / "fsdp"
    out.rename(uninterrupted)

    # Killed as Snakemake cancels a job (its process group) after a checkpoint: the workers, each in a
    # session of its own, must die with it, not train on and write.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    stop_job(proc, lambda: (out / "checkpoint.prev").is_dir())
    workers = descendants(proc.pid)
    assert len(workers) >= 2
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 30
    while any(stat(pid)[0] not in "XZ" for pid in workers) and time.time() < deadline:
        time.sleep(0.05)
    assert all(stat(pid)[0] in "XZ" for pid in workers), "a worker outlived its killed job"
    assert not (out / "run.json").exists(), "a killed run must not look complete"

    # Resumed by one process (this one): refused, naming both sizes, and the checkpoints left as they were.
    before = tree_bytes(out)
    code, logged = run_here(cmd[: cmd.index("--processes")], caplog)
    assert code == 2, logged[-3000:]
    assert "was written by 2 process(es), but this run has 1" in logged, logged[-3000:]
    assert tree_bytes(out) == before

    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resumed from step" in rerun.stderr, rerun.stderr[-3000:]
    assert (out / "metrics.jsonl").read_bytes() == (uninterrupted / "metrics.jsonl").read_bytes()
    for name in ("model.safetensors", "config.json"):
        assert (out / "weights" / name).read_bytes() == (uninterrupted / "weights" / name).read_bytes()
    assert not (out / "checkpoint").exists() and not (out / "checkpoint.prev").exists()


def test_vllm_rollouts_over_two_processes_match_one(study, tmp_path):
    """rollout.engine vllm under FSDP: each process's engine (vLLM's external launcher) samples its
    half of the prompts, with the seeds one engine gives them, so rewards and tokens are one
    process's; and closing the engines (which ends the process group) comes after the weights."""
    pytest.importorskip("vllm")
    section = {
        "rl": {**RL_RUN[1]["rl"], "steps": 3, "checkpoint_every": 10, "reward": "random"},
        "rollout": {"engine": "vllm"},
        "methods": ["fullft", "lora-r1"],
    }  # vLLM serves no TinyLoRA
    cmd, out, reference = setup(study, tmp_path, RL_RUN[0], section)
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert read_json(out / "run.json")["engine"] == "vllm"
    assert_close_to(out, reference)
