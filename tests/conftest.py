"""Shared fixtures: a tiny study and the real SmolLM2 checkpoint, built through the real stage
functions (no Snakemake), and the smoke study run by real Snakemake."""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# One OpenMP (torch) thread in each test process and what it starts, set before anything imports
# torch: two pytest-xdist workers and the background studies already share two cores, where a
# second thread per process only spin-waits on a busy core. Jobs and trainers set their own count
# (the config's `threads`), so no number a test checks depends on this.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import yaml

from rankone import data
from rankone.config import validate
from rankone.models.build import build
from rankone.paths import Layout

ROOT = Path(__file__).resolve().parents[1]
RGYM = {
    "name": "reasoning-gym",
    "params": {
        "dataset": "basic_arithmetic",
        "n_train": 16,
        "n_val": 4,
        "n_test": 4,
        "config": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1, "operators": ["+"]},
    },
}


# The two model families: the studies run in this process take both, the Snakemake smoke study one.
FAMILIES = ("llama-tiny", "qwen3-tiny")


def smoke_dict(**overrides) -> dict:
    """The smoke config for studies run in this process. It runs torch's native CPU kernels (a process
    cannot switch them after its first op, and pinned to AVX2 bf16 is 9x slower), so these configs say
    `cpu_kernels: native`: a `rankone` job the test starts on one computes the same bytes as this process.
    Both model families (FAMILIES), where the Snakemake smoke study runs one."""
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg.update({"cpu_kernels": "native", "models": list(FAMILIES), **copy.deepcopy(overrides)})
    return cfg


@pytest.fixture(scope="session")
def study(tmp_path_factory):
    """The smoke config rooted in a temp folder of this worker, with data and both base models: built
    once per session by the first worker that asks (the others wait on the lock, then read them) and
    linked into each worker's results folder, so the runs a test writes stay in its own worker's."""
    from filelock import FileLock

    inputs = shared_dir(tmp_path_factory, "study-inputs")
    inputs_cfg = validate(smoke_dict(results_dir=str(inputs / "results")))
    built = Layout(inputs_cfg)
    with FileLock(f"{inputs}.lock"):
        if not (inputs / "complete").is_file():  # a worker that died mid-build left no mark
            shutil.rmtree(inputs, ignore_errors=True)
            for regime in inputs_cfg.regimes:
                data.build(inputs_cfg, regime, built.data(regime))
            for model in inputs_cfg.models:
                build(inputs_cfg, model, built.data_root, built.model(model))
            (inputs / "complete").touch()
    root = tmp_path_factory.mktemp("study")
    cfg = validate(smoke_dict(results_dir=str(root / "results"), reports_dir=str(root / "reports")))
    return cfg, linked(cfg, built)


def linked(cfg, inputs: Layout) -> Layout:
    """`cfg`'s layout, a new results folder whose data and base models are links to `inputs`'."""
    at = Layout(cfg)
    at.root.mkdir(parents=True)
    at.data_root.symlink_to(inputs.data_root.resolve())
    at.models.symlink_to(inputs.models.resolve())
    return at


@pytest.fixture
def fresh_study(study, tmp_path):
    """The session's tiny study (data, base models) under a fresh results folder in tmp_path,
    its resolved config at tmp_path/study.yaml and results/<experiment>/study.yaml: runs
    written here leave the shared study untouched."""
    from rankone.cli import write_resolved

    cfg, at = study
    cfg = cfg.model_copy(update={"results_dir": str(tmp_path / "results"), "reports_dir": str(tmp_path / "reports")})
    root = linked(cfg, at).root
    write_resolved(cfg, tmp_path / "study.yaml")
    write_resolved(cfg, root / "study.yaml")
    return tmp_path, cfg


def real_config(tmp_path, **overrides) -> dict:
    """The smoke study on SmolLM2 and reasoning-gym, RL only, at a few steps."""
    return smoke_dict(
        **{
            "results_dir": str(tmp_path / "results"),
            "models": ["smollm2-135m"],
            "regimes": ["rl"],
            "tasks": {"rl": RGYM},
            "methods": ["fullft", "lora-r1"],
            "capacity": None,
            "truncation": None,
            "levers": None,
            "rollout": {"engine": "hf", "n_prompts": 4, "samples_per_prompt": 2, "max_new_tokens": 8},
            "rl": {"steps": 2, "prompts_per_step": 2, "group_size": 2, "log_every": 1},
            **overrides,
        }
    )


def shared_dir(tmp_path_factory, name: str) -> Path:
    """A folder that every pytest-xdist worker of this session shares (without xdist, the session's own)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """The smollm2-135m preset converted by the models stage, beside reasoning-gym data: converted
    once per session, by the first worker that asks (the others wait on the lock, then read it)."""
    from filelock import FileLock

    root = shared_dir(tmp_path_factory, "real")
    with FileLock(f"{root}.lock"):
        cfg = validate(real_config(root))
        at = Layout(cfg)
        if not (at.model("smollm2-135m") / "rankone.json").is_file():
            data.build(cfg, "rl", at.data("rl"))
            build(cfg, "smollm2-135m", at.data_root, at.model("smollm2-135m"))
    return cfg, at, json.loads((at.model("smollm2-135m") / "rankone.json").read_text())


def run_here(cmd: list[str], caplog) -> tuple[int, str]:
    """A `python -m rankone ...` command run in this test's process, not one of its own: its exit
    status and its log. For a job whose start is not what the test checks (the rerun of a killed
    job): a process of its own spends about 7 s of CPU here importing torch and transformers."""
    from rankone.cli import main

    assert cmd[1:3] == ["-m", "rankone"], cmd
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rankone"):
        code = main(cmd[3:])
    return code, caplog.text


def venv_env(**extra: str) -> dict:
    """This environment, with this interpreter's bin/ first on PATH (snakemake and rankone
    as jobs find them), plus `extra`."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}


def copy_workflow(workdir: Path) -> Path:
    """What a clone needs to run the workflow, copied into `workdir` (made if missing)."""
    workdir.mkdir(parents=True, exist_ok=True)
    for item in ("workflow", "config", "src", "envs"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, workdir / item)
    return workdir


def snakemake(
    workdir: Path,
    *args: str,
    configs=("config/smoke.yaml",),
    cores: bool = True,
    env: dict | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Real Snakemake in `workdir` (two local cores unless `cores` is False, for a cluster profile)."""
    env = venv_env(**(env or {}))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            *(["--cores", "2"] if cores else []),
            *(["--configfile", *configs] if configs else []),
            *args,
        ],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


LOCAL_SLURM = ROOT / "scripts" / "local-slurm"
SLURM_PROFILE = ("--profile", str(ROOT / "workflow" / "profiles" / "slurm"))
SLURM_STATE = Path(os.environ.get("RANKONE_SLURM_DIR", "/tmp/rankone-slurm"))


def local_slurm(command: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LOCAL_SLURM), command], capture_output=True, text=True, timeout=120)


# The session (pytest's main process: under pytest-xdist the controller, whose environment its
# workers inherit) starts Snakemake runs, and with RANKONE_SLURM=1 SLURM, in the background. Each
# run is a folder named in $RANKONE_TEST_RUNS/<name>.path and ends by writing its exit status to
# <name>.rc, so any worker can wait for it; the SLURM daemons' PIDs are in slurm.json.
RUNS_ENV = "RANKONE_TEST_RUNS"
BACKGROUND: dict = {}  # name -> process, in the process that started it (killed at the session's end)


def runs_dir() -> Path | None:
    return Path(os.environ[RUNS_ENV]) if os.environ.get(RUNS_ENV) else None


# What the SLURM profile runs: one RL cell of the smoke study and all it needs (data, a base model,
# its training, its evaluation), every job through sbatch. The whole smoke study runs locally.
SLURM_TARGET = "results/smoke/evaluate/rl/llama-tiny/lora-r1/metrics.jsonl"
# A rule whose job fails, sent through SLURM with the session (tests/test_slurm.py checks how the run ends).
BROKEN_RULE = (
    'rule broken:\n    output: "never.txt"\n    log: "broken.log"\n'
    '    shell: "echo rankone-test: deliberate failure > {log}; exit 3"\n'
)


def start_snakemake(name: str, workdir: Path, *args: str, served: tuple[str, ...] = ()) -> None:
    """Run Snakemake in `workdir` in the background (its stderr in snakemake.log); `finished` waits for it.
    With `served` (the configs of a study), under a `rankone jobserver` of that checkout that serves it
    (rankone.jobserver: its stage jobs forked warm; the server's own lines in snakemake.log too)."""
    runs = runs_dir()
    (runs / f"{name}.path").write_text(str(workdir))
    server = [sys.executable, "-m", "rankone", "jobserver", "--config", *served, "--"] if served else []
    command = [*server, sys.executable, "-m", "snakemake", *args]
    wrapper = f'"$@" 2> snakemake.log; echo $? > {runs / f"{name}.rc"}'
    BACKGROUND[name] = subprocess.Popen(  # its own process group: the session's end stops Snakemake and its jobs
        ["sh", "-c", wrapper, "sh", *command],
        cwd=workdir,
        env=venv_env(**({"PYTHONPATH": str(workdir / "src")} if served else {})),  # the server: the copy's rankone
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def started(name: str) -> bool:
    runs = runs_dir()
    return runs is not None and (runs / f"{name}.path").is_file()


def finished(name: str, timeout: float = 1800) -> tuple[int, Path]:
    """The exit status and folder of a background Snakemake run, once it has ended."""
    runs = runs_dir()
    rc, deadline = runs / f"{name}.rc", time.monotonic() + timeout
    while not (rc.is_file() and rc.read_text().strip()):
        assert time.monotonic() < deadline, f"{name}: still running after {timeout:.0f} s"
        time.sleep(1)
    return int(rc.read_text()), Path((runs / f"{name}.path").read_text())


def start_study(name: str, *args: str, configs=("config/smoke.yaml",), jobserver: bool = False) -> None:
    """Run a study in a fresh copy of the workflow in the background; `finished_study` waits for it.
    With `jobserver`, its stage jobs are forked by a `rankone jobserver` of that copy (rankone.jobserver:
    the same bytes, without each job importing torch, transformers and peft anew)."""
    workdir = copy_workflow(Path(tempfile.mkdtemp(prefix=f"rankone-{name}-")))
    start_snakemake(name, workdir, *args, "--configfile", *configs, served=configs if jobserver else ())


def study_copy(study: Path, dest: Path) -> Path:
    """A private copy of a finished study's folder (the smoke study: about 11 MB), for a test that edits
    its config, moves outputs, reruns a job or publishes it, while tests on other pytest-xdist workers
    read the study itself. copy2 keeps every mtime, so Snakemake sees the copy as finished too."""
    return Path(shutil.copytree(study, dest, symlinks=True))


def finished_study(name: str) -> Path:
    code, workdir = finished(name)
    assert code == 0, (workdir / "snakemake.log").read_text()[-4000:]
    return workdir


# The test modules that read the smoke study: a session that runs any of them starts it in the background.
SMOKE_READERS = ("test_workflow.py", "test_site.py", "test_slurm.py")


def wants_smoke(config) -> bool:
    tests = ROOT / "tests"
    paths = [(Path(config.invocation_params.dir) / a.split("::")[0]).resolve() for a in config.args]
    return not paths or any(p == tests or (p.parent == tests and p.name in SMOKE_READERS) for p in paths)


def pytest_sessionstart(session):
    """In pytest's main process (under pytest-xdist the controller, before it starts its workers),
    where the session runs a test that reads the smoke study: start it in the background on this
    machine's cores, and the vLLM smoke study on one. With RANKONE_SLURM=1 (set by .ci/run) also a
    real single-node SLURM (scripts/local-slurm) and, through the SLURM profile, one cell of the
    smoke study (SLURM_TARGET; its jobs spend much of their time waiting on SLURM) and a failing
    job (BROKEN_RULE). The tests run meanwhile; the fixtures and tests that read those runs wait."""
    config = session.config
    if config.option.collectonly or os.environ.get("PYTEST_XDIST_WORKER") or not wants_smoke(config):
        return
    os.environ[RUNS_ENV] = tempfile.mkdtemp(prefix="rankone-test-runs-")  # the workers inherit it
    if os.environ.get("RANKONE_SLURM") == "1":
        start_slurm()
    # The smoke studies' jobs start warm (a jobserver each); the SLURM cell's go through sbatch as a cluster's do.
    start_study("smoke", "--cores", "2", jobserver=True)
    if importlib.util.find_spec("vllm"):
        configs = ("config/smoke.yaml", "config/smoke-vllm.yaml")
        start_study("smoke-vllm", "--cores", "1", configs=configs, jobserver=True)


def start_slurm() -> None:
    missing = [] if os.geteuid() == 0 else ["root"]
    missing += [tool for tool in ("slurmctld", "slurmd", "munged", "sbatch", "scontrol") if not shutil.which(tool)]
    if missing:
        raise pytest.UsageError(
            f"RANKONE_SLURM=1 but {', '.join(missing)} missing (scripts/local-slurm install, as root)"
        )
    if not importlib.util.find_spec("snakemake_executor_plugin_slurm"):
        raise pytest.UsageError("RANKONE_SLURM=1 but the SLURM executor plugin is not installed (make slurm-env)")
    up = local_slurm("start")
    if up.returncode != 0:
        raise pytest.UsageError(f"scripts/local-slurm start failed: {up.stderr}{up.stdout}")
    pids = {
        name: int((where / f"{name}.pid").read_text())
        for name, where in (("slurmctld", SLURM_STATE), ("slurmd", SLURM_STATE), ("munged", Path("/run/munge")))
    }
    (runs_dir() / "slurm.json").write_text(json.dumps(pids))
    start_study("slurm", SLURM_TARGET, *SLURM_PROFILE)
    broken = Path(tempfile.mkdtemp(prefix="rankone-slurm-broken-"))  # test_slurm's failing job: mostly waiting
    (broken / "Snakefile").write_text(BROKEN_RULE)
    start_snakemake("slurm-broken", broken, *SLURM_PROFILE)


def pytest_sessionfinish(session, exitstatus):
    """In the process that started them: stop the background studies that still run (a session that
    ended before they did), then SLURM's daemons, by PID, and check
    that none of the three is left running (a failure here fails the session)."""
    if not BACKGROUND:
        return
    for process in BACKGROUND.values():
        if process.poll() is None:  # the whole group: killing the shell alone left Snakemake running on
            os.killpg(process.pid, signal.SIGKILL)
    if not (runs_dir() / "slurm.json").is_file():
        return
    pids = json.loads((runs_dir() / "slurm.json").read_text())
    stopped = local_slurm("stop")
    left = [f"{name} (pid {pid})" for name, pid in pids.items() if Path(f"/proc/{pid}").exists()]
    if stopped.returncode != 0 or left:
        print(f"\nscripts/local-slurm stop: exit {stopped.returncode} {stopped.stderr}; still running: {left}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def slurm_cluster():
    """With RANKONE_SLURM=1: the PIDs of the session's SLURM daemons (stopped at the session's end); else None."""
    runs = runs_dir()
    if runs is None or not (runs / "slurm.json").is_file():
        return None
    return json.loads((runs / "slurm.json").read_text())


@pytest.fixture(scope="session")
def smoke(tmp_path_factory, slurm_cluster):
    """The smoke study, run end to end by Snakemake on this machine's cores (started with the
    session where it runs a test that reads it; its log in snakemake.log)."""
    if not started("smoke"):
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
