"""The RL trainer's named choices, looked up by name as tasks (rankone.tasks.TASKS), models
(rankone.presets.PRESETS) and rollout engines (rankone.engines.ENGINES) are: the baseline
advantages are measured from (`rl.baseline`), the loss the update minimises (`rl.loss`) and the
trainer that runs the step (`rl.trainer`).

The registries hold names, help and where each choice's code lives (rankone.registry.Entry; the
code is in rankone.train.pg), not the code: it imports torch, which the config checks and the DAG
build never need. A new choice is one class in rankone.train.pg and one line here; the config
reference lists these lines (`rankone schema --markdown`), and a config naming anything else
fails at load with the known names.
"""

from __future__ import annotations

from rankone.registry import Entry

BASELINES = {
    "group": Entry(
        "rankone.train.pg:group_mean",
        "the mean reward of the sample's own group (the original runs; a group whose rewards are all equal "
        "carries no gradient)",
    ),
    "batch": Entry(
        "rankone.train.pg:batch_mean",
        "the mean reward of every sample the step drew (each rollout call's, under the variance filter's refills)",
    ),
    "fixed": Entry("rankone.train.pg:fixed_value", "a constant, rl.baseline_value (0.5 suits a 0/1 reward)"),
    "running": Entry(
        "rankone.train.pg:running_mean",
        "an exponential moving average of earlier steps' mean rewards (weight rl.baseline_decay on the old "
        "value; rl.baseline_value before the first step); never the current step's own rewards",
    ),
}

LOSSES = {
    "pg": Entry(
        "rankone.train.pg:ImportanceSampledPG",
        "importance-sampled policy gradient: -sum over tokens of (p_learner / p_sampler) x advantage, averaged "
        "over the episodes of groups with signal (the original runs)",
    ),
    "grpo": Entry(
        "rankone.train.pg:GRPO",
        "GRPO: advantages divided by their group's reward std (+1e-4), each sequence's tokens averaged, then the "
        "sequences",
    ),
    "dapo": Entry(
        "rankone.train.pg:DAPO",
        "DAPO's token-level normalisation: the sum over tokens divided by the step's tokens in groups with "
        "signal, so long completions weigh by their length",
    ),
    "ppo": Entry(
        "rankone.train.pg:PPOClip",
        "PPO's clipped ratio: min(ratio x A, clip(ratio, 1 - rl.clip_epsilon, 1 + rl.clip_epsilon) x A), with "
        "rl.epochs passes over each batch",
    ),
}

TRAINERS = {
    "rankone": Entry("rankone.train.rl:train", "rankone's own trainer (rankone.train.rl), every choice and lever"),
    "trl": Entry(
        "rankone.train.trl_grpo:train",
        "TRL's GRPOTrainer with its knobs set to rankone's algorithm (the cross-check; FullFT and LoRA, losses pg, "
        "grpo and dapo, the group baseline, no levers, the hf engine; docs/protocol.md maps the knobs)",
    ),
}

# rl.loss -> TRL's (loss_type, scale_rewards) under rl.trainer trl. rankone's pg has no TRL twin:
# "dr_grpo" is the nearest, the same sum of ratio x advantage over tokens over a normaliser constant
# in the step (all sequences x max_completion_length, where pg counts the episodes with signal).
TRL_LOSSES = {"pg": ("dr_grpo", "none"), "grpo": ("grpo", "group"), "dapo": ("dapo", "none")}

__all__ = ["BASELINES", "LOSSES", "TRAINERS", "TRL_LOSSES"]
