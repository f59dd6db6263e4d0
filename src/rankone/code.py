"""Which library source each stage runs, hashed: a rule param, so Snakemake's code
trigger and its between-workflow cache notice a change to exactly that code.

A change to the report code reruns the report only; a change to a trainer reruns
training and what follows, never the data or the base models.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
COMMON = ("__init__.py", "__main__.py", "cli.py", "config.py", "io.py", "paths.py", "tasks")
STAGE_SOURCES: dict[str, tuple[str, ...]] = {
    "data": ("data.py",),
    "models": ("models",),
    "rollouts": ("data.py", "models", "rollouts"),
    "train": ("data.py", "models", "rollouts", "train", "info.py"),
    "evaluate": ("data.py", "models", "evaluate.py", "info.py"),
    "analysis": ("analysis.py", "info.py"),
    "capacity": ("capacity.py", "analysis.py", "info.py"),
    "updates": ("updates.py",),
    "report": ("report.py",),
}


def source_files(stage: str, package: Path = PACKAGE) -> list[Path]:
    files: list[Path] = []
    for name in (*COMMON, *STAGE_SOURCES[stage]):
        path = package / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def source_digest(stage: str, package: str | Path = PACKAGE) -> str:
    """Hash of the stage's source files under `package` (the checkout's src/rankone)."""
    package = Path(package)
    h = hashlib.sha256()
    for path in source_files(stage, package):
        h.update(path.relative_to(package).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
