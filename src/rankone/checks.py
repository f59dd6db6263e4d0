"""A study's config checked against the rest of rankone and the machine: its tasks are
registered and their params valid, its rollout engine, RL baseline and RL loss are registered, its models are presets
or local checkpoints, a CUDA device it asks for is there, the tiny models it builds fit its methods and rollout engine,
and its output folders can take files.

rankone.config is the schema alone: it imports nothing else from rankone and touches no
file, so anything may load a config. The CLI and the workflow load a study through
`load` / `validate` here, which run the schema and then these checks; bad input fails there,
before any job, with the field it names.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from rankone import config
from rankone.config import SUPPORTED_HEAD_SIZES, ConfigError, StudyConfig, format_errors, lora_rank
from rankone.engines import ENGINES
from rankone.objectives import BASELINES, LOSSES, TRAINERS, TRL_LOSSES
from rankone.presets import PRESETS, TinyPreset, hub_shape, preset
from rankone.tasks import TASKS, answers_of, task_of


class _Invalid(Exception):
    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")


def validate(data: dict, source: str = "config") -> StudyConfig:
    """The schema (rankone.config.validate), then every check below. The tasks are checked first,
    as fields are before the rules across fields: a study naming an unknown task hears that, not
    what a rule about its task's settings makes of it."""
    tasks = data.get("tasks") if isinstance(data, dict) else None
    for regime, entry in (tasks or {}).items() if isinstance(tasks, dict) else ():
        try:
            task = config.TaskConfig.model_validate(entry)
        except ValidationError:
            continue  # the schema names what is wrong with the entry itself
        try:
            _task(regime, task)
        except _Invalid as err:
            raise ConfigError(f"invalid {source}: {err}") from None
    # `tasks` is a required field, so once the schema passes, each of its entries was checked above.
    return check(config.validate(data, source), source, tasks_checked=True)


def load(path: str | Path) -> StudyConfig:
    return validate(config.read_yaml(path), source=f"config {str(path)!r}")


def check(cfg: StudyConfig, source: str = "config", tasks_checked: bool = False) -> StudyConfig:
    """`cfg`, or a ConfigError naming the first field that does not hold (`tasks_checked`: its
    task entries passed `_task` already, as in `validate`)."""
    try:
        if not tasks_checked:
            _tasks(cfg)
        _engine(cfg)
        _objectives(cfg)
        _trl(cfg)
        _explore(cfg)
        _device(cfg)
        _models(cfg)
        _tiny_shapes(cfg)
        _capacity_tables(cfg)
        for field in ("results_dir", "reports_dir"):
            _writable(field, getattr(cfg, field))
    except _Invalid as err:
        raise ConfigError(f"invalid {source}: {err}") from None
    return cfg


def _tasks(cfg: StudyConfig) -> None:
    for regime, task in cfg.tasks.items():
        _task(regime, task)


def _task(regime: str, task: config.TaskConfig) -> None:
    where = f"tasks.{regime}"
    if task.name not in TASKS:
        raise _Invalid(where, f"unknown task {task.name!r}; known tasks: {', '.join(sorted(TASKS))}")
    try:
        TASKS[task.name].Params.model_validate(task.params)
    except ValidationError as err:
        raise _Invalid(where, f"params of task {task.name!r}: {format_errors(err)}") from None
    if task.confidence and TASKS[task.name].stores_table:
        raise _Invalid(
            where,
            f"task {task.name!r}: confidence is not supported on a table task (its bits-stored "
            "estimator scores the bare answer)",
        )


def _engine(cfg: StudyConfig) -> None:
    if cfg.rollout.engine not in ENGINES:
        known = ", ".join(f"{name} ({engine.about})" for name, engine in ENGINES.items())
        raise _Invalid("rollout.engine", f"unknown rollout engine {cfg.rollout.engine!r}; known: {known}")


def _rl_sections(cfg: StudyConfig) -> dict[str, dict]:
    """The study's RL settings and each lever variant's changes to them, by where they are written."""
    sections = {"rl": cfg.rl.model_dump()}
    if cfg.levers is not None:
        sections |= {f"levers.variants.{name}": changes for name, changes in cfg.levers.variants.items()}
    return sections


def _objectives(cfg: StudyConfig) -> None:
    """rl.baseline and rl.loss, in the study and in each lever that sets them, are registered names."""
    for where, rl in _rl_sections(cfg).items():
        for field, registry in (("baseline", BASELINES), ("loss", LOSSES), ("trainer", TRAINERS)):
            if field in rl and rl[field] not in registry:
                known = "; ".join(f"{name} ({choice.about})" for name, choice in registry.items())
                raise _Invalid(f"{where}.{field}", f"unknown {field} {rl[field]!r}; known: {known}")


# What TRL's GRPOTrainer cannot be set to do (rl.trainer trl): the RL field and the value it must keep.
TRL_KEEPS = {
    "baseline": "group",
    "advantage_sign": "both",
    "reward": "task",
    "variance_filter": False,
    "calibration_alpha": 0.0,
    "truncated_is": None,
    "entropy_coef": 0.0,
    "explore": 0.0,
}


def _trl(cfg: StudyConfig) -> None:
    """rl.trainer trl: only what TRL's GRPOTrainer does (rankone.train.trl_grpo)."""
    if cfg.rl.trainer != "trl" or "rl" not in cfg.regimes:
        return
    if cfg.rl.loss not in TRL_LOSSES:
        raise _Invalid("rl.loss", f"rl.trainer trl runs losses {', '.join(TRL_LOSSES)}, not {cfg.rl.loss!r}")
    for field, value in TRL_KEEPS.items():
        if getattr(cfg.rl, field) != value:
            raise _Invalid(f"rl.{field}", f"rl.trainer trl has no such choice: keep {field} {value!r}")
    if cfg.rollout.engine != "hf":
        raise _Invalid("rollout.engine", "rl.trainer trl samples with TRL's own generate: use engine hf")
    if cfg.levers is not None:
        raise _Invalid("levers", "rl.trainer trl runs no levers: they are rankone's trainer's")
    other = [m for m in cfg.methods if m in config.CONTROL_METHODS or config.method_kind(m) not in ("fullft", "lora")]
    if other:
        raise _Invalid("methods", f"rl.trainer trl trains FullFT and LoRA only, not {', '.join(other)}")


def _explore(cfg: StudyConfig) -> None:
    """rl.explore, in the study or in a lever variant, draws from every answer the RL task can have: a
    task that can list them."""
    if "rl" not in cfg.regimes:
        return
    spec = cfg.tasks["rl"]
    asking = [where for where, rl in _rl_sections(cfg).items() if rl.get("explore")]
    if asking and not answers_of(spec):  # the task's answers listed once, whichever sections ask
        raise _Invalid(
            f"{asking[0]}.explore", f"task {spec.name!r} cannot list its answers (Task.answer_space): no floor"
        )


def _device(cfg: StudyConfig) -> None:
    if cfg.device == "cuda":
        from rankone.device import resolve  # torch: only for a study that asks for CUDA

        try:
            resolve(cfg.device)
        except ValueError as err:
            raise _Invalid("device", str(err)) from None


def _models(cfg: StudyConfig) -> None:
    for name, local in cfg.local_models.items():
        path = local if isinstance(local, str) else local.path
        if name in PRESETS:
            raise _Invalid("local_models", f"{name!r} is already a preset name; pick another name for the local model")
        if not (Path(path) / "config.json").is_file():
            raise _Invalid("local_models", f"{name}: no transformers checkpoint at {path!r} (missing config.json)")
    for name, hub in cfg.hub_models.items():
        if name in PRESETS or name in cfg.local_models:
            raise _Invalid("hub_models", f"{name!r} is already a preset or local model name; pick another name")
        if name in cfg.models:
            try:
                hub_shape(hub.repo_id, hub.revision)
            except (OSError, KeyError, ValueError) as err:
                raise _Invalid(
                    f"hub_models.{name}",
                    f"no config.json for {hub.repo_id}@{hub.revision} in the hub cache or on the hub "
                    f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'offline?'})",
                ) from None
    for replica in cfg.models:
        m = config.architecture_of(replica)
        if m not in PRESETS and m not in cfg.local_models and m not in cfg.hub_models:
            raise _Invalid(
                "models",
                f"unknown model {m!r}; known models: {', '.join(sorted(PRESETS))}, or add it by name under "
                "hub_models ({repo_id, revision}) or local_models (a checkpoint folder)",
            )
        if replica != m and not isinstance(PRESETS.get(m), TinyPreset):
            raise _Invalid(
                "models",
                f"{replica!r} is a replica of {m!r}, but only a warm-started tiny preset has replicas "
                "(a pretrain seed); a checkpoint's weights are the same every time",
            )
    base_models = cfg.confirmation.base_models if cfg.confirmation else 1
    for m in cfg.models if base_models > 1 else []:
        if m != config.architecture_of(m):
            raise _Invalid(
                "confirmation.base_models",
                f"model {m!r} is a replica already; list its model once and base_models adds the replicas",
            )
        if not isinstance(PRESETS.get(m), TinyPreset):
            raise _Invalid(
                "confirmation.base_models",
                f"{m!r} is not warm-started here, so its replicas would be the same model; use base_models: 1",
            )


def _tiny_shapes(cfg: StudyConfig) -> None:
    """`architecture` shapes the tiny presets only; a real checkpoint brings its own shapes."""
    if not any(isinstance(preset(m, cfg.local_models, cfg.hub_models), TinyPreset) for m in cfg.models):
        return
    if cfg.rollout.engine == "vllm" and cfg.architecture.head_dim not in SUPPORTED_HEAD_SIZES:
        raise _Invalid(
            "rollout.engine",
            f"'vllm' needs a head size in {SUPPORTED_HEAD_SIZES}; architecture gives "
            f"{cfg.architecture.head_dim} (hidden_size / num_attention_heads)",
        )
    for m in cfg.methods + (cfg.capacity.methods if cfg.capacity else []):  # levers' are the study's
        r = lora_rank(m)
        if r is None:
            continue
        width = min(min(shape) for shape in cfg.adapted_shapes(m).values())
        if r > width:
            raise _Invalid("methods", f"{m!r}: rank {r} is larger than the narrowest adapted layer (width {width})")


def _capacity_tables(cfg: StudyConfig) -> None:
    """Each capacity size is a valid table of the SFT task (the schema checked that it is facts)."""
    if cfg.capacity is None:
        return
    sft = cfg.tasks["sft"]
    for n in cfg.capacity.n_facts:
        try:
            task_of(sft).Params.model_validate({**sft.params, **cfg.capacity_params(n)})
        except ValidationError as err:
            raise _Invalid("capacity.n_facts", f"{n}: {format_errors(err)}") from None


def _writable(field: str, folder: str) -> None:
    """Whether the folder (or its nearest existing parent) can take files, without writing one.
    Root passes `os.access` everywhere, so a folder without any write bit (/proc) or on a
    read-only mount is refused too."""
    existing = Path(folder).absolute()
    while not existing.exists():
        existing = existing.parent
    mode = existing.stat().st_mode
    if not (
        existing.is_dir()
        and os.access(existing, os.W_OK)
        and mode & 0o222
        and not os.statvfs(existing).f_flag & os.ST_RDONLY
    ):
        raise _Invalid(field, f"cannot write under {folder!r} ({existing} is not a writable folder)")
