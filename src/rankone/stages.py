"""The one table of stage dependencies: for every stage of the DAG, the library source
it runs, the config sections it reads and the stages whose outputs it reads.

Everything that needs to know what a stage depends on reads it from here: the
Snakemake rules' params (so a job reruns exactly when its config or code changes),
each output's provenance (config and code digest), and a training checkpoint's
identity (so a resume never continues onto a changed config or base model).

A change to the report code reruns the report only; a change to a trainer reruns
training and what follows, never the data or the base models; a change to one task's code (its
module under tasks/ and what that module imports from the folder) reruns only the studies that
name the task.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
COMMON = (
    "__init__.py",
    "__main__.py",
    "cli.py",
    "config.py",
    "device.py",
    "engines.py",
    "gpus.py",
    "io.py",
    "launcher.py",
    "objectives.py",
    "outputs.py",
    "paths.py",
    "presets.py",
    "registry.py",
    "stages.py",
)
# The task folder's code every study runs (the registry, the base class, the confidence wrapper);
# each task's own module, and the folder's modules it imports, only in a study that names the task.
TASKS_DIR = "tasks"
TASKS_COMMON = ("__init__.py", "base.py", "confidence.py")


@dataclass(frozen=True)
class Stage:
    sources: tuple[str, ...]  # library files and folders it runs, beyond COMMON
    config: tuple[str, ...]  # dotted config sections it reads; "{regime}" is the job's regime
    upstream: tuple[str, ...] = ()  # stages whose outputs it reads
    per_regime: dict[str, tuple[str, ...]] = field(default_factory=dict)  # extra sections for one regime


# What a stage that scores RL test completions with the evaluate stage's scorer reads.
RL_SCORING = ("threads", "cpu_kernels", "device", "dtype", "evaluate", "rollout.max_new_tokens", "tasks.rl")

STAGES: dict[str, Stage] = {
    "data": Stage(("data.py",), ("seed", "tasks.{regime}")),
    # The warm-start reads both tasks' warm-up splits and samples RL answers to record base pass@1.
    "models": Stage(
        ("models",),
        (
            "seed",
            "threads",
            "cpu_kernels",
            "dtype",
            "local_models",
            "hub_models",
            "architecture",
            "pretrain",
            "tasks",
            "rollout.max_new_tokens",
        ),
        ("data",),
    ),
    "rollouts": Stage(
        ("data.py", "models", "rollouts"),
        (
            "seed",
            "threads",
            "cpu_kernels",
            "device",
            "dtype",
            "rollout",
            "tasks.rl",
            "sharpening",
            "evaluate.temperature",
            "evaluate.batch_prompts",
            "evaluate.samples_per_prompt",
        ),
        ("data", "models"),
    ),
    "train": Stage(
        ("data.py", "models", "rollouts", "train", "info.py"),
        (
            "threads",
            "cpu_kernels",
            "device",
            "dtype",
            "gradient_checkpointing",
            "{regime}",
            "lora",
            "tasks.{regime}",
            "evaluate.at",
        ),  # training saves the weights at the checkpoints evaluate scores
        ("data", "models"),
        per_regime={
            "rl": (
                "rollout.engine",
                "rollout.temperature",
                "rollout.max_new_tokens",
                "rollout.enforce_eager",
                "rollout.prefix_caching",
                "rollout.max_num_seqs",
            )
        },
    ),
    # Samples through the configured rollout engine.
    "evaluate": Stage(
        ("data.py", "models", "rollouts", "evaluate.py", "info.py"),
        (
            "threads",
            "cpu_kernels",
            "device",
            "dtype",
            "evaluate",
            "sharpening.samples",
            "sharpening.pass_at",
            "rollout.engine",
            "rollout.enforce_eager",
            "rollout.prefix_caching",
            "rollout.max_num_seqs",
            "rollout.max_new_tokens",
            "tasks.{regime}",
        ),
        ("data", "models", "train"),
    ),
    # Chooses each method's lr on the sweep's val scores: the confirmation runs' lrs.
    "select": Stage(("analysis.py", "info.py"), ("analysis",), ("train", "evaluate")),
    "analysis": Stage(
        ("analysis.py", "info.py"), ("analysis", "confirmation"), ("select", "train", "evaluate", "rollouts")
    ),
    "updates": Stage(("updates.py",), (), ("analysis", "models", "train")),
    "truncation": Stage(
        ("truncation.py", "updates.py", "evaluate.py", "analysis.py", "models", "rollouts", "data.py", "info.py"),
        (*RL_SCORING, "analysis", "truncation"),
        ("data", "models", "train", "analysis"),
    ),
    "capacity": Stage(
        ("capacity.py", "analysis.py", "info.py"), ("analysis", "capacity"), ("analysis", "train", "evaluate")
    ),
    # Scores each chosen run's pass@k itself (evaluate's scorer) and reads each lever's runs.
    "levers": Stage(
        ("levers.py", "analysis.py", "evaluate.py", "models", "rollouts", "data.py", "info.py"),
        (*RL_SCORING, "rl", "analysis", "levers"),
        ("data", "models", "train", "evaluate", "analysis"),
    ),
    "report": Stage(
        ("report.py", "figures.py", "render.py"),
        ("analysis", "capacity", "truncation", "levers"),
        ("analysis", "updates", "capacity", "truncation", "levers", "rollouts", "models"),
    ),
}


def config_sections(stage: str, regime: str | None = None) -> list[str]:
    """The dotted config sections `stage` reads (for a job of `regime`, where it has one)."""
    spec = STAGES[stage]
    sections = [*spec.config, *spec.per_regime.get(regime, ())]
    if regime is None and any("{regime}" in s for s in sections):
        raise ValueError(f"stage {stage!r} reads per-regime config: name the regime")
    return [s.format(regime=regime) for s in sections]


def upstream(stage: str) -> list[str]:
    """`stage` and every stage it depends on, transitively."""
    seen: list[str] = []

    def visit(name: str) -> None:
        if name not in seen:
            seen.append(name)
            for parent in STAGES[name].upstream:
                visit(parent)

    visit(stage)
    return seen


def lineage_sections(stage: str, regime: str | None = None) -> list[str]:
    """Every config section `stage`'s outputs depend on, through its upstream stages too."""
    return sorted({s for name in upstream(stage) for s in config_sections(name, regime)})


def config_digest(cfg, stage: str, regime: str | None = None, lineage: bool = False) -> str:
    """Hash of the config sections `stage` reads (with `lineage`, its upstream stages' too)."""
    sections = lineage_sections(stage, regime) if lineage else config_sections(stage, regime)
    if not sections:  # reads no config at all
        return hashlib.sha256(b"{}").hexdigest()[:16]
    return cfg.digest(*sections)


def study_tasks(cfg) -> list[str]:
    """The names of the tasks a study's config names (tasks.rl, tasks.sft, tasks.format)."""
    return sorted({spec.name for spec in cfg.tasks.values()})


def task_files(names: Iterable[str], package: Path = PACKAGE) -> list[Path]:
    """The files under `package`/tasks that the named tasks run: the folder's shared code, the
    module whose task class has each name and, transitively, the folder's modules it imports.
    Read from this checkout's source, not imported. A task an installed package adds
    (rankone.tasks.installed) is its package's code: only the folder's modules it imports count."""
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    folder = package / TASKS_DIR
    prefix = f"rankone.{TASKS_DIR}."
    trees = {path: ast.parse(path.read_text(), str(path)) for path in sorted(folder.glob("*.py"))}

    def imports(tree: ast.AST) -> set[Path]:
        return {
            folder / f"{node.module.removeprefix(prefix)}.py"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix)
        }

    def named(tree: ast.AST) -> set[str]:  # the `name = "..."` of each class the module defines
        return {
            stmt.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            for stmt in node.body
            if isinstance(stmt, ast.Assign)
            and [getattr(t, "id", None) for t in stmt.targets] == ["name"]
            and isinstance(stmt.value, ast.Constant)
        }

    modules = {task: path for path, tree in trees.items() for task in named(tree)}
    installed = {entry.name: entry.module for entry in entry_points(group="rankone.tasks")}
    files = {folder / name for name in TASKS_COMMON}
    todo: set[Path] = set()
    for name in names:
        if name in modules:
            todo.add(modules[name])
        elif name in installed and (spec := find_spec(installed[name])) and spec.origin:
            todo |= imports(ast.parse(Path(spec.origin).read_text()))
        else:
            raise ValueError(f"task {name!r}: no module under {folder} defines it and no installed package adds it")
    while todo:
        path = todo.pop()
        if path not in files and path in trees:
            files.add(path)
            todo |= imports(trees[path])
    return sorted(files)


def source_files(stage: str, cfg, package: Path = PACKAGE) -> list[Path]:
    """The library files `stage` runs for the study `cfg`: the common code, the code of the tasks
    it names, and the stage's own (rankone.stages.STAGES)."""
    files: list[Path] = []
    for name in (*COMMON, *STAGES[stage].sources):
        path = package / name
        if path.is_dir():
            files += sorted(path.rglob("*.py"))
        elif path.exists():
            files.append(path)
    return files + task_files(study_tasks(cfg), package)


def source_digest(stage: str, cfg, package: str | Path = PACKAGE) -> str:
    """Hash of the files `stage` runs for the study `cfg` under `package` (the checkout's
    src/rankone)."""
    package = Path(package)
    h = hashlib.sha256()
    for path in source_files(stage, cfg, package):
        h.update(path.relative_to(package).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
