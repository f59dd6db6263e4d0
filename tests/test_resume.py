"""Interrupted train jobs: a SIGKILLed run resumes from its last checkpoint, and an unreadable
checkpoint is set aside instead of trapping the run; either way the run ends byte-identical
to an uninterrupted one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

from rankone.config import RunId, load, validate
from rankone.paths import Layout
from rankone.train import TRAINERS
from tests.conftest import run_here, shared_dir, smoke_dict

RL_RUN = (
    "rl/llama-tiny/fullft/lr0.001/seed1",
    {"rl": {"steps": 40, "prompts_per_step": 4, "group_size": 4, "checkpoint_every": 5}},
)
SFT_RUN = ("sft/qwen3-tiny/lora-r1/lr0.01/seed0", {"sft": {"steps": 300, "batch_size": 16, "checkpoint_every": 10}})


@pytest.fixture(scope="session")
def references(tmp_path_factory) -> Path:
    """Where the uninterrupted runs are kept, one per run id, shared by the session's workers."""
    folder = shared_dir(tmp_path_factory, "resume-references")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def killed_run(
    study, tmp_path: Path, references: Path, path: str, section: dict, wait_for: str, reference: bool = True
):
    """Train `path` uninterrupted (the reference, unless not `reference`), then start it as a job and
    SIGKILL it at a moment when `wait_for` is in its run folder. Returns (command, run folder,
    reference folder)."""
    base, at = study
    config = tmp_path / "resume.yaml"
    config.write_text(yaml.safe_dump(smoke_dict(results_dir=base.results_dir, experiment=base.experiment, **section)))
    cfg, run = load(config), RunId.parse(path)
    out = Layout(cfg).train(run)
    shutil.rmtree(out, ignore_errors=True)  # another test's run of the same id
    reference_dir = references / path.replace("/", "_")
    if reference:  # the same run for every test that kills it: trained once per session
        with FileLock(f"{reference_dir}.lock"):
            if not (reference_dir / "run.json").is_file():
                shutil.rmtree(reference_dir, ignore_errors=True)
                TRAINERS[run.regime](cfg, run, at.model(run.model), at.data(run.regime), reference_dir)

    cmd = [sys.executable, "-m", "rankone", "train", "--config", str(config), "--run", path]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    freeze_when(proc, lambda: (out / wait_for).is_dir())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "run.json").exists(), "a killed run must not look complete"
    assert (out / "checkpoint" / "state.json").is_file()
    return cmd, out, reference_dir


def freeze_when(proc: subprocess.Popen, ready, timeout: float = 120) -> None:
    """SIGSTOP the job at a moment when `ready()` holds. The job writes its next checkpoint
    a few steps later, so `ready()` is checked again while it is stopped: a kill after a
    fixed delay could land between two renames of that checkpoint."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "the job ended before the checkpoint was written; make it longer"
        if ready():
            os.kill(proc.pid, signal.SIGSTOP)
            while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
                time.sleep(0.001)
            if ready():
                return
            os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError(f"no checkpoint within {timeout} s")


def assert_same_as_reference(out: Path, reference: Path) -> None:
    assert (out / "metrics.jsonl").read_bytes() == (reference / "metrics.jsonl").read_bytes()
    names = sorted(f.name for f in (reference / "weights").glob("*.safetensors"))
    assert names
    for name in names:
        assert (out / "weights" / name).read_bytes() == (reference / "weights" / name).read_bytes()
    assert not (out / "checkpoint").exists() and not (out / "checkpoint.prev").exists()


@pytest.mark.parametrize("path, section", [SFT_RUN, RL_RUN], ids=["sft-lora", "rl-fullft"])
def test_sigkill_then_rerun_matches_an_uninterrupted_run(study, tmp_path, references, path, section, caplog):
    cmd, out, reference = killed_run(study, tmp_path, references, path, section, "checkpoint")
    code, logged = run_here(cmd, caplog)
    assert code == 0, logged[-2000:]
    assert "resumed from step" in logged
    assert_same_as_reference(out, reference)


def truncate(file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    "broken, file, expected",
    [
        (("checkpoint",), "weights.safetensors", "resumed from step"),  # the one before it is still good
        # the weights read fine, the optimizer state does not: nothing of it may be applied
        (("checkpoint", "checkpoint.prev"), "optimizer.safetensors", "starting from step 0"),
    ],
    ids=["newest", "both"],
)
def test_a_truncated_checkpoint_is_set_aside_and_the_run_completes(
    study, tmp_path, references, broken, file, expected, caplog
):
    cmd, out, reference = killed_run(study, tmp_path, references, *RL_RUN, "checkpoint.prev")
    for name in broken:  # as a full disk would leave them
        truncate(out / name / file)
    code, logged = run_here(cmd, caplog)
    assert code == 0, logged[-2000:]
    assert "checkpoint/ is unreadable" in logged and expected in logged
    if expected == "resumed from step":
        assert "(checkpoint.prev/)" in logged
    assert_same_as_reference(out, reference)
    assert len(list(out.glob("checkpoint.unreadable-*"))) == len(broken), "set aside, not deleted"


def test_a_checkpoint_of_another_config_is_ignored(study, tmp_path, references, caplog):
    """After a rollout, pretrain or architecture change (or another base model) a leftover
    checkpoint is not resumed."""
    cmd, out, _ = killed_run(
        study, tmp_path, references, *RL_RUN, "checkpoint", reference=False
    )  # nothing to compare with
    config = Path(cmd[cmd.index("--config") + 1])
    data = yaml.safe_load(config.read_text())
    data["rollout"]["temperature"] = 0.7
    config.write_text(yaml.safe_dump(data))
    code, logged = run_here(cmd, caplog)
    assert code == 0, logged[-2000:]
    assert "written for another config" in logged and "resumed from step" not in logged


class Crash(BaseException):
    """Stands for a kill: nothing after it runs."""


def test_a_crash_at_any_point_of_a_checkpoint_write_leaves_only_whole_checkpoints(study, tmp_path, monkeypatch):
    """Crash at the n-th rename or delete of a checkpoint folder, for every n over three
    checkpoints and the clean-up at the end (a delete crashes after its first file):
    `checkpoint/` and `checkpoint.prev/`, where present, are whole, and the rerun ends as the
    uninterrupted run did."""
    from safetensors.torch import load_file

    (base, at), run = study, RunId.parse(RL_RUN[0])
    cfg = validate(
        smoke_dict(
            results_dir=base.results_dir,
            experiment=base.experiment,
            rl={"steps": 16, "prompts_per_step": 4, "group_size": 4, "checkpoint_every": 5},
        )
    )
    train = lambda out: TRAINERS[run.regime](cfg, run, at.model(run.model), at.data(run.regime), out)  # noqa: E731
    train(reference := tmp_path / "reference")
    replace, rmtree = os.replace, shutil.rmtree
    for n in range(1, 12):  # checkpoints 1, 2, 3: 1 + 2 + 4 operations; clean-up: 2 + 2
        out, calls = tmp_path / f"crash{n}", []

        def counted(real, first_file_only=False):
            def op(src, *args, **kwargs):
                if "checkpoint" in Path(src).name and Path(src).exists() and out in Path(src).parents:
                    calls.append(src)
                    if len(calls) == n:
                        if first_file_only:
                            next(p for p in sorted(Path(src).rglob("*")) if p.is_file()).unlink()
                        raise Crash(f"operation {n}")
                return real(src, *args, **kwargs)

            return op

        monkeypatch.setattr(os, "replace", counted(replace))
        monkeypatch.setattr(shutil, "rmtree", counted(rmtree, first_file_only=True))
        with pytest.raises(Crash):
            train(out)
        monkeypatch.undo()
        for name in ("checkpoint", "checkpoint.prev"):
            if (out / name).exists():
                assert sorted(f.name for f in (out / name).iterdir()) == [
                    "optimizer.safetensors",
                    "state.json",
                    "weights.safetensors",
                ], f"crash {n}: {name}/"
                load_file(out / name / "weights.safetensors"), load_file(out / name / "optimizer.safetensors")
        assert n == 1 or any(out.glob("checkpoint*")) or (out / "run.json").exists(), f"crash {n} lost all"
        train(out)
        assert_same_as_reference(out, reference)
        assert not list(out.glob("checkpoint.unreadable-*")), f"crash {n}: a whole checkpoint was set aside"


def test_a_cell_job_killed_in_its_last_seed_gives_back_the_seed_it_finished(study, tmp_path, caplog):
    """A cell's job trains its seeds in turn, and Snakemake deletes the job's outputs before it runs it
    again: the seed that finished before the kill comes back from `checkpoint.done/` byte for byte,
    untrained; the killed seed resumes; nothing of checkpoint.done/ is left when the job ends."""
    from rankone.train.folder import DONE, FINISHED, restore_finished

    base, at = study
    cell = "rl/llama-tiny/fullft/lr0.001"
    section = {"rl": {"steps": 10, "prompts_per_step": 4, "group_size": 4, "checkpoint_every": 5, "log_every": 1}}
    config = tmp_path / "cell.yaml"
    config.write_text(yaml.safe_dump(smoke_dict(results_dir=base.results_dir, experiment=base.experiment, **section)))
    cfg = load(config)
    first, last = (Layout(cfg).train(RunId.parse(f"{cell}/seed{seed}")) for seed in (0, 1))
    for out in (first, last):
        shutil.rmtree(out, ignore_errors=True)  # another test's runs of the same ids

    cmd = [sys.executable, "-m", "rankone", "train", "--config", str(config), "--run", cell]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    freeze_when(proc, lambda: (last / "checkpoint").is_dir())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (first / "run.json").is_file() and (first / DONE / "run.json").is_file()
    assert not (last / "run.json").exists()
    finished = {
        f.relative_to(first): f.read_bytes()
        for name in FINISHED
        for f in [first / name, *(first / name).rglob("*")]
        if f.is_file()
    }
    assert any(f.suffix == ".safetensors" for f in finished)

    run = RunId.parse(f"{cell}/seed0")
    other = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"temperature": 0.7})})
    assert not restore_finished(other, run, at.model(run.model), first), "a run of another config was given back"
    for path in (out / name for out in (first, last) for name in FINISHED):  # as Snakemake's
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)  # Job.remove_existing_output

    code, logged = run_here(cmd, caplog)
    assert code == 0, logged[-2000:]
    assert f"{cell}/seed0: finished by an earlier job of its cell" in logged
    assert f"{cell}/seed0 step" not in logged, "the finished seed was trained again"
    assert f"{cell}/seed1: resumed from step" in logged and f"{cell}/seed1 step" in logged
    assert {f: (first / f).read_bytes() for f in finished} == finished
    assert (last / "run.json").is_file()
    assert not list(first.glob("*checkpoint*")) and not list(last.glob("*checkpoint*"))
