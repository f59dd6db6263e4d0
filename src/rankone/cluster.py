"""Cluster executors: fail before the first submission when the scheduler cannot be reached.

Snakemake's SLURM plugin, facing a controller that does not answer, spends several seconds
on every job it tries to submit before the run gives up; with a handful of jobs ready that
is minutes. The workflow asks the controller once, up front (its `onstart` handler), and
stops with a message that says what to check.
"""

from __future__ import annotations

import os
import subprocess

from rankone.io import InputError


def check_slurm_controller(timeout: float = 20.0) -> None:
    """Raise InputError unless `scontrol ping` reports the SLURM controller UP."""
    where = f"SLURM_CONF={os.environ['SLURM_CONF']}" if "SLURM_CONF" in os.environ else "/etc/slurm/slurm.conf"
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise InputError("--executor slurm: scontrol is not on PATH (is this a SLURM login node?)") from None
    except subprocess.TimeoutExpired:
        raise InputError(
            f"--executor slurm: the SLURM controller did not answer `scontrol ping` within "
            f"{timeout:.0f} s (config: {where})"
        ) from None
    answer = " ".join((out.stdout + out.stderr).split()) or f"exit code {out.returncode}"
    if out.returncode != 0 or " is UP" not in out.stdout:
        raise InputError(
            f"--executor slurm: cannot reach the SLURM controller (config: {where}); "
            f"`scontrol ping` says: {answer}. Start it (scripts/local-slurm start on this machine) "
            "or check SlurmctldHost and SlurmctldPort"
        )
