"""Small shared helpers: atomic files, JSON lines, seeding, provenance, logging."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

log = logging.getLogger("rankone")

# The libraries' own switches that pin their CPU code paths (cpu_kernels: avx2). They are read
# once, when each library first runs a kernel, so they are set before torch loads (rankone.cli).
# MKL honours MKL_CBWR=AVX2 on Intel CPUs alone: on AMD it runs its AUTO branch, so avx2-pinned
# Intel and AMD machines run different MKL kernels. COMPATIBLE (SSE2 without the approximate
# rcpps/rsqrtps) is the one branch both vendors run: `portable`.
CPU_KERNELS = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "portable": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "native": {},
}
TRACKED_PACKAGES = ("torch", "transformers", "peft", "tokenizers", "safetensors", "snakemake", "numpy", "pandas")


class InputError(ValueError):
    """Data, a checkpoint or a path that cannot be used; the message names it (the CLI exits 2)."""


def setup_logging(quiet: bool = False) -> None:
    """INFO lines with the time; with `quiet` (the other processes of a group) warnings only."""
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO, format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S"
    )


@contextlib.contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary sibling path; on success rename it onto `path` (file or folder).

    An interrupted write leaves only the temporary, never a half-written `path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    remove(tmp)
    try:
        yield tmp
        remove(path)
        os.replace(tmp, path)
    finally:
        remove(tmp)


def remove(path: Path) -> None:
    """`path` gone, whether a folder, a file or a link (a link is removed, never followed); absent is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def write_json(path: str | Path, data) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: str | Path):
    return json.loads(Path(path).read_text())


def write_jsonl(path: str | Path, rows) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            for row in rows:
                f.write(json.dumps(row, sort_keys=True) + "\n")


def read_jsonl(path: str | Path) -> list[dict]:
    rows = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(
                    f"{path}:{lineno}: not valid JSON ({err.msg}); the file is corrupt or truncated"
                ) from None
    return rows


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def seed_everything(seed: int, threads: int = 1) -> None:
    """Same seed, same numbers on CPU: seeds every RNG and fixes the thread count.

    The CPU kernels these models use are deterministic at a fixed thread count (the
    byte-identity tests check it); `torch.use_deterministic_algorithms` is not called
    because it imports the compiler stack and costs 1.5 s per job.
    """
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)


def package_versions() -> dict[str, str]:
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def git_state(cwd: str | Path = ".") -> dict:
    def git(*args):
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return {"commit": None, "dirty": None}
        # reports/ is what `rankone publish` rewrites, page after page: not code, so not dirty
        status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports")
        changed = sorted(line[3:] for line in status.stdout.splitlines())
        return {"commit": head.stdout.strip(), "dirty": bool(changed), "changed": changed}
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}


def provenance(cfg, stage: str, seed: int | None, started: float, regime: str | None = None) -> dict:
    """What is needed to rebuild an output of `stage`: the digests of the config sections and
    library code the stage reads (rankone.stages), seed, software, git state, host, times, command."""
    from rankone.stages import config_digest, config_sections, source_digest

    sections = config_sections(stage, regime)
    return {
        "stage": stage,
        **({"device": device_name(cfg.device)} if "device" in sections else {}),
        **({"cpu": cpu_info()} if "cpu_kernels" in sections else {}),
        "config_sections": sections,
        "config_digest": config_digest(cfg, stage, regime),
        "code_digest": source_digest(stage, cfg),
        "seed": seed,
        "packages": package_versions(),
        "python": platform.python_version(),
        "git": git_state(),
        "host": socket.gethostname(),
        "started": _iso(started),
        "finished": _iso(time.time()),
        "command": " ".join(["rankone", *sys.argv[1:]]),
    }


def recorded_provenance(root: str | Path) -> list[dict]:
    """The provenance records (provenance) of every output under a study's results folder: data
    manifests, base models, runs of the study and its sub-studies; an unreadable file is skipped."""
    records = []
    for pattern in ("data/*/manifest.json", "models/*/rankone.json", "**/run.json"):
        for path in Path(root).glob(pattern):
            try:
                records.append(json.loads(path.read_text()).get("provenance") or {})
            except (json.JSONDecodeError, OSError):
                continue
    return records


def span_seconds(records: list[dict]) -> float | None:
    """Seconds from the first record's start to the last one's finish; None without both."""
    started = [r["started"] for r in records if r.get("started")]
    finished = [r["finished"] for r in records if r.get("finished")]
    if not started or not finished:
        return None
    return (datetime.fromisoformat(max(finished)) - datetime.fromisoformat(min(started))).total_seconds()


def pin_cpu_kernels(kernels: str) -> None:
    """Set (or, for native, clear) the CPU kernel switches of `kernels` in this process and the
    ones it starts; before torch runs anything, or they do not take."""
    for name in CPU_KERNELS["avx2"]:
        os.environ.pop(name, None)
    os.environ.update(CPU_KERNELS[kernels])


def cpu_info() -> dict:
    """The CPU a job ran on and the kernels it used: model, torch's vector capability, BLAS, and
    the pinning switches in effect (two runs can give the same bytes only where these agree)."""
    import torch

    model = next(
        (line.split(":", 1)[1].strip() for line in _read_lines("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor() or platform.machine(),
    )
    blas = next(
        (
            line.strip(" -")
            for line in torch.__config__.show().splitlines()
            if "Math Kernel Library" in line or "OpenBLAS" in line
        ),
        "unknown",
    )
    return {
        "model": model,
        "capability": torch.backends.cpu.get_cpu_capability(),
        "blas": blas,
        "threads": torch.get_num_threads(),
        "switches": {name: os.environ[name] for name in CPU_KERNELS["avx2"] if name in os.environ},
    }


def _read_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except OSError:
        return []


def device_name(device: str) -> str:
    """The device config `device` resolves to here, with the GPU's name (cuda: NVIDIA H200)."""
    import torch

    from rankone.device import resolve

    where = resolve(device)
    return f"cuda: {torch.cuda.get_device_name(where)}" if where.type == "cuda" else where.type


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


# Text columns of the analysis tables that are empty when they do not apply (an lr inside its grid
# has no edge): read as "" even when a whole column is empty.
TEXT_COLUMNS = frozenset({"edge", "lr_edge", "fullft_lr_edge", "plain_lr_edge", "reason", "by_step"})


def read_table(path: str | Path):
    """An analysis table (CSV), read one way by every stage: missing text is "", missing numbers are
    NaN, and a file with no rows is an empty table."""
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    for column in table.columns:
        if column in TEXT_COLUMNS or table[column].dtype == object:
            table[column] = table[column].astype(object).where(table[column].notna(), "")
    return table
