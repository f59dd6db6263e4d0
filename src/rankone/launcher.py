"""Whether this process is one of a group torchrun started, and tying it to its launcher: asked by
every `rankone` command before anything else, so without torch (a data or report job never loads it)."""

from __future__ import annotations

import os

from rankone.io import log


def launched() -> bool:
    """Whether this process was started by torchrun (one of a group)."""
    return "TORCHELASTIC_RUN_ID" in os.environ or ("LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ)


def follow_launcher() -> None:
    """In a process torchrun started: die with the launcher. torchrun starts each process in a session
    of its own, so a job killed as Snakemake and SLURM kill one (its process group) would leave them
    training, and writing, on their own; PR_SET_PDEATHSIG has the kernel SIGKILL this one when its
    parent (the launcher) dies, however it dies."""
    import ctypes
    import signal

    if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL) != 0:  # 1 = PR_SET_PDEATHSIG (Linux)
        log.warning("could not tie this process to its launcher (prctl: errno %d)", ctypes.get_errno())
    if os.getppid() == 1:  # the launcher died before the tie was made
        os._exit(1)
