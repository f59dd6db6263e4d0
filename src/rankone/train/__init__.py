"""Trainers, one module per regime, side by side: `TRAINERS[regime](cfg, run, ...)`.

`TRAINERS` imports the trainers on first use, so the step's parts (rankone.train.learner, .batch,
.pg, .distributed) load without the stages a trainer reaches (rollouts, tasks, data): what
scripts/gpu-check imports on a GPU box is only what it names."""


def __getattr__(name: str):
    if name == "TRAINERS":
        from rankone.train import rl, sft

        return {"rl": rl.train, "sft": sft.train}
    raise AttributeError(f"module 'rankone.train' has no attribute {name!r}")
