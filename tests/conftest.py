"""Shared fixtures: a tiny study and the real SmolLM2 checkpoint, built through the real stage
functions (no Snakemake), and the smoke study run by real Snakemake."""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
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
    """The smoke config for studies run in this process. It runs torch's native CPU kernels (a process
    cannot switch them after its first op, and pinned to AVX2 bf16 is 9x slower), so these configs say
    `cpu_kernels: native`: a `rankone` job the test starts on one computes the same bytes as this process."""
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg.update({"cpu_kernels": "native", **copy.deepcopy(overrides)})
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


@pytest.fixture
def fresh_study(study, tmp_path):
    """The session's tiny study (data, base models) under a fresh results folder in tmp_path,
    its resolved config at tmp_path/study.yaml and results/<experiment>/study.yaml: runs
    written here leave the shared study untouched."""
    from rankone.cli import write_resolved

    cfg, at = study
    cfg = cfg.model_copy(update={"results_dir": str(tmp_path / "results"), "reports_dir": str(tmp_path / "reports")})
    root = tmp_path / "results" / cfg.experiment
    root.mkdir(parents=True)
    (root / "data").symlink_to(at.data_root.resolve())
    (root / "models").symlink_to(at.models.resolve())
    write_resolved(cfg, tmp_path / "study.yaml")
    write_resolved(cfg, root / "study.yaml")
    return tmp_path, cfg


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


def venv_env(**extra: str) -> dict:
    """This environment, with this interpreter's bin/ first on PATH (snakemake and rankone
    as jobs find them), plus `extra`."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}


def copy_workflow(workdir: Path) -> Path:
    """What a clone needs to run the workflow, copied into `workdir` (made if missing)."""
    workdir.mkdir(parents=True, exist_ok=True)
    for item in ("Snakefile", "workflow", "config", "src", "envs"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, workdir / item)
    return workdir


def snakemake(workdir: Path, *args: str, configs=("config/smoke.yaml",), cores: bool = True,
              env: dict | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Real Snakemake in `workdir` (two local cores unless `cores` is False, for a cluster profile)."""
    env = venv_env(**(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *(["--cores", "2"] if cores else []),
         *(["--configfile", *configs] if configs else []), *args],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
    )


LOCAL_SLURM = ROOT / "scripts" / "local-slurm"
SLURM_PROFILE = ("--profile", str(ROOT / "workflow" / "profiles" / "slurm"))
SLURM_STATE = Path(os.environ.get("RANKONE_SLURM_DIR", "/tmp/rankone-slurm"))


def local_slurm(command: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LOCAL_SLURM), command], capture_output=True, text=True, timeout=120)


SLURM_RUN: dict = {}  # the background SLURM smoke run (RANKONE_SLURM=1): cluster PIDs, process, folder
BACKGROUND: dict = {}  # name -> (process, workdir, log file) of studies started with the session


# What the SLURM profile runs: one RL cell of the smoke study and all it needs (data, a base model,
# its training, its evaluation), every job through sbatch. The whole smoke study runs locally.
SLURM_TARGET = "results/smoke/evaluate/rl/llama-tiny/lora-r1/metrics.jsonl"


def start_study(name: str, *args: str, configs=("config/smoke.yaml",)) -> None:
    """Run a study in a fresh copy of the workflow in the background; `finished_study` waits for it."""
    workdir = copy_workflow(Path(tempfile.mkdtemp(prefix=f"rankone-{name}-")))
    env = venv_env()
    log = (workdir / "snakemake.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "snakemake", *args, "--configfile", *configs],
                               cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=log)
    BACKGROUND[name] = (process, workdir, log)


def finished_study(name: str) -> Path:
    process, workdir, log = BACKGROUND[name]
    code = process.wait(timeout=1800)
    log.close()
    assert code == 0, (workdir / "snakemake.log").read_text()[-4000:]
    return workdir


def pytest_sessionstart(session):
    """With RANKONE_SLURM=1 (set by .ci/run): start a real single-node SLURM (scripts/local-slurm)
    and, at once, three studies in the background: one cell of the smoke study through the SLURM
    profile (SLURM_TARGET; its jobs spend much of their time waiting on SLURM), the whole smoke
    study on this machine's cores and the vLLM smoke study on one. The rest of the suite runs
    meanwhile; the `slurm_smoke`, `smoke` and `smoke_vllm` fixtures wait for them."""
    if os.environ.get("RANKONE_SLURM") != "1" or session.config.option.collectonly:
        return
    missing = [] if os.geteuid() == 0 else ["root"]
    missing += [tool for tool in ("slurmctld", "slurmd", "munged", "sbatch", "scontrol") if not shutil.which(tool)]
    if missing:
        raise pytest.UsageError(f"RANKONE_SLURM=1 but {', '.join(missing)} missing "
                                "(scripts/local-slurm install, as root)")
    if not importlib.util.find_spec("snakemake_executor_plugin_slurm"):
        raise pytest.UsageError("RANKONE_SLURM=1 but the SLURM executor plugin is not installed (make slurm-env)")
    started = local_slurm("start")
    if started.returncode != 0:
        raise pytest.UsageError(f"scripts/local-slurm start failed: {started.stderr}{started.stdout}")
    SLURM_RUN["pids"] = {name: int((where / f"{name}.pid").read_text()) for name, where in
                         (("slurmctld", SLURM_STATE), ("slurmd", SLURM_STATE), ("munged", Path("/run/munge")))}
    start_study("slurm", SLURM_TARGET, *SLURM_PROFILE)
    start_study("smoke", "--cores", "2")
    if importlib.util.find_spec("vllm"):
        start_study("smoke-vllm", "--cores", "1", configs=("config/smoke.yaml", "config/smoke-vllm.yaml"))


@pytest.fixture(scope="session", autouse=os.environ.get("RANKONE_SLURM") == "1")
def slurm_cluster():
    """With RANKONE_SLURM=1: the PIDs of the session's SLURM daemons, stopped by PID (and
    checked gone) at the session's end; else None."""
    if "pids" not in SLURM_RUN:
        yield None
        return
    yield SLURM_RUN["pids"]
    for process, _, _ in BACKGROUND.values():
        if process.poll() is None:
            process.kill()
    stopped = local_slurm("stop")
    assert stopped.returncode == 0, stopped.stderr
    for name, pid in SLURM_RUN["pids"].items():  # stopped by PID: none of the three is left running
        assert not Path(f"/proc/{pid}").exists(), f"{name} (pid {pid}) still runs after local-slurm stop"


@pytest.fixture(scope="session")
def smoke(tmp_path_factory, slurm_cluster):
    """The smoke study, run end to end by Snakemake on this machine's cores (with RANKONE_SLURM=1,
    started with the session; its log in snakemake.log)."""
    if "smoke" not in BACKGROUND:
        workdir = copy_workflow(tmp_path_factory.mktemp("workflow"))
        done = snakemake(workdir)
        (workdir / "snakemake.log").write_text(done.stderr)
        assert done.returncode == 0, done.stderr[-4000:]
        return workdir
    return finished_study("smoke")


@pytest.fixture(scope="session")
def slurm_smoke(slurm_cluster):
    """One cell of the smoke study (SLURM_TARGET) run through the SLURM profile, every job by sbatch
    (RANKONE_SLURM=1 only; its log in snakemake.log)."""
    if slurm_cluster is None:
        pytest.skip("no local SLURM: set RANKONE_SLURM=1 (root, after scripts/local-slurm install)")
    return finished_study("slurm")
