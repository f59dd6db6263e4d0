"""Warm job starts: a process that has imported torch, transformers and peft once forks each job.

A stage job on a CPU spends most of a small study's time importing its libraries (about 5-7 s a
job here, against 1-3 s of work in the smoke study). `rankone jobserver --socket PATH` imports them
once and waits; a `rankone` stage command run with RANKONE_JOBSERVER=PATH in its environment hands
its arguments, working folder, environment and standard streams to the server, which forks a child
that runs the command as a fresh process would, and the command exits with the child's status.
Nothing changes in what a job computes: the server pins the CPU kernels before it imports torch and
runs no torch op itself, as a fresh job pins them before its first op, and a job whose config asks
for other kernels, whose `rankone` is another checkout's, or that asks for GPUs runs in its own
process as before. Without a server (none named, none listening) every command runs as it always did.

Signals reach the job: SIGTERM, SIGINT and SIGHUP sent to the command are passed on to the child,
and a command killed outright (SIGKILL) takes its child with it (the server sees its connection close).

`rankone jobserver --config C -- snakemake --cores all` serves one command and its jobs: it starts
the command once the socket listens, with RANKONE_JOBSERVER set, passes SIGTERM and SIGHUP on to it
(SIGINT from a terminal reaches both, and the command decides), and exits with its status when it
ends, its socket removed. The Makefile's studies run so.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from rankone.gpus import job_gpus
from rankone.io import InputError, log, pin_cpu_kernels

ENV = "RANKONE_JOBSERVER"
# The kernels the server pinned, as its children see them (a child whose config pins other ones refuses).
KERNELS_ENV = "RANKONE_JOBSERVER_KERNELS"
# What a child exits with when it cannot run in the server (its config's kernels): before any work, so the
# command runs the job in its own process instead. No rankone command exits with it otherwise (0, 1 or 2).
REFUSED = 75
# What the stage jobs import (by name: this module sits below the stages and imports none of them).
PRELOAD = ("torch", "transformers.modeling_utils", "peft", "pandas", "rankone.train.rl", "rankone.evaluate")
MESSAGE = 1 << 20
SOCKET_PATH_MAX = 107  # sun_path's 108 bytes, less the terminating NUL


def package() -> str:
    """The rankone package this process runs (a server serves only commands of its own checkout)."""
    return str(Path(__file__).resolve().parent)


# The client: `rankone` itself, before it imports anything of its own.


def forward(argv: list[str], commands: set[str]) -> int | None:
    """Run `argv` (a stage command, one of `commands`) in the server RANKONE_JOBSERVER names and return its
    exit status; None where it should run here instead (no server, another checkout's, a GPU job, refused)."""
    path = os.environ.get(ENV)
    if not path or not argv or argv[0] not in commands:
        return None
    try:
        if job_gpus() > 0:
            return None
    except ValueError:  # not a number: the command's own process reports it, as without a server
        return None
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "package": package()}
    # A signal that comes before the job's pid does is held back, then passed on to the job: a command
    # killed before it could forward would leave the job to the server's SIGKILL, a status no shell reports.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(conn.recv(MESSAGE) or b"{}")
    except (OSError, ValueError):
        reply = {}
    if "pid" not in reply:  # no server, refused (another checkout) or the server went away: runs here
        conn.close()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return None
    pid = reply["pid"]
    handlers = {sig: signal.signal(sig, lambda number, frame: _signal(pid, number)) for sig in HELD}
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        done = json.loads(conn.recv(MESSAGE) or b"{}")
    finally:
        conn.close()
    code = done.get("exit")
    if code is None:
        return 1
    if code == REFUSED:  # runs here after all: its signals are its own again
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        return None
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


# Signals a job's command forwards to it (forward), held back while the server forks the job.
HELD = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


# The child: what `rankone.cli.main` asks once it has read the job's config.


def refuse_other_kernels(kernels: str) -> None:
    """In a job forked by a server: exit REFUSED, before any work, where the config pins other CPU
    kernels than the server did (they take at a process's first op: the server's are set)."""
    served = os.environ.get(KERNELS_ENV)
    if served is not None and served != kernels:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(REFUSED)


# The server.


def serve(
    path: Path | None,
    kernels: str,
    run: Callable[[], int],
    ready: Callable[[Path], None] | None = None,
    also: tuple[str, ...] = (),
    command: list[str] | None = None,
) -> int | None:
    """Pin `kernels`, import the stage libraries (and the modules named in `also`), then fork a child
    for each command that connects to the socket at `path`; the child runs `run` (the command line's
    entry, with sys.argv the command's) and exits with what it returns. `ready` is called with the
    socket's path once it listens. Without `command`, serve until killed. With one, start it with
    RANKONE_JOBSERVER set once the socket listens, serve until it ends and return its exit status;
    without a `path`, the socket lies in a temporary folder, removed at the end."""
    if command and shutil.which(command[0]) is None:  # before the imports: a typo is said at once
        raise InputError(f"jobserver: no command {command[0]!r} to serve (not a file, nor on PATH)")
    if path is None:
        if not command:
            raise InputError("jobserver: give a --socket to listen on, or a command to serve (after --)")
        folder = Path(tempfile.mkdtemp(prefix="rankone-jobserver-"))
        try:
            return serve(folder / "socket", kernels, run, ready, also, command)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    if not path.parent.is_dir():
        raise InputError(f"jobserver: the socket's folder {path.parent} does not exist")
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise InputError(f"jobserver: socket path {path} is over the {SOCKET_PATH_MAX} bytes a Unix socket's takes")
    pin_cpu_kernels(kernels)
    for name in (*PRELOAD, *also):
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        path.unlink(missing_ok=True)
        listener.bind(str(path))
    except OSError as err:
        raise InputError(f"jobserver: cannot listen on {path}: {err.strerror}") from None
    listener.listen(16)
    if ready:
        ready(path)
    served = _start(command, path, listener) if command else None
    live: set[int] = set()  # the children not yet reaped
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            if served is None or "exit" not in served:
                raise
            listener.close()
            path.unlink(missing_ok=True)
            for pid in list(live):  # a job outliving its command (one killed outright) dies with the server
                _signal(pid, signal.SIGTERM)
            return served["exit"]
        try:
            data, fds, _, _ = socket.recv_fds(conn, MESSAGE, 3)
            request = json.loads(data)
        except (OSError, ValueError):
            conn.close()
            continue
        if request.get("package") != package() or len(fds) != 3:
            log.info("jobserver: %s is another checkout's rankone: it runs in its own process", request.get("package"))
            conn.send(json.dumps({"refused": f"this server runs {package()}"}).encode())
            _close(fds)
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        # The child starts with the server's handlers (SIGTERM passed on to the served command): a signal
        # its command forwards before the child has set its own would be spent on the server's. Held
        # back across the fork, it reaches the child once the child's handlers are its own.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            _run_child(request, fds, kernels, run, mask)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _close(fds)
        log.info("jobserver: pid %d runs rankone %s (in %s)", pid, " ".join(request["argv"]), request["cwd"])
        conn.send(json.dumps({"pid": pid}).encode())
        live.add(pid)
        threading.Thread(target=_watch, args=(conn, pid, live), daemon=True).start()


def _start(command: list[str], path: Path, listener: socket.socket) -> dict:
    """Start `command` with RANKONE_JOBSERVER=`path`; SIGTERM and SIGHUP sent to the server are passed on
    to it, SIGINT is left to it (a terminal sends it to both). When it ends, its exit status goes in the
    returned dict and the listener is shut down, which ends the server's loop."""
    try:
        proc = subprocess.Popen(command, env={**os.environ, ENV: str(path)})
    except OSError as err:
        raise InputError(f"jobserver: cannot run {command[0]}: {err.strerror}") from None
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: _signal(proc.pid, number))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # after the start: an ignored signal stays ignored across exec
    served: dict = {}

    def wait() -> None:
        code = proc.wait()
        served["exit"] = 128 - code if code < 0 else code  # killed by a signal: the shell's convention
        listener.shutdown(socket.SHUT_RDWR)

    threading.Thread(target=wait, daemon=True).start()
    return served


def _close(fds) -> None:
    for fd in fds:
        os.close(fd)


def _watch(conn: socket.socket, pid: int, live: set[int]) -> None:
    """Send the child's exit status to its command; kill the child if the command goes first."""
    done = threading.Event()

    def reap() -> None:
        _, status = os.waitpid(pid, 0)
        live.discard(pid)
        done.set()
        code = os.waitstatus_to_exitcode(status)
        if code == REFUSED:
            log.info("jobserver: pid %d: its config pins other CPU kernels: it runs in its own process", pid)
        else:
            log.info("jobserver: pid %d exited with %d", pid, code)
        try:
            conn.send(json.dumps({"exit": code}).encode())
        except OSError:
            pass

    threading.Thread(target=reap, daemon=True).start()
    try:
        conn.recv(1)  # nothing comes: returns when the command closes its end (done, or killed)
    except OSError:
        pass
    if not done.is_set():
        _signal(pid, signal.SIGKILL)
    conn.close()


def _run_child(request: dict, fds, kernels: str, run: Callable[[], int], mask: set) -> None:
    """In the forked child: become the command (its streams, folder, environment, arguments), run it, exit.
    `mask`: the signal mask to restore once the command's handlers are set (a signal held back since
    the fork is delivered then)."""
    code = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        _close(fds)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.pop(ENV, None)  # the job's own commands (torchrun's workers) start as they always did
        os.environ[KERNELS_ENV] = kernels
        sys.argv = ["rankone", *request["argv"]]
        code = run()
    except SystemExit as stop:  # argparse's usage errors and --help
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # as a fresh process would: the traceback on stderr, status 1
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
