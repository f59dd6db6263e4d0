"""`rankone jobserver`: a stage command forked from a warm process computes what a fresh process does,
exits as it would, dies with the command that started it, and runs in its own process where the
server cannot serve it (other CPU kernels, another checkout's rankone)."""

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

from tests.conftest import ROOT, smoke_dict, venv_env

RUN = "rl/llama-tiny/lora-r1/lr0.01/seed0"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A jobserver of this checkout, pinning the kernels the tests' studies run (smoke_dict: native),
    serving a command that only waits (the tests send it their own); at the end the server passes the
    SIGTERM it gets on to that command and exits with its status, its socket removed."""
    where = tmp_path_factory.mktemp("jobserver")
    (where / "kernels.yaml").write_text(yaml.safe_dump(smoke_dict()))
    socket_path, log = where / "js.sock", where / "jobserver.log"
    wait = ["sh", "-c", 'echo "$RANKONE_JOBSERVER" > served.txt; exec sleep 3600']
    command = ["jobserver", "--socket", str(socket_path), "--config", "kernels.yaml", "--", *wait]
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rankone", *command],
            cwd=where,
            env=venv_env(PYTHONPATH=str(ROOT / "src")),
            stderr=err,
            start_new_session=True,
        )
    deadline = time.monotonic() + 300
    while "listens" not in log.read_text() or not (where / "served.txt").is_file():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.5)
    assert (where / "served.txt").read_text().strip() == str(socket_path)
    yield socket_path, log
    try:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM, log.read_text()
        assert not socket_path.exists()
    finally:
        if proc.poll() is None:  # the checks above failed: nothing of the group may outlive the module
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def rankone(where: Path, *args: str, server=None, src: Path = ROOT / "src", **popen):
    env = venv_env(PYTHONPATH=str(src), **({"RANKONE_JOBSERVER": str(server[0])} if server else {}))
    command = [sys.executable, "-m", "rankone", *args]
    if popen:
        return subprocess.Popen(command, cwd=where, env=env, **popen)
    return subprocess.run(command, cwd=where, env=env, capture_output=True, text=True)


def served(server, before: str) -> list[str]:
    """The server's log lines written since it read `before`."""
    return server[1].read_text()[len(before) :].splitlines()


def test_a_stage_job_in_the_server_writes_the_bytes_of_its_own_process_and_exits_as_it_would(
    fresh_study, tmp_path, server
):
    where, cfg = fresh_study
    before = server[1].read_text()
    warm = rankone(where, "train", "--config", "study.yaml", "--run", RUN, server=server)
    assert warm.returncode == 0, warm.stderr
    lines = served(server, before)
    assert any(f"runs rankone train --config study.yaml --run {RUN}" in line for line in lines), lines
    assert any(line.endswith("exited with 0") for line in lines), lines
    run = where / "results" / cfg.experiment / "train" / RUN
    warm_bytes = {p.name: p.read_bytes() for p in (run / "weights").iterdir()}
    warm_metrics = (run / "metrics.jsonl").read_bytes()
    shutil.rmtree(run)
    cold = rankone(where, "train", "--config", "study.yaml", "--run", RUN)
    assert cold.returncode == 0, cold.stderr
    assert {p.name: p.read_bytes() for p in (run / "weights").iterdir()} == warm_bytes
    assert (run / "metrics.jsonl").read_bytes() == warm_metrics

    # A bad input: the same one-line error and status as in a process of its own.
    bad = [rankone(where, "train", "--config", "nope.yaml", "--run", RUN, server=s) for s in (server, None)]
    assert bad[0].returncode == bad[1].returncode == 2
    last = [b.stderr.strip().splitlines()[-1].split(" ", 1)[1] for b in bad]  # after the log line's time
    assert last[0] == last[1]
    assert "nope.yaml" in bad[0].stderr and "Traceback" not in bad[0].stderr


def long_study(fresh_study) -> Path:
    """The fresh study with an RL run long enough to be killed while it trains."""
    where, cfg = fresh_study
    study = yaml.safe_load((where / "study.yaml").read_text())
    study["rl"]["steps"] = 100_000
    (where / "long.yaml").write_text(yaml.safe_dump(study))
    return where


def job_pid(server, before: str, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while True:
        for line in served(server, before):
            if " runs rankone train" in line:
                return int(line.split("pid ")[1].split()[0])
        assert time.monotonic() < deadline, "the server never started the job"
        time.sleep(0.2)


def gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return not Path(f"/proc/{pid}").exists()


def test_a_signal_to_the_command_reaches_its_job_and_a_killed_command_takes_its_job_along(fresh_study, server):
    where = long_study(fresh_study)
    args = ("train", "--config", "long.yaml", "--run", RUN)
    before = server[1].read_text()
    command = rankone(where, *args, server=server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = job_pid(server, before)
    command.send_signal(signal.SIGTERM)
    assert command.wait(60) == 128 + signal.SIGTERM  # the job died of it, as a shell reports
    assert gone(pid)

    before = server[1].read_text()
    command = rankone(where, *args, server=server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = job_pid(server, before)
    command.kill()  # SIGKILL: nothing to pass on; the server sees the command's end and kills the job
    command.wait(60)
    assert gone(pid), f"job {pid} outlived its command"


def test_a_job_the_server_cannot_serve_runs_in_its_own_process(fresh_study, tmp_path, server):
    where, cfg = fresh_study
    study = yaml.safe_load((where / "study.yaml").read_text())  # each config its own results (data built anew)
    (where / "avx2.yaml").write_text(yaml.safe_dump({**study, "cpu_kernels": "avx2", "results_dir": "avx2"}))
    (where / "other.yaml").write_text(yaml.safe_dump({**study, "results_dir": "other"}))
    # Other CPU kernels than the server pinned: the forked job refuses before any work, the command runs it.
    before = server[1].read_text()
    done = rankone(where, "data", "--config", "avx2.yaml", "--regime", "rl", server=server)
    assert done.returncode == 0, done.stderr
    assert any("pins other CPU kernels" in line for line in served(server, before))
    assert (where / "avx2" / cfg.experiment / "data" / "rl" / "manifest.json").is_file()

    # Another checkout's rankone: the server refuses it, and the command runs in that checkout's code.
    other = tmp_path / "other"
    shutil.copytree(ROOT / "src", other / "src", ignore=shutil.ignore_patterns("__pycache__"))
    before = server[1].read_text()
    done = rankone(where, "data", "--config", "other.yaml", "--regime", "rl", server=server, src=other / "src")
    assert done.returncode == 0, done.stderr
    assert any("another checkout" in line for line in served(server, before))
    assert (where / "other" / cfg.experiment / "data" / "rl" / "manifest.json").is_file()


def test_a_socket_or_command_the_server_cannot_use_is_a_one_line_error(tmp_path):
    (tmp_path / ("x" * 120)).mkdir()  # a folder that exists, under a path too long for a Unix socket
    for where in (tmp_path / "no-such-folder" / "js.sock", tmp_path / ("x" * 120) / "js.sock"):
        done = rankone(ROOT, "jobserver", "--socket", str(where), "--config", "config/smoke.yaml")
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "jobserver: " in done.stderr and str(where.parent)[:40] in done.stderr
    assert "over the 107 bytes" in done.stderr
    for args, said in (([], "give a --socket"), (["--", "snakemkae", "--cores", "all"], "no command 'snakemkae'")):
        done = rankone(ROOT, "jobserver", "--config", "config/smoke.yaml", *args)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr


def test_a_signal_that_comes_before_the_servers_answer_waits_for_the_job_and_reaches_it(tmp_path):
    """The window between a command's request and the server's answer: a SIGTERM there is held back, not
    fatal, and goes to the job once its pid comes. The server here is the socket's other end, played by
    the test, so that the signal lands in that window every time."""
    import json
    import socket

    from rankone.jobserver import MESSAGE

    path = tmp_path / "js.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(120)
    env = venv_env(PYTHONPATH=str(ROOT / "src"), RANKONE_JOBSERVER=str(path))
    command = subprocess.Popen(
        [sys.executable, "-m", "rankone", "train", "--config", "study.yaml", "--run", RUN],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    job = subprocess.Popen(["sleep", "600"])
    try:
        conn, _ = listener.accept()
        data, fds, _, _ = socket.recv_fds(conn, MESSAGE, 3)
        for fd in fds:
            os.close(fd)
        assert json.loads(data)["argv"][0] == "train"
        command.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):  # held back: the command lives on
            command.wait(2)
        conn.send(json.dumps({"pid": job.pid}).encode())
        assert job.wait(60) == -signal.SIGTERM  # passed on to the job
        conn.send(json.dumps({"exit": -signal.SIGTERM}).encode())
        assert command.wait(60) == 128 + signal.SIGTERM
    finally:
        for proc in (command, job):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        listener.close()
