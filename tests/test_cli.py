"""The command line as a person uses it: a progress bar on a terminal, one log line per
logged step in a file, and `rankone status` on a study's grid."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios


from rankone.io import CPU_KERNELS
from tests.conftest import ROOT

RUN = "rl/llama-tiny/lora-r1/lr0.01/seed0"


def rankone(where, *args, tty: bool = False) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "120"}
    command = [sys.executable, "-m", "rankone", *args]
    if not tty:
        out = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True)
        return out.returncode, out.stderr
    leader, follower = pty.openpty()  # stderr on a terminal, as in an interactive shell, 120 columns wide
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen(command, cwd=where, env=env, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(), b"".join(chunks).decode(errors="replace")


def test_status_counts_completed_started_failed_and_missing_runs(fresh_study, monkeypatch):
    from rankone import status
    from rankone.paths import Layout

    where, cfg = fresh_study
    monkeypatch.chdir(where)
    at = Layout(cfg)
    runs = cfg.runs()
    done, torn, started, failed = runs[0], runs[2], runs[4], runs[6]  # four cells (two seeds each)
    for run in (done, torn, started):
        at.train(run).mkdir(parents=True)
    (at.train(done) / "run.json").write_text(json.dumps({"status": "completed"}))
    (at.train(torn) / "metrics.jsonl").write_text("{}\n")  # outputs without run.json: never complete
    at.train_log(failed).parent.mkdir(parents=True, exist_ok=True)
    at.train_log(failed).write_text("Traceback (most recent call last):\n  ...\nRuntimeError: boom\n")
    states = {s.run.path: s.state for s in status.grid(cfg) if not s.sub_study}
    assert states[done.path] == "completed" and states[failed.path] == "failed"
    assert states[torn.path] == states[started.path] == "started"
    assert list(states.values()).count("failed") == 2  # one train job trains both seeds of a cell
    assert list(states.values()).count("missing") == len(runs) - 5

    out = subprocess.run(
        [sys.executable, "-m", "rankone", "status", "--config", "study.yaml"],
        cwd=where,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert out.returncode == 0, out.stderr
    assert f"1 completed, 2 failed, 2 started, {len(status.grid(cfg)) - 5} missing" in out.stdout
    assert f"failed: {failed.path}: see {at.train_log(failed)}" in out.stdout
    assert "report: not written yet" in out.stdout


def native_capability() -> str:
    """This CPU's own vector capability, as torch picks it with no pins set."""
    env = {k: v for k, v in os.environ.items() if k not in CPU_KERNELS["avx2"]}
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_train_shows_a_bar_on_a_terminal_one_line_per_step_in_a_file_and_runs_the_pinned_kernels(fresh_study):
    """One run trained twice: on a terminal with the pinned kernels (a progress bar; the switches
    read back from inside the job), then into a log file with the native ones (one line per logged
    step; no switches), and whether the two kernels gave the same bytes."""
    where, cfg = fresh_study
    run_dir = where / "results" / cfg.experiment / "train" / RUN
    study = (where / "study.yaml").read_text()
    (where / "pinned.yaml").write_text(study.replace("cpu_kernels: native", "cpu_kernels: avx2"))
    code, terminal = rankone(where, "train", "--config", "pinned.yaml", "--run", RUN, tty=True)
    assert code == 0, terminal[-2000:]
    assert "episode/s" in terminal or "s/episode" in terminal, terminal[-2000:]  # tqdm's rate, in the run's unit
    assert f"{cfg.rl.steps * cfg.rl.prompts_per_step * cfg.rl.group_size}/" in terminal  # the episode budget
    pinned = json.loads((run_dir / "run.json").read_text())["provenance"]["cpu"]
    assert pinned["switches"] == CPU_KERNELS["avx2"]  # read back from inside the job
    native = native_capability()
    if native in ("AVX2", "AVX512"):
        assert pinned["capability"] == "AVX2", pinned
    pinned_bytes = (run_dir / "metrics.jsonl").read_bytes()

    code, log = rankone(where, "train", "--config", "study.yaml", "--run", RUN)
    assert code == 0, log[-2000:]
    assert "\r" not in log and "episode/s" not in log  # no bar in a file
    steps = [line for line in log.splitlines() if f"{RUN} step " in line]
    assert len(steps) == cfg.rl.steps // cfg.rl.log_every  # one line per logged step
    unpinned = json.loads((run_dir / "run.json").read_text())["provenance"]["cpu"]
    assert unpinned["switches"] == {} and unpinned["capability"] == native
    same = (run_dir / "metrics.jsonl").read_bytes() == pinned_bytes
    print(f"\n{RUN}: native {native} against pinned AVX2: {'same' if same else 'other'} bytes")
    if native == "AVX512":  # this machine's second instruction set: the pins are what made the bytes
        assert not same, "AVX-512 and the AVX2 pins gave the same bytes: the pins did nothing here"


def test_version_and_a_reader_that_leaves_early():
    """`rankone --version`; `rankone runs | head -1` ends quietly (no BrokenPipeError traceback), rc 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    version = subprocess.run([sys.executable, "-m", "rankone", "--version"], capture_output=True, text=True, env=env)
    assert version.returncode == 0 and version.stdout.startswith("rankone ")
    piped = subprocess.run(
        f"'{sys.executable}' -m rankone runs --config config/default.yaml | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert piped.returncode == 0 and piped.stdout.count("\n") == 1 and "Traceback" not in piped.stderr


def test_check_layers_configs_as_snakemake_does():
    """`rankone check` takes the layered configs the docs tell you to write; one experiment alone names its base."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    def check(*files):
        return subprocess.run(
            [sys.executable, "-m", "rankone", "check", "--config", *files],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )

    layered = check("config/default.yaml", "config/experiments/learning.yaml")
    assert layered.returncode == 0 and "config/default.yaml + config/experiments/learning.yaml: valid" in layered.stdout
    alone = check("config/experiments/learning.yaml")
    assert alone.returncode == 2 and "--config config/default.yaml config/experiments/learning.yaml" in alone.stderr
    # Two experiments without their base (a crossover size over the crossover): the hint names all three.
    sizes = ("config/experiments/crossover.yaml", "config/experiments/crossover/n512-o_proj.yaml")
    unbased = check(*sizes)
    assert unbased.returncode == 2 and f"--config config/default.yaml {' '.join(sizes)})" in unbased.stderr
    assert len(unbased.stderr.strip().splitlines()) == 1
    broken = check("config/smoke.yaml", "config/experiments/crossover/n512-o_proj.yaml")  # wrong however layered
    assert broken.returncode == 2 and "layers over a study" not in broken.stderr
    planned = subprocess.run(
        [sys.executable, "-m", "rankone", "plan", "--config", *sizes], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert planned.returncode == 2 and f"--config config/default.yaml {' '.join(sizes)})" in planned.stderr


def test_evaluate_names_an_off_grid_method_and_missing_data_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    config = tmp_path / "study.yaml"
    config.write_text((ROOT / "config/smoke.yaml").read_text() + f"results_dir: {tmp_path / 'results'}\n")
    for method, message in [
        ("rl/llama-tiny/lora-r7", "no such method in the study"),
        ("rl/llama-tiny/lora-r1", "manifest.json is missing; rerun the data stage"),
    ]:
        out = subprocess.run(
            [sys.executable, "-m", "rankone", "evaluate", "--config", str(config), "--method", method],
            capture_output=True,
            text=True,
            env=env,
        )
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, method


def test_help_lists_every_command_once_in_its_group():
    """`rankone --help` groups the commands (check and size, inspect, stages, warm starts, publish,
    maintainer); a command added without a group fails here (argparse's own list of choices names every
    command)."""
    import re

    from rankone.cli import COMMAND_GROUPS

    def rankone(*args):
        return subprocess.run([sys.executable, "-m", "rankone", *args], capture_output=True, text=True, cwd=ROOT)

    out = rankone("--help")
    assert out.returncode == 0 and all(f"{group}:" in out.stdout for group in COMMAND_GROUPS)
    listed = [
        line.split()[0] for line in out.stdout.split("check and size a study:")[1].splitlines() if line[:2] == "  "
    ]
    choices = re.findall(r"'([a-z-]+)'", rankone("no-such-command").stderr.split("choose from", 1)[1])
    assert sorted(listed) == sorted(choices) and len(set(listed)) == len(listed)
    assert all(rankone(name, "--help").returncode == 0 for name in ("train", "findings", "plan"))


GEMM = """
import hashlib, torch
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
a, b = torch.randn(256, 512, generator=g), torch.randn(512, 256, generator=g)
print(hashlib.sha256((a @ b).numpy().tobytes()).hexdigest())
"""


def test_mkl_runs_the_portable_branch_on_any_vendor_and_the_avx2_one_on_intel_alone():
    """One fp32 GEMM (MKL's sgemm) under each kernel pin, in fresh processes. COMPATIBLE, the
    portable pin's branch, is honoured on Intel and AMD alike, so it changes the bytes; on an AMD
    CPU MKL ignores the avx2 pin's AVX2 branch (its AUTO branch runs, as with no pin), which is why
    avx2-pinned Intel and AMD machines run different MKL kernels."""

    def product(kernels: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in CPU_KERNELS["avx2"]}
        env |= {"ATEN_CPU_CAPABILITY": "avx2", **CPU_KERNELS[kernels]}
        out = subprocess.run([sys.executable, "-c", GEMM], capture_output=True, text=True, env=env, check=True)
        return out.stdout.strip()

    auto, avx2, portable = product("native"), product("avx2"), product("portable")
    assert portable != avx2
    vendor = next((line for line in open("/proc/cpuinfo") if line.startswith("vendor_id")), "")
    if "AuthenticAMD" in vendor:
        assert avx2 == auto
