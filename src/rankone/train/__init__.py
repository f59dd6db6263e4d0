"""Trainers, one module per regime, side by side: `TRAINERS[regime](cfg, run, ...)`.

`TRAINERS` imports the trainers on first use, so the step's parts (rankone.train.learner, .batch,
.pg, .distributed) load without the stages a trainer reaches (rollouts, tasks, data): what
scripts/gpu-check imports on a GPU box is only what it names."""


def rl_trainer(cfg, *args, **kwargs):
    """The RL trainer `rl.trainer` names (rankone.objectives.TRAINERS): rankone's own, or TRL's."""
    from rankone.objectives import TRAINERS

    return TRAINERS[cfg.rl.trainer].load()(cfg, *args, **kwargs)


def __getattr__(name: str):
    if name == "TRAINERS":
        from rankone.train import sft

        return {"rl": rl_trainer, "sft": sft.train}
    raise AttributeError(f"module 'rankone.train' has no attribute {name!r}")
