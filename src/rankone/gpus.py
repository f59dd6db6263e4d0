"""A local GPU box: each job takes the GPU ids it was given, and only those.

`snakemake --cores all --resources gpu=N` runs at most N GPUs' worth of jobs at once, but
Snakemake gives a job no device ids, so every job would see every GPU and all would start on
GPU 0. A rule's shell passes the job's `gpu` resource as RANKONE_GPUS; before torch loads,
`claim` takes that many ids from the box's pool, one lock file each under
`.snakemake/rankone-gpus/`, and sets CUDA_VISIBLE_DEVICES to them. The locks are `flock`s on
open files: the kernel drops them when the process ends, however it ends (SIGKILL included),
so a killed job frees its ids and nothing is left to clean up.

The pool: RANKONE_GPU_IDS (comma-separated), else the ids in CUDA_VISIBLE_DEVICES, else one
per GPU `nvidia-smi -L` lists. Under SLURM (SLURM_JOB_ID set) the scheduler has already
chosen the job's GPUs and nothing is claimed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

from rankone.io import InputError, log

POOL_DIR = Path(".snakemake/rankone-gpus")
_HELD: list = []  # the open lock files: held for the life of the process


def pool_ids() -> list[str]:
    """The GPU ids jobs on this machine share."""
    for name in ("RANKONE_GPU_IDS", "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(name, "").strip()
        if value:
            return [i.strip() for i in value.split(",") if i.strip()]
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]
    return []


def claim(n: int, pool_dir: Path = POOL_DIR, poll_s: float = 0.5, wait_s: float | None = None) -> list[str]:
    """Lock `n` of the pool's ids for this process (waiting while others hold them, at most
    `wait_s` seconds if given) and make them the only ones CUDA shows it."""
    ids = pool_ids()
    if n > len(ids):
        raise InputError(
            f"this job needs {n} GPU(s) but the machine's pool has {len(ids)} ({','.join(ids) or 'none'}"
            "): set RANKONE_GPU_IDS, or run with --resources gpu=<at most that many>"
        )
    pool_dir.mkdir(parents=True, exist_ok=True)
    waited = 0.0
    while True:
        got = []
        for gpu in ids:
            f = open(pool_dir / f"gpu{gpu}.lock", "a+")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            got.append((gpu, f))
            if len(got) == n:
                break
        if len(got) == n:
            break
        for _, f in got:  # not enough free: give back what was taken, so two jobs never deadlock
            f.close()
        if wait_s is not None and waited >= wait_s:
            raise InputError(f"no {n} free GPU(s) of {','.join(ids)} within {wait_s:g} s (held: see {pool_dir})")
        if waited == 0:
            log.info("waiting for %d free GPU(s) of %s", n, ",".join(ids))
        time.sleep(poll_s)
        waited += poll_s
    _HELD.extend(f for _, f in got)
    chosen = [gpu for gpu, _ in got]
    for _, f in got:
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")  # who holds it, for a person looking
        f.flush()
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
    return chosen


def job_gpus() -> int:
    """The GPUs a workflow job's rule gave it (RANKONE_GPUS; unset or empty: none)."""
    return int(os.environ.get("RANKONE_GPUS", "0") or 0)


def claim_for_job() -> list[str]:
    """What a workflow job's `rankone` command does first: claim RANKONE_GPUS ids, unless SLURM
    has chosen them or the job has none."""
    n = job_gpus()
    if n <= 0 or os.environ.get("SLURM_JOB_ID"):
        return []
    chosen = claim(n)
    log.info("GPU(s) %s (CUDA_VISIBLE_DEVICES)", ",".join(chosen))
    return chosen


def main(argv: list[str] | None = None) -> int:
    """`python -m rankone.gpus [--hold S]`: claim RANKONE_GPUS ids as a job would, print them
    (JSON: pid, ids, start and end times), and hold them S seconds."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m rankone.gpus", description=main.__doc__.splitlines()[0])
    parser.add_argument("--hold", type=float, default=0.0, help="seconds to hold the ids")
    args = parser.parse_args(argv)
    start = time.time()
    chosen = claim_for_job()
    print(json.dumps({"pid": os.getpid(), "gpus": chosen, "start": start, "claimed": time.time()}), flush=True)
    time.sleep(args.hold)
    print(json.dumps({"end": time.time()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
