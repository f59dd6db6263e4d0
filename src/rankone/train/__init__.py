"""Trainers, one module per regime, side by side: `TRAINERS[regime](cfg, run, ...)`."""

from rankone.train import rl, sft

TRAINERS = {"rl": rl.train, "sft": sft.train}
