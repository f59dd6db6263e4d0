"""The study configuration: one typed model that mirrors config/*.yaml.

Validated once, at load: a bad value fails with the dotted field name and what is
allowed. `workflow/schemas/config.schema.yaml` is generated from this model
(`rankone schema`), so the two cannot drift.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

# fullft; lora-r<rank> with an optional layer scope: -attn (attention only), -mlp (MLP only), or one
# projection of every block, by its module name (-o_proj: the attention output alone; a rank-1 adapter
# with fewer parameters, for a capacity the crossover's RL runs can reach);
# tinylora-u<u>: TinyLoRA with a trainable vector of u entries (shared by every adapted layer by default);
# temperature: one trained scalar that scales the logits (a learned temperature, a sharpening control);
# or majority: FullFT RL rewarded for agreeing with its group's majority answer, which reads no answer
# (entropy minimisation, a sharpening control; RL only, on FullFT's lr grid).
# The workflow's `method` wildcard is this expression too (workflow/rules/common.smk).
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
METHOD_REGEX = (
    rf"fullft|lora-r([1-9][0-9]*)(?:-(attn|mlp|{'|'.join(PROJECTIONS)}))?|tinylora-u([1-9][0-9]*)|temperature|majority"
)
# The trained sharpening controls (analysis.sharpening): methods of the grid, judged like any, never contenders.
CONTROL_METHODS = {"temperature": "learned temperature", "majority": "majority-vote reward"}
METHOD_PATTERN = re.compile(rf"^({METHOD_REGEX})$")
SCOPES = {"attn": "attention", "mlp": "mlp", **{p: p for p in PROJECTIONS}}
# A base-model replica: "<model>@<k>" (k >= 1) warm-starts the same tiny preset again with pretrain
# seed `seed + k` ("<model>" is replica 0). The analysis pools a model's replicas (pooled.csv).
REPLICA = re.compile(r"^(?P<model>[A-Za-z0-9._-]+)@(?P<k>[1-9][0-9]*)$")
SCOPE_LAYERS = {
    "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "mlp": ("gate_proj", "up_proj", "down_proj"),
    **{p: (p,) for p in PROJECTIONS},
}

# vLLM's CPU attention kernels support these head sizes only (the config refuses others with engine vllm).
SUPPORTED_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


class ConfigError(ValueError):
    """A study config that cannot be run; the message names the field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArchitectureConfig(Strict):
    hidden_size: int = Field(128, gt=0, description="Width of the residual stream.")
    intermediate_size: int = Field(256, gt=0, description="Width of the MLP.")
    num_hidden_layers: int = Field(2, gt=0, description="Transformer blocks.")
    num_attention_heads: int = Field(4, gt=0, description="Query heads.")
    num_key_value_heads: int = Field(2, gt=0, description="Key/value heads (grouped-query attention).")

    @model_validator(mode="after")
    def _heads_divide(self) -> ArchitectureConfig:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be divisible by num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be divisible by num_key_value_heads")
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(d_in, d_out) of every linear layer LoRA adapts in one block ("all-linear")."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        m = self.intermediate_size
        return {
            "q_proj": (h, h),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (h, h),
            "gate_proj": (h, m),
            "up_proj": (h, m),
            "down_proj": (m, h),
        }


class PretrainOverride(Strict):
    steps: int | None = Field(None, gt=0, description="This model's warm-start steps.")
    batch_size: int | None = Field(None, gt=0, description="This model's sequences per pretraining step.")
    lr: float | None = Field(None, gt=0, description="This model's warm-start learning rate.")
    corruption: float | None = Field(None, ge=0, lt=1, description="This model's share of corrupted answers.")
    stop_at_greedy: float | None = Field(None, gt=0, le=1, description="This model's warm-start stopping skill.")


class PretrainConfig(Strict):
    steps: int = Field(2000, gt=0, description="Optimizer steps of the warm-start on the synthetic corpus.")
    batch_size: int = Field(128, gt=0, description="Sequences per pretraining step.")
    lr: float = Field(1e-3, gt=0, description="AdamW learning rate of the warm-start (grad norm clipped at 1).")
    corruption: float = Field(
        0.5,
        ge=0,
        lt=1,
        description="Share of corpus answers replaced by random ones (keeps the base policy imperfect).",
    )
    eval_prompts: int = Field(256, gt=0, description="RL train prompts on which the base pass@1 is recorded.")
    stop_at_greedy: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Stop the warm-start at the first check (every check_every steps) at which the base's greedy "
        "accuracy on the eval_prompts RL train prompts reaches this; `steps` becomes the cap. Base models of one skill "
        "across pretrain seeds: at a fixed step count qwen3-tiny's skill depends on the seed (0.07 to 0.85 greedy at "
        "1,500 steps; docs/protocol.md). Val and test are never read. Off (null) by default.",
    )
    check_every: int = Field(50, gt=0, description="Warm-start steps between two stop_at_greedy checks.")
    sft_format_share: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Share of corpus sequences in the SFT task's format, drawn from an instance of that task with "
        "another seed (disjoint content): the base model knows the format, SFT must store new content.",
    )
    models: dict[str, PretrainOverride] = Field(
        default_factory=dict,
        description="Per-model overrides of steps, batch_size, lr, corruption and stop_at_greedy, by model name: two "
        "architectures "
        "need different warm-starts to reach the same base skill. A replica `<model>@<k>` takes its model's; a name "
        "the study does not list is ignored (a layered config may list fewer models).",
    )

    @field_validator("models")
    @classmethod
    def _by_model(cls, models: dict[str, PretrainOverride]) -> dict[str, PretrainOverride]:
        for name in models:
            if REPLICA.match(name):
                raise ValueError(f"{name!r} is a replica: overrides are by model ({architecture_of(name)!r})")
        return models

    def of(self, model: str) -> PretrainConfig:
        """The warm-start of one model: this section with the model's overrides applied."""
        over = self.models.get(architecture_of(model))
        changes = {k: v for k, v in over.model_dump().items() if v is not None} if over else {}
        return self.model_copy(update={**changes, "models": {}})


class TaskConfig(Strict):
    name: str = Field(description="Registered task name (rankone.tasks).")
    params: dict = Field(
        default_factory=dict,
        description="Task parameters, validated by the task's own model (each task's are listed under 'Tasks and "
        "their params' below).",
    )
    confidence: bool = Field(
        False,
        description="Completions state a confidence after the answer (`answer:d`, p = d/9); the base model is "
        "warm-started with uninformative confidences and the answer checker ignores them (rankone.tasks.confidence).",
    )


class RolloutConfig(Strict):
    engine: str = Field(
        "hf",
        description="Rollout engine, a name in the registry rankone.engines: hf (transformers, generate's sampling "
        "loop) or vllm (vllm.LLM with live adapters).",
    )
    n_prompts: int = Field(128, gt=0, description="Prompts per split for the base-policy rollout statistics.")
    samples_per_prompt: int = Field(8, ge=2, description="Samples per prompt for pass@k and zero-variance share.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature.")
    max_new_tokens: int = Field(6, gt=0, description="Completion length cap.")
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="vLLM on CUDA: share of the GPU's memory vLLM may take (weights and KV cache). Unset: what "
        "the learner leaves while it samples, the GPU's free memory when the engine starts less the Adam moments "
        "the learner's first step adds (8 bytes a trained parameter) and plan.usable_share's headroom; vLLM "
        "sleeps during the update, so the update's activations and gradients need none of it. `rankone plan` "
        "prints the share and the sampling waves it gives. Ignored on the CPU.",
    )
    enforce_eager: bool | None = Field(
        None,
        description="vLLM: run eagerly (no CUDA graphs, no compilation). Unset: eager on the CPU (the CPU studies' "
        "bytes, no compile time), CUDA graphs on a GPU.",
    )
    prefix_caching: bool | None = Field(
        None,
        description="vLLM: reuse a prompt's KV cache for every sample of its group (one prefill per prompt, not per "
        "sample; reset after every FullFT weight sync). Unset: on on a GPU, off on the CPU (the CPU studies' bytes).",
    )
    max_num_seqs: int | None = Field(
        None,
        gt=0,
        description="vLLM: sequences decoded together. Unset: a whole RL step's (rl.prompts_per_step x "
        "rl.group_size), at least vLLM's own 256.",
    )


class RLConfig(Strict):
    steps: int = Field(60, gt=0, description="Policy-gradient steps (one batch of rollouts each).")
    prompts_per_step: int = Field(8, gt=0, description="Distinct prompts per step.")
    group_size: int = Field(8, ge=2, description="Samples per prompt; advantages are centred within a group.")
    entropy_coef: float = Field(
        0.0,
        ge=0,
        description="Entropy bonus: the loss minus this times the policy's mean entropy per sampled completion "
        "token (exact, over the vocabulary, at the sampling temperature), over every token of the step, those of "
        "groups without reward variance too: a group whose rewards are all equal carries no policy gradient but "
        "still keeps exploring. 0: off (the original runs).",
    )
    explore: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Exploration floor: each sample is replaced, with this probability (a seeded draw), by an answer "
        "drawn uniformly from every answer the task can have (the facts task's values), scored by the checker and "
        "learned from like a sample, without an importance correction. A policy sure of a wrong answer samples only "
        "it, so no baseline or entropy bonus gives that prompt a gradient; the floor still shows it the right one. "
        "Its rows' sampler log-probs are the learner's, so the freshness check reads the engine's rows. 0: off.",
    )
    max_logprob_gap: float = Field(
        1e-3, gt=0, description="Stop the run when the mean |sampler - learner| log-prob gap exceeds this."
    )
    log_every: int = Field(10, gt=0, description="Log a progress line every this many steps.")
    checkpoint_every: int = Field(25, gt=0, description="Save a resumable checkpoint every this many steps.")
    format_collapse_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Flag a run (run.json format_collapse) once the share of completions the answer checker cannot "
        "parse, averaged over the last format_collapse_window steps, rises above this.",
    )
    format_collapse_window: int = Field(10, gt=0, description="Steps averaged for the format-collapse flag.")
    advantage_sign: Literal["both", "positive", "negative"] = Field(
        "both",
        description="Which samples the update learns from: both signs of advantage (plain RL), only positive ones "
        "(PSR) or only negative ones (NSR).",
    )
    reward: Literal["task", "format", "random", "majority"] = Field(
        "task",
        description="What the trainer rewards: the task's answer checker; format only (1 when the checker can parse "
        "an answer, right or wrong); a fair coin per sample, independent of the completion; or agreement with the "
        "group's most common answer, reading no reference answer (entropy minimisation: the sharpening control). "
        "The last three are controls. Evaluation always scores with the task's checker.",
    )
    variance_filter: bool = Field(
        False,
        description="Drop prompts whose group rewards are all equal before the update and refill the batch from "
        "fresh prompts, until prompts_per_step groups carry signal. The run then ends when it has sampled the "
        "episodes plain RL samples in `steps` steps (steps x prompts_per_step x group_size), so both are compared "
        "at equal episodes.",
    )
    gap_noise_factor: float = Field(
        2.0,
        ge=1,
        description="Freshness check: a run stops when the mean sampler/learner log-prob gap exceeds max_logprob_gap "
        "or this many times the noise floor, the gap measured at step 0 (sampler and learner then hold the same "
        "weights, so it is the rounding noise of the dtype and engine alone: ~1e-6 in fp32, ~4e-2 in bf16).",
    )
    max_noise_floor: float = Field(
        0.1,
        gt=0,
        description="Freshness check: the step-0 gap (same weights on both sides) may be at most this; above it "
        "the engine is not serving the learner's weights and the run stops at step 0.",
    )
    truncated_is: float | None = Field(
        None,
        gt=0,
        description="Truncated importance sampling (Yao et al. 2025): cap the sampler/learner ratio that weights each "
        "token's gradient at this value; unset (default) leaves it uncapped.",
    )
    micro_batch: int | None = Field(
        None,
        gt=0,
        description="Sequences per forward/backward pass; gradients accumulate over the step with one normaliser "
        "for the whole step. Must divide prompts_per_step x group_size; unset: the whole step at once.",
    )
    calibration_alpha: float = Field(
        0.0,
        ge=0,
        description="Calibration lever: add -calibration_alpha * (p - y)^2 (a Brier term; p the stated confidence, y "
        "whether the answer is right) to the training reward. Needs tasks.rl.confidence; 0 turns it off.",
    )
    trainer: str = Field(
        "rankone",
        description="Who runs the RL step: a name in the registry rankone.objectives.TRAINERS (rankone, trl; the "
        "config reference lists what each is). The run folder and the evaluation are rankone's either way.",
    )
    baseline: str = Field(
        "group",
        description="What advantages are measured from: a name in the registry rankone.objectives.BASELINES (group, "
        "batch, fixed, running; the config reference lists what each is).",
    )
    baseline_value: float = Field(
        0.5, description="The fixed baseline's value (baseline fixed); the running mean's value before its first step."
    )
    baseline_decay: float = Field(
        0.9,
        ge=0,
        lt=1,
        description="baseline running: the weight of the old value when a step's mean reward updates the running mean.",
    )
    loss: str = Field(
        "pg",
        description="The loss the update minimises: a name in the registry rankone.objectives.LOSSES (pg, grpo, dapo, "
        "ppo; the config reference lists what each is).",
    )
    clip_epsilon: float = Field(
        0.2, gt=0, lt=1, description="loss ppo: the ratio is clipped to [1 - clip_epsilon, 1 + clip_epsilon]."
    )
    epochs: int = Field(
        1,
        gt=0,
        description="Optimizer steps per batch of rollouts, each a pass over the whole batch (PPO's epochs; past the "
        "first the ratio moves off 1, which only loss ppo clips). The freshness check reads the first pass.",
    )

    @model_validator(mode="after")
    def _micro_batch_divides(self) -> RLConfig:
        check_micro_batch(self.micro_batch, self.prompts_per_step * self.group_size, "prompts_per_step x group_size")
        return self

    @property
    def episode_budget(self) -> int:
        return self.steps * self.prompts_per_step * self.group_size


class SFTConfig(Strict):
    steps: int = Field(200, gt=0, description="Optimizer steps.")
    batch_size: int = Field(64, gt=0, description="Examples per step.")
    log_every: int = Field(25, gt=0, description="Log a progress line every this many steps.")
    checkpoint_every: int = Field(100, gt=0, description="Save a resumable checkpoint every this many steps.")
    micro_batch: int | None = Field(
        None,
        gt=0,
        description="Examples per forward/backward pass; gradients accumulate over the step with one normaliser "
        "(the step's answer tokens). Must divide batch_size; unset: the whole batch at once.",
    )

    @model_validator(mode="after")
    def _micro_batch_divides(self) -> SFTConfig:
        check_micro_batch(self.micro_batch, self.batch_size, "batch_size")
        return self


def check_micro_batch(micro_batch: int | None, batch: int, what: str) -> None:
    if micro_batch is not None and (micro_batch > batch or batch % micro_batch):
        raise ValueError(f"micro_batch {micro_batch} must divide the step's {batch} sequences ({what})")


class LoraConfig(Strict):
    alpha: float = Field(32, gt=0, description="LoRA alpha; the update is scaled by alpha / r.")
    target_modules: Literal["all-linear", "attention", "mlp"] = Field(
        "all-linear", description="Which linear layers get adapters (LoRA and TinyLoRA)."
    )
    tinylora_r: int = Field(
        2,
        gt=0,
        description="TinyLoRA: rank of the frozen SVD of each base weight that its update lives in "
        "(delta W = U_r S_r^1/2 R S_r^1/2 V_r^T, R = sum_i v_i P_i with fixed random P_i; the paper uses 2).",
    )
    tinylora_weight_tying: float = Field(
        1.0,
        ge=0,
        le=1,
        description="TinyLoRA: share of adapted layers that share one trainable vector v (1.0: "
        "all share one, so tinylora-u<u> trains u parameters in all; 0.0: one v per layer).",
    )


class LRGrid(Strict):
    fullft: list[float] = Field(description="Learning rates for full fine-tuning.")
    lora: list[float] = Field(description="Learning rates for every LoRA rank.")
    tinylora: list[float] | None = Field(
        None, description="Learning rates for every TinyLoRA size (needed when a tinylora-u<u> method is listed)."
    )
    temperature: list[float] | None = Field(
        None,
        description="Learning rates for the learned temperature; the temperature method runs in each regime "
        "whose grid lists them (at least one, when it is listed).",
    )

    @field_validator("fullft", "lora", "tinylora", "temperature")
    @classmethod
    def _grid(cls, grid: list[float] | None) -> list[float] | None:
        if grid is None:
            return grid
        if not grid:
            raise ValueError("learning-rate grid is empty")
        if any(lr <= 0 for lr in grid):
            raise ValueError(f"learning rates must be > 0, got {grid}")
        if len(set(grid)) != len(grid):
            raise ValueError(f"duplicate learning rates in {grid} (runs would share a name)")
        return grid


class EvaluateConfig(Strict):
    n_prompts: int = Field(128, gt=0, description="Prompts per split (val, test) at most.")
    samples_per_prompt: int = Field(4, gt=0, description="Samples per prompt for sampled pass@1.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature for pass@1 and mean reward.")
    log_samples: bool = Field(
        True,
        description="Keep what each run sampled on the test split at every evaluated checkpoint: one JSON line "
        "per sample (run, step, prompt, reference answer, completion, reward) in samples.jsonl beside the evaluate "
        "stage's "
        "metrics.jsonl (as lm-eval's --log_samples and TRL's log_completions keep theirs).",
    )
    batch_prompts: int = Field(
        256,
        gt=0,
        description="Prompts per call of the rollout engine (memory: each call samples "
        "batch_prompts x samples_per_prompt sequences).",
    )
    at: list[float] = Field(
        default_factory=lambda: [0.6, 0.7, 0.8, 0.9, 1.0],
        min_length=1,
        description="The late checkpoints every run is evaluated at, as fractions of its steps (increasing, in "
        "(0, 1]; 1.0 is the final weights; see tail_steps). Training saves the weights there; a run's tail score is "
        "the mean over them (analysis.score), and the report shows the verdict at each one.",
    )

    @field_validator("at")
    @classmethod
    def _at(cls, at: list[float]) -> list[float]:
        if any(not 0 < f <= 1 for f in at) or any(b <= a for a, b in zip(at, at[1:])):
            raise ValueError(f"{at}: fractions of the steps must be increasing and in (0, 1]")
        return at


class SharpeningConfig(Strict):
    """Sharpening or learning: what the RL regime's base model can already do, and how much of a
    trained run's gain a change of temperature alone gives (docs/protocol.md)."""

    samples: int = Field(
        64, gt=0, description="Samples per prompt for the pass@k profile, on the whole val and test splits."
    )
    pass_at: list[int] = Field(
        default_factory=lambda: [1, 4, 16, 64],
        min_length=1,
        description="The k of pass@k in the profile of the base model and of every RL run's final weights.",
    )
    temperatures: list[float] = Field(
        default_factory=lambda: [0.25, 0.5, 0.75, 1.0, 1.25],
        min_length=1,
        description="Sampling temperatures of the base-model control (no training): the one with the best val "
        "mean reward is the control at its tuned setting.",
    )

    @model_validator(mode="after")
    def _ks(self) -> SharpeningConfig:
        if any(k < 1 or k > self.samples for k in self.pass_at):
            raise ValueError(f"pass_at {self.pass_at}: each k must lie in 1..samples ({self.samples})")
        if any(t <= 0 for t in self.temperatures):
            raise ValueError(f"temperatures {self.temperatures}: each must be > 0")
        return self


def tail_steps(at: list[float], steps: int) -> list[int]:
    """The steps (counted from 1, after that many updates) that the fractions `at` of `steps` fall on."""
    return sorted({min(steps, max(1, round(f * steps))) for f in at})


class AnalysisConfig(Strict):
    parity_threshold: dict[Literal["rl", "sft"], float] = Field(
        default_factory=lambda: {"rl": 0.05, "sft": 0.1},
        description="Equivalence margin of the score (RL: mean reward; SFT: -NLL, nats/token), fixed before the "
        "run: parity when TOST rejects (the whole interval of the gap to FullFT inside +-margin) and the gap is "
        "not significant; worse/better need a significant gap beyond it (docs/protocol.md).",
    )
    greedy_margin: float = Field(
        0.05, gt=0, description="Equivalence margin of greedy accuracy (both regimes), fixed before the run."
    )
    confidence: float = Field(
        0.95,
        gt=0,
        lt=1,
        description="Confidence level of the interval over seeds; alpha = 1 - confidence for the difference test "
        "and alpha/2 a side for TOST.",
    )
    plateau_share: float = Field(
        0.2,
        gt=0,
        le=0.5,
        description="Plateau test: the slope of each method's curve at its best lr over the last twice this "
        "share of steps, as the gain over this share; at a plateau its interval lies below the parity margin.",
    )
    lr_extension: int = Field(
        0,
        ge=0,
        le=8,
        description="Edge extension: up to this many learning rates added past a grid's edge per method, one a "
        "round. After the sweep, a method whose best lr on val sits on an edge of the lrs it tried runs the next "
        "lr past it (that edge's spacing continued) on the sweep's seeds, and select chooses again; best_lr.csv "
        "says how far each grid was extended and whether a best lr is still on an edge (the cap was hit). 0: off.",
    )
    bits_per_param: float = Field(2.0, gt=0, description="Reference capacity line, bits per trainable parameter.")
    early_steps: int = Field(
        10, gt=0, description="Steps over which learning curves of different ranks at one lr are compared."
    )
    score: Literal["tail", "final"] = Field(
        "tail",
        description="A run's primary score, fixed before the run: tail, the mean over the checkpoints of "
        "evaluate.at (a verdict that a single stop step can flip is not an answer), or final, the last weights' "
        "alone. Best learning rates are chosen on it (val), and verdicts judged on it (test).",
    )


class Grid(Strict):
    """Checks shared by every config that lists methods and seeds (the study, its capacity section)."""

    @field_validator("methods", check_fields=False)
    @classmethod
    def _methods(cls, methods: list[str]) -> list[str]:
        return check_methods(methods)

    @field_validator("seeds", check_fields=False)
    @classmethod
    def _seeds(cls, seeds: list[int]) -> list[int]:
        return check_unique(seeds, "seeds")


class HubModelConfig(Strict):
    repo_id: str = Field(description="The model's Hugging Face hub id, e.g. Qwen/Qwen3-0.6B-Base.")
    revision: str = Field(
        min_length=1,
        description="The commit (or tag) to load: a study is pinned to it. Its config.json gives the shape "
        "`rankone plan` sizes jobs from (through the hub cache when it holds it).",
    )
    chat: bool = Field(
        False,
        description="An instruct model: prompts go through its tokenizer's chat template (kept by the models stage).",
    )


class LocalModelConfig(Strict):
    path: str = Field(description="A folder holding a transformers checkpoint (config.json).")
    chat: bool = Field(
        False,
        description="An instruct model: prompts go through its tokenizer's chat template (kept by the models stage).",
    )


class ConfirmationConfig(Strict):
    seeds: dict[Literal["rl", "sft"], list[int]] = Field(
        description="Per regime, the fresh seeds each method's best lr is rerun on after the sweep (the sweep's "
        "`seeds` choose the lr on val); that regime's verdicts are judged on these alone, so the seeds that choose "
        "never judge. A regime not listed (or given []) is judged on the sweep's seeds."
    )
    base_models: int = Field(
        default=1,
        ge=1,
        description="Base models the confirmation runs are spread over, per model: 1 runs them on the study's base "
        "model alone; K > 1 runs every confirmation seed also on the replicas `<model>@1` .. `<model>@<K-1>` (each "
        "warm-started again with pretrain seed `seed + k`), at the lr the sweep chose on the study's own base model. "
        "The analysis then judges each model on its base models' mean gaps (pooled.csv: a two-level interval, base "
        "model then seed, and the share of the variance that comes from the base model). Warm-started models only.",
    )

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: dict[str, list[int]]) -> dict[str, list[int]]:
        for regime, values in seeds.items():
            if len(values) == 1:
                raise ValueError(
                    f"confirmation.seeds.{regime}: at least 2 seeds (an interval needs two), or [] for none"
                )
            check_unique(values, f"confirmation.seeds.{regime}")
        return seeds


class CapacityConfig(Grid):
    n_facts: list[int] = Field(
        min_length=1,
        description="Sizes of the facts table (keys) to store, smallest first; each is its own SFT sub-study under "
        "results/<experiment>/capacity/n<size>/ on the study's base models.",
    )
    methods: list[str] = Field(
        default_factory=lambda: ["fullft", "lora-r1", "lora-r4", "lora-r16", "lora-r64"],
        description="Methods trained at every size (fullft and/or lora-r<rank>).",
    )
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1, description="Training seeds per size.")
    probes: int = Field(
        128, gt=0, description="Facts probed per split (val picks the lr, test is reported); each size needs 2x this."
    )
    regimes: list[Literal["rl", "sft"]] = Field(
        default_factory=lambda: ["sft"],
        min_length=1,
        description="Regimes trained at every size: sft stores the table by SFT; rl too for the RL crossover (RL on "
        "the same table, rewarded for the value: tasks.rl must then be the facts task with tasks.sft's params).",
    )
    passes: dict[Literal["rl", "sft"], float] | None = Field(
        None,
        description="Per regime, how often each key is drawn over a run (RL: as a prompt, each with group_size "
        "samples; SFT: as an example), so the steps at each size are ceil(passes x size / keys per step) and "
        "every size gets the same training per key. A regime not listed runs its own steps at every size.",
    )
    learning_rates: Literal["grid", "chosen"] = Field(
        "grid",
        description="grid: every size sweeps the study's learning-rate grid. chosen: every size runs each method at "
        "the one lr the study's own select stage chose on val (the study's runs are then the lr pilot).",
    )

    @field_validator("passes")
    @classmethod
    def _passes(cls, passes: dict[str, float] | None) -> dict[str, float] | None:
        if passes and any(p <= 0 for p in passes.values()):
            raise ValueError(f"passes must be > 0, got {passes}")
        return passes

    @field_validator("n_facts")
    @classmethod
    def _sizes(cls, sizes: list[int]) -> list[int]:
        if any(n <= 0 for n in sizes):
            raise ValueError(f"table sizes must be > 0, got {sizes}")
        if sorted(set(sizes)) != sizes:
            raise ValueError(f"table sizes must be distinct and increasing, got {sizes}")
        return sizes


class TruncationConfig(Strict):
    ranks: list[int] | None = Field(
        None,
        description="Ranks k to which each FullFT RL weight update is cut before re-evaluation; default 1, 2, 4, ... "
        "up to the largest full rank. Full rank (the trained model itself) is always scored.",
    )

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, ranks: list[int] | None) -> list[int] | None:
        if ranks is not None and (any(k <= 0 for k in ranks) or sorted(set(ranks)) != ranks):
            raise ValueError(f"ranks must be positive, distinct and increasing, got {ranks}")
        return ranks


# A lever's name: a folder under results/<experiment>/levers/ and a wildcard in the workflow.
LEVER_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


class LeversConfig(Grid):
    variants: dict[str, dict] = Field(
        min_length=1,
        description="Lever name -> the `rl` fields it changes (e.g. psr: {advantage_sign: positive}). Each is an RL "
        "sub-study under results/<experiment>/levers/<name>/ on the study's base models, with its own learning-rate "
        "sweep, compared with the study's plain RL runs at equal episodes.",
    )
    methods: list[str] = Field(
        default_factory=lambda: ["fullft", "lora-r1"],
        description="Methods trained under every lever; each must be among the study's methods (the plain runs).",
    )
    seeds: list[int] = Field(
        default_factory=lambda: [0, 1, 2],
        min_length=1,
        description="Seeds per lever; each must be among the study's seeds (paired by seed with the plain runs).",
    )
    target_reward: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Training reward (task checker, mean over rl.format_collapse_window steps) whose first crossing "
        "counts the episodes and seconds a run took to reach it.",
    )

    @field_validator("variants")
    @classmethod
    def _variants(cls, variants: dict[str, dict]) -> dict[str, dict]:
        for name, changes in variants.items():
            if not LEVER_NAME.match(name):
                raise ValueError(f"lever name {name!r}: use lower-case letters, digits and '-' (a folder name)")
            if not isinstance(changes, dict) or not changes:
                raise ValueError(f"lever {name!r}: give the rl fields it changes, e.g. {{advantage_sign: positive}}")
            unknown = sorted(set(changes) - set(RLConfig.model_fields))
            if unknown:
                raise ValueError(f"lever {name!r}: {unknown} are not rl fields")
        return variants


class ResourceOverride(Strict):
    gpu: int | None = Field(None, ge=0, description="GPUs per job; unset: the stage's.")
    mem_mb: int | None = Field(None, gt=0, description="Memory per job in MB; unset: the stage's.")
    runtime: int | None = Field(None, gt=0, description="Wall-clock limit in minutes; unset: the stage's.")


METHOD_FAMILIES = ("fullft", "lora", "tinylora", "temperature")


class StageResources(Strict):
    gpu: int = Field(0, ge=0, description="GPUs per job (Snakemake resource `gpu`; SLURM --gpus).")
    mem_mb: int | None = Field(
        None, gt=0, description="Memory per job in MB (SLURM --mem); unset: the profile's default."
    )
    runtime: int | None = Field(
        None, gt=0, description="Wall-clock limit per job in minutes (SLURM -t); unset: the profile's default."
    )
    by_method: dict[Literal[METHOD_FAMILIES], ResourceOverride] = Field(  # type: ignore[valid-type]
        default_factory=dict,
        description="Per method family (fullft, lora, tinylora, temperature): what differs from the "
        "stage's numbers, for the jobs that train or load one method (train, evaluate, truncation, levers).",
    )
    by_model: dict[str, ResourceOverride] = Field(
        default_factory=dict,
        description="Per model: what differs from the stage's (and the method family's) "
        "numbers; a model's entry wins over its method family's.",
    )

    @model_validator(mode="after")
    def _overrides_have_a_default(self) -> StageResources:
        for where, overrides in (("by_method", self.by_method), ("by_model", self.by_model)):
            for name, o in overrides.items():
                for key in ("mem_mb", "runtime"):
                    if getattr(o, key) is not None and getattr(self, key) is None:
                        raise ValueError(
                            f"{where}.{name}.{key} is set but the stage's {key} is not: set the "
                            "stage's too (a job of another method or model needs a value)"
                        )
        return self

    def for_job(self, model: str | None = None, method: str | None = None) -> dict:
        """The resources of one job: the stage's, then its method family's, then its model's."""
        out = {"gpu": self.gpu, "mem_mb": self.mem_mb, "runtime": self.runtime}
        layers = [
            self.by_method.get(method_kind(method)) if method else None,
            self.by_model.get(model) if model else None,
        ]
        for o in layers:
            if o is not None:
                out.update(o.model_dump(exclude_none=True))
        return {k: v for k, v in out.items() if v is not None}


class PlanConfig(Strict):
    """What `rankone plan` assumes of the GPU and the data (scheduling only, never part of a result)."""

    gpu_memory_gb: float = Field(
        80, gt=0, description="Memory of one GPU in GB (an 80 GB A100 or H100; an H200 has 141)."
    )
    usable_share: float = Field(
        0.9,
        gt=0,
        le=1,
        description="Share of a GPU's memory a job may plan for (the rest: CUDA context, allocator fragmentation).",
    )
    gpu_peak_tflops: float = Field(
        989, gt=0, description="Dense bf16 peak of one GPU in TFLOP/s (NVIDIA's H100 SXM datasheet: 989; A100: 312)."
    )
    mfu: float = Field(
        0.2,
        gt=0,
        le=1,
        description="Model FLOP utilisation the hours are estimated at: the share of the peak a "
        "job sustains. RL alternates token-by-token sampling (memory-bound) with updates, so it sits well below "
        "pretraining's 0.4-0.5.",
    )
    prompt_tokens: int = Field(
        256, gt=0, description="Prompt length in tokens the estimates assume (RL and evaluation)."
    )
    sft_tokens: int = Field(512, gt=0, description="Tokens per SFT example the estimates assume.")


# Stages whose jobs load a model: the ones worth a GPU and a memory request.
RESOURCE_STAGES = ("models", "rollouts", "train", "evaluate", "truncation", "levers")


class StudyConfig(Grid):
    experiment: str = Field(pattern=r"^[A-Za-z0-9_-]+$", description="Name; outputs go under results/<experiment>/.")
    results_dir: str = Field("results", description="Root folder of stage outputs.")
    reports_dir: str = Field("reports", description="Root folder of published reports.")
    container: str = Field(
        "build/image/rankone-cpu.sif",
        description="The image every job runs in under `snakemake --sdm apptainer` "
        "(the Snakefile's `container:`): the CPU image `make image` builds, as a SIF file (`apptainer build "
        "build/image/rankone-cpu.sif build/image/rankone-cpu/`), or any image URI apptainer takes. Where jobs "
        "run, never part of a result.",
    )
    seed: int = Field(0, ge=0, description="Seed of data generation and model initialisation.")
    threads: int = Field(1, gt=0, description="Torch threads per job (jobs run in parallel under Snakemake).")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="Where every model and tensor of a job lives: auto (CUDA when torch sees it, else the "
        "CPU), cpu or cuda (an error where there is no CUDA). Each output's provenance records the device used.",
    )
    cpu_kernels: Literal["avx2", "portable", "native"] = Field(
        "avx2",
        description="CPU kernels: avx2 pins ATen's vector kernels, MKL (conditional numerical "
        "reproducibility) and oneDNN to AVX2 before torch loads, so that x86-64 machines with AVX2 or newer run the "
        "same kernels (rankone.io.CPU_KERNELS), but MKL honours its AVX2 branch on Intel CPUs alone (AMD runs its "
        "AUTO branch), so Intel and AMD machines may give different bytes. portable pins "
        "MKL to its COMPATIBLE branch, which both vendors run (RL training took 1.4x the CPU time here). native lets "
        "each library pick this CPU's fastest (AVX-512 where it has it), and other bytes. With dtype bfloat16 on a "
        "CPU use native: the AVX2 path has no bf16 instructions (a bf16 linear layer ran 9x slower pinned here). "
        "Each output's provenance records the CPU and the kernels it ran.",
    )
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="Compute dtype (bfloat16 for paper-scale models): bfloat16 runs every forward under "
        "autocast and loads weights that do not train in bf16, while FullFT keeps fp32 master weights and fp32 "
        "optimizer state and LoRA adapters stay fp32 (rankone.device).",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the backward pass (transformers' gradient checkpointing): "
        "less memory per sequence, about a third more compute per update.",
    )
    tracking: Literal["none", "trackio"] = Field(
        "none",
        description="Live tracking of every training run: `trackio` sends each step's metrics (the rows of the "
        "run's metrics.jsonl, as they are recorded) and seconds to trackio's local store (TRACKIO_DIR, default "
        "~/.cache/huggingface/trackio; offline), one trackio run per run, named by its path, in a project named "
        "after the experiment; `trackio show --project <experiment>` opens the dashboard. Never part of a result.",
    )
    resources: dict[Literal[RESOURCE_STAGES], StageResources] = Field(  # type: ignore[valid-type]
        default_factory=dict,
        description="Per-stage job resources (GPUs, memory, run time) for a cluster profile, per method family "
        "and model where they differ; scheduling only, never part of a result. `rankone plan` checks that each "
        "job fits them.",
    )
    plan: PlanConfig = Field(default_factory=PlanConfig)
    models: list[str] = Field(
        min_length=1,
        description="Model presets (rankone.models.PRESETS) or names from hub_models or local_models; "
        "`<tiny preset>@<k>` "
        "(k >= 1) is another base model of the same preset, warm-started with pretrain seed seed + k (a "
        "replica: the analysis pools a model's replicas, pooled.csv).",
    )
    hub_models: dict[str, HubModelConfig] = Field(
        default_factory=dict,
        description="Extra models by name: a Hugging Face hub checkpoint at a pinned revision (repo_id, revision, "
        "chat), e.g. `hub_models: {my-qwen: {repo_id: Qwen/Qwen3-0.6B-Base, revision: <commit>}}` and then "
        "`models: [my-qwen]`. No change to the package.",
    )
    local_models: dict[str, str | LocalModelConfig] = Field(
        default_factory=dict,
        description="Extra models by name: a local folder holding a transformers checkpoint (config.json), or "
        "{path, chat} for an instruct model whose chat template the prompts go through.",
    )
    architecture: ArchitectureConfig = Field(default_factory=ArchitectureConfig)
    pretrain: PretrainConfig = Field(default_factory=PretrainConfig)
    regimes: list[Literal["rl", "sft"]] = Field(default_factory=lambda: ["rl", "sft"], min_length=1)
    tasks: dict[Literal["rl", "sft", "format"], TaskConfig] = Field(
        description="Task per regime, and optionally `format` (no regime): the task whose warm-up split gives the "
        "warm-start's format lines (pretrain.sft_format_share) in place of tasks.sft's, so that SFT may train on a "
        "kind of table the base never saw."
    )
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    rl: RLConfig = Field(default_factory=RLConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    methods: list[str] = Field(
        min_length=1,
        description=(
            "Methods trained in every regime and model: fullft; lora-r<rank>, all-linear or with a layer scope "
            "(-attn, -mlp, or one projection of every block: -q_proj, -k_proj, -v_proj, -o_proj, -gate_proj, "
            "-up_proj, -down_proj); tinylora-u<u>; the sharpening controls temperature and majority (RL only)."
        ),
    )
    lora: LoraConfig = Field(default_factory=LoraConfig)
    learning_rates: dict[Literal["rl", "sft"], LRGrid] = Field(description="Learning-rate grid per regime.")
    seeds: list[int] = Field(min_length=1, description="Training seeds; each run is repeated per seed.")
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)
    sharpening: SharpeningConfig = Field(default_factory=SharpeningConfig)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)
    confirmation: ConfirmationConfig | None = Field(
        None,
        description="Optional confirmation: each method's best lr (on val, over the sweep's seeds) rerun on "
        "fresh seeds under results/<experiment>/confirm/, and the verdicts judged there. Without it the verdicts are "
        "judged on the seeds that chose the lr.",
    )
    capacity: CapacityConfig | None = Field(
        None,
        description="Optional capacity experiment: SFT on facts tables of several sizes (tasks.sft must be facts).",
    )
    truncation: TruncationConfig | None = Field(
        None, description="Optional truncation experiment: FullFT RL updates cut to rank k and re-evaluated."
    )
    levers: LeversConfig | None = Field(
        None, description="Optional levers experiment: RL with each lever switched on, against plain RL."
    )

    # A confirmation sub-study's one lr per (regime, model, method) (confirm_study); empty: the grid.
    _chosen: dict[tuple[str, str, str], float] = PrivateAttr(default_factory=dict)
    # An edge-extension round's runs: one lr per (regime, model, method) it extends, no other run.
    _extension: dict[tuple[str, str, str], float] | None = PrivateAttr(default=None)
    # A capacity sub-study whose lrs come from the select stage, asked for before it ran (no runs yet).
    _awaits_choice: bool = PrivateAttr(default=False)

    @field_validator("models")
    @classmethod
    def _unique_models(cls, models: list[str]) -> list[str]:
        for m in models:
            if "@" in m and not REPLICA.match(m):
                raise ValueError(f"model {m!r}: a replica is '<model>@<k>' with k >= 1 (e.g. llama-tiny@1)")
        return check_unique(models, "models")

    @model_validator(mode="after")
    def _consistent(self) -> StudyConfig:
        for regime, seeds in (self.confirmation.seeds if self.confirmation else {}).items():
            if set(seeds) & set(self.seeds):  # a regime not in `regimes` is ignored (confirmed_regimes)
                raise ValueError(
                    f"confirmation.seeds.{regime} {sorted(set(seeds) & set(self.seeds))} are also in "
                    "seeds: confirmation needs fresh seeds, never the ones that chose the lr"
                )
        for regime in self.regimes:
            if regime not in self.tasks:
                raise ValueError(f"tasks.{regime} is missing but regime {regime!r} is listed in regimes")
            if regime not in self.learning_rates:
                raise ValueError(f"learning_rates.{regime} is missing but regime {regime!r} is listed in regimes")
        if "format" in self.tasks and not self.pretrain.sft_format_share:
            raise ValueError(
                "tasks.format is set but pretrain.sft_format_share is 0: the warm-start reads no format lines"
            )
        tiny = [
            m for m in self.methods + (self.capacity.methods if self.capacity else []) if method_kind(m) == "tinylora"
        ]
        if tiny:
            missing = [g for g, grid in self.learning_rates.items() if grid.tinylora is None]
            if missing:
                raise ValueError(f"methods {tiny} need learning_rates.<regime>.tinylora (missing for {missing})")
            if self.rollout.engine == "vllm":
                raise ValueError(f"methods {tiny}: rollout.engine 'vllm' cannot serve TinyLoRA adapters; use 'hf'")
        if "temperature" in self.methods and all(
            self.learning_rates[g].temperature is None for g in self.regimes if g in self.learning_rates
        ):
            raise ValueError(
                "method temperature needs learning_rates.<regime>.temperature in some regime (it runs in each "
                "regime whose grid lists its learning rates)"
            )
        if self.capacity:
            self._check_capacity()
        if self.truncation and ("rl" not in self.regimes or "fullft" not in self.methods):
            raise ValueError("truncation: needs FullFT RL runs (regimes must include rl, methods fullft)")
        if self.rl.calibration_alpha and not ("rl" in self.tasks and self.tasks["rl"].confidence):
            raise ValueError("rl.calibration_alpha needs a task that states a confidence (tasks.rl.confidence: true)")
        if self.levers:
            self._check_levers()
        return self

    def _check_levers(self) -> None:
        if "rl" not in self.regimes:
            raise ValueError("levers: needs the study's plain RL runs (regimes must include rl)")
        for name, changes in self.levers.variants.items():
            try:
                RLConfig.model_validate({**self.rl.model_dump(), **changes})
            except ValidationError as err:
                raise ValueError(f"levers.variants.{name}: {format_errors(err)}") from None
            if all(getattr(self.rl, k) == v for k, v in changes.items()):
                raise ValueError(f"levers.variants.{name}: changes nothing from the study's rl section")
            if changes.get("calibration_alpha") and not self.tasks["rl"].confidence:
                raise ValueError(
                    f"levers.variants.{name}: calibration_alpha needs a task that states a confidence "
                    "(tasks.rl.confidence: true)"
                )
        for what in ("methods", "seeds"):
            missing = [v for v in getattr(self.levers, what) if v not in getattr(self, what)]
            if missing:
                raise ValueError(f"levers.{what}: {missing} are not among the study's {what} (no plain run to pair)")

    def _check_capacity(self) -> None:
        c = self.capacity
        sft = self.tasks.get("sft")
        if sft is None or sft.name != "facts":
            raise ValueError("capacity: needs tasks.sft to be the facts task (a table of known entropy)")
        rl = self.tasks.get("rl")
        if "rl" in c.regimes and (rl is None or rl.name != "facts" or rl.params != sft.params):
            raise ValueError(
                "capacity.regimes: rl needs tasks.rl to be the facts task with the same params as "
                "tasks.sft (RL and SFT on one table at each size)"
            )
        for regime in c.regimes:
            if regime not in self.learning_rates:
                raise ValueError(f"capacity: needs learning_rates.{regime} (its {regime} runs use it)")
        if c.learning_rates == "chosen":
            for what, have in (("regimes", self.regimes), ("methods", self.methods)):
                missing = [v for v in getattr(c, what) if v not in have]
                if missing:
                    raise ValueError(
                        f"capacity.learning_rates: chosen takes each lr from the study's own runs, but "
                        f"capacity.{what} {missing} are not among the study's {what}"
                    )
        small = [n for n in c.n_facts if n < 2 * c.probes]
        if small:
            raise ValueError(f"capacity.n_facts: sizes {small} are below 2 x capacity.probes ({c.probes})")

    def capacity_params(self, n_facts: int) -> dict:
        probes = self.capacity.probes
        return {"n_facts": n_facts, "n_val": probes, "n_test": probes}

    def capacity_study(self, n_facts: int, chosen: dict[tuple[str, str, str], float] | None = None) -> StudyConfig:
        """The capacity sub-study at one table size: capacity's regimes (SFT, and RL for the
        crossover) on a facts table of `n_facts` keys, with capacity's methods and seeds, its steps
        scaled by `passes` (and the parent's everything else). With `learning_rates: chosen` its
        runs take the lrs the study's select stage `chosen`; without them it lists no runs."""
        c = self.capacity
        if c is None:
            raise ConfigError("this study has no capacity section")
        if n_facts not in c.n_facts:
            raise ConfigError(f"table size {n_facts} is not in capacity.n_facts {c.n_facts}")
        data = self.model_dump(mode="json")
        for regime in c.regimes:
            data["tasks"][regime]["params"].update(self.capacity_params(n_facts))
        per_step = {"rl": self.rl.prompts_per_step, "sft": self.sft.batch_size}
        for regime, passes in (c.passes or {}).items():
            data[regime]["steps"] = math.ceil(passes * n_facts / per_step[regime])
        data.update(
            regimes=c.regimes,
            methods=c.methods,
            seeds=c.seeds,
            capacity=None,
            confirmation=None,
            truncation=None,
            levers=None,
        )
        study = validate(data, source=f"capacity study n_facts={n_facts}")
        if c.learning_rates == "chosen":
            study._chosen = {key: lr for key, lr in (chosen or {}).items() if key[0] in c.regimes}
            study._awaits_choice = chosen is None
        return study

    def lever_study(self, name: str) -> StudyConfig:
        """The levers sub-study of one lever: the RL regime alone, its `rl` fields changed, with
        levers' methods and seeds (and the parent's everything else)."""
        if self.levers is None:
            raise ConfigError("this study has no levers section")
        if name not in self.levers.variants:
            raise ConfigError(f"lever {name!r} is not in levers.variants {sorted(self.levers.variants)}")
        data = self.model_dump(mode="json")
        data["rl"].update(self.levers.variants[name])
        data.update(
            regimes=["rl"],
            methods=self.levers.methods,
            seeds=self.levers.seeds,
            capacity=None,
            confirmation=None,
            truncation=None,
            levers=None,
        )
        return validate(data, source=f"lever study {name!r}")

    def confirmed_regimes(self) -> list[str]:
        """The regimes whose verdicts are judged on confirmation runs."""
        return [g for g in self.regimes if self.confirmation and self.confirmation.seeds.get(g)]

    def confirm_study(self, chosen: dict[tuple[str, str, str], float], regime: str) -> StudyConfig:
        """The confirmation sub-study of `regime`: each (model, method) at its `chosen` learning rate
        (the sweep's best on val), on confirmation.seeds[regime] (and the parent's everything else)."""
        if regime not in self.confirmed_regimes():
            raise ConfigError(f"regime {regime!r} has no confirmation.seeds")
        missing = sorted({(r.regime, r.model, r.method) for r in self.runs() if r.regime == regime} - set(chosen))
        if missing:
            raise ConfigError(
                f"no chosen learning rate for {', '.join('/'.join(m) for m in missing)}: run the select stage first"
            )
        data = self.model_dump(mode="json")
        data.update(
            regimes=[regime],
            models=self.confirm_models(),
            methods=self.regime_methods(regime),  # not the RL-only controls in an SFT confirmation
            seeds=self.confirmation.seeds[regime],
            confirmation=None,
            capacity=None,
            truncation=None,
            levers=None,
        )
        study = validate(data, source="confirmation study")
        # a replica runs at the lr its model's sweep chose
        study._chosen = {
            (g, m, method): lr for (g, model, method), lr in chosen.items() for m in self.replicas_of(model)
        }
        return study

    def replicas_of(self, model: str) -> list[str]:
        """The base models a model's confirmation runs go on: the model, then its replicas
        `<model>@1` .. `<model>@<K-1>` (confirmation.base_models: K)."""
        k = self.confirmation.base_models if self.confirmation else 1
        return [model, *(f"{model}@{i}" for i in range(1, k))]

    def confirm_models(self) -> list[str]:
        """Every base model a confirmation run trains on (the study's models and their replicas)."""
        return [m for model in self.models for m in self.replicas_of(model)]

    def extension_study(self, lrs: dict[tuple[str, str, str], float]) -> StudyConfig:
        """An edge-extension round (analysis.lr_extension): the sweep's seeds at one more lr for each
        (regime, model, method) in `lrs`, no other run (and the parent's everything else)."""
        unknown = sorted(set(lrs) - {(r.regime, r.model, r.method) for r in self.runs()})
        if unknown:
            raise ConfigError(f"extension of {', '.join('/'.join(k) for k in unknown)}: not a method of the sweep")
        data = self.model_dump(mode="json")
        data.update(capacity=None, truncation=None, levers=None)
        study = validate(data, source="extension round")
        study._extension = dict(lrs)
        return study

    @property
    def awaits_choice(self) -> bool:
        """A capacity sub-study that takes the select stage's lrs, asked for before select ran."""
        return self._awaits_choice

    def scope(self, method: str) -> str:
        """Which linear layers a LoRA method adapts: its -attn/-mlp/-<projection> suffix, else lora.target_modules."""
        return lora_scope(method) or self.lora.target_modules

    def adapted_shapes(self, method: str = "lora-r1") -> dict[str, tuple[int, int]]:
        """(d_in, d_out) of the linear layers in one block that `method` adapts."""
        shapes = self.architecture.linear_shapes()
        keep = SCOPE_LAYERS.get(self.scope(method), shapes.keys())
        return {k: shapes[k] for k in keep}

    def runs(self) -> list[RunId]:
        """Every training run of the study, in a stable order."""
        if self._awaits_choice:
            raise ConfigError(
                "capacity.learning_rates is `chosen`: the capacity runs take the lrs the study's "
                "select stage chose (analysis/best_lr.csv); run the study's own runs and select first"
            )
        if self._extension is not None:
            return [RunId(*key, lr, seed) for key, lr in sorted(self._extension.items()) for seed in self.seeds]
        return [
            RunId(regime, model, method, lr, seed)
            for regime in self.regimes
            for model in self.models
            for method in self.regime_methods(regime)
            for lr in (self.lr_grid(regime, method) if not self._chosen else [self._chosen[(regime, model, method)]])
            for seed in self.seeds
        ]

    def regime_methods(self, regime: str) -> list[str]:
        """The methods that run in `regime`: every one, but the learned temperature only where the
        regime's grid lists learning rates for it, and the majority-vote reward in RL only."""
        return [m for m in self.methods if self.lr_grid(regime, m) is not None and (m != "majority" or regime == "rl")]

    def select(self, text: str) -> list[RunId]:
        """The runs a CLI argument names: one run (.../seed<seed>) or every seed of a cell (.../lr<lr>)."""
        m = re.fullmatch(RUN_PATH, text.strip("/"))
        if not m:
            raise ConfigError(f"run {text!r} is not of the form <regime>/<model>/<method>/lr<lr>[/seed<seed>]")
        runs = [r for r in self.runs() if r.path == text.strip("/") or r.cell == text.strip("/")]
        if not runs:
            raise ConfigError(f"run {text!r} is not in the study's grid; `rankone runs --config ...` lists them")
        return runs

    def lr_grid(self, regime: str, method: str) -> list[float]:
        return getattr(self.learning_rates[regime], method_kind(method))

    def digest(self, *sections: str) -> str:
        """Hash of the named dotted sections (all but `tracking` when none, which no output depends on and
        which came after studies were published with this digest): what a stage's outputs depend on."""
        data = self.model_dump(mode="json", exclude={"tracking"})
        if sections:
            data = {k: _lookup(data, k) for k in sections}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# <regime>/<model>/<method>/lr<lr>[/seed<seed>]: one run, or without the seed all seeds of a cell.
RUN_PATH = r"(rl|sft)/([^/]+)/([^/]+)/lr([^/]+)(?:/seed(\d+))?"
# A cell's folder under train/ (the workflow's train rule writes it with these wildcards), then a run's.
CELL_TEMPLATE = "{regime}/{model}/{method}/lr{lr}"
RUN_TEMPLATE = CELL_TEMPLATE + "/seed{seed}"


class RunId:
    """One training run: (regime, model, method, learning rate, seed)."""

    __slots__ = ("regime", "model", "method", "lr", "seed")

    def __init__(self, regime: str, model: str, method: str, lr: float, seed: int):
        self.regime, self.model, self.method, self.lr, self.seed = regime, model, method, float(lr), int(seed)

    @property
    def rank(self) -> int | None:
        return lora_rank(self.method)

    @property
    def path(self) -> str:
        return RUN_TEMPLATE.format(
            regime=self.regime, model=self.model, method=self.method, lr=lr_tag(self.lr), seed=self.seed
        )

    @property
    def fields(self) -> dict:
        """The run's coordinates as a record's first columns: regime, model, method, rank, lr, seed."""
        return {
            "regime": self.regime,
            "model": self.model,
            "method": self.method,
            "rank": self.rank,
            "lr": self.lr,
            "seed": self.seed,
        }

    @property
    def cell(self) -> str:
        """The (regime, model, method, lr) this run belongs to; one train job runs all its seeds."""
        return self.path.rsplit("/", 1)[0]

    @classmethod
    def parse(cls, path: str) -> RunId:
        m = re.fullmatch(RUN_PATH, path.strip("/"))
        if not m or m[5] is None:
            raise ConfigError(f"run id {path!r} is not of the form <regime>/<model>/<method>/lr<lr>/seed<seed>")
        return cls(m[1], m[2], m[3], float(m[4]), int(m[5]))

    def __eq__(self, other) -> bool:
        return isinstance(other, RunId) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"RunId({self.path})"


def check_methods(methods: list[str]) -> list[str]:
    for m in methods:
        if not METHOD_PATTERN.match(m):
            raise ValueError(
                f"unknown method {m!r}; use 'fullft', 'lora-r<rank>[-attn|-mlp|-<projection>]' (e.g. lora-r1, "
                f"lora-r16-mlp, lora-r1-o_proj; projections: {', '.join(PROJECTIONS)}) or "
                "'tinylora-u<u>' (e.g. tinylora-u16), 'temperature' or 'majority'"
            )
    return check_unique(methods, "methods")


def check_unique(values: list, what: str) -> list:
    if len(set(values)) != len(values):
        raise ValueError(f"duplicate {what} in {values} (runs would share a name)")
    return values


def _lookup(data: dict, dotted: str):
    for key in dotted.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _method(method: str) -> re.Match:
    m = METHOD_PATTERN.match(method)
    if not m:
        raise ConfigError(f"unknown method {method!r}")
    return m


def architecture_of(model: str) -> str:
    """The model a replica is of ("llama-tiny@2" -> "llama-tiny"); a model that is no replica itself."""
    m = REPLICA.match(model)
    return m["model"] if m else model


def replica_of(model: str) -> int:
    """A model's replica index: k of "<model>@<k>", 0 for the model itself."""
    m = REPLICA.match(model)
    return int(m["k"]) if m else 0


def lora_rank(method: str) -> int | None:
    """A LoRA method's rank; None for FullFT and TinyLoRA."""
    m = _method(method)
    return int(m[2]) if m[2] else None


def lora_scope(method: str) -> str | None:
    """A LoRA method's layer scope from its suffix ('attention', 'mlp', or one projection such as
    'o_proj'); None for fullft, tinylora and all-linear LoRA."""
    suffix = _method(method)[3]
    return SCOPES[suffix] if suffix else None


def tinylora_size(method: str) -> int | None:
    """A TinyLoRA method's u (entries of its trainable vector); None otherwise."""
    m = _method(method)
    return int(m[4]) if m[4] else None


def method_kind(method: str) -> Literal["fullft", "lora", "tinylora", "temperature"]:
    """A method's family, which sets its lr grid and how it trains: majority is FullFT with another reward."""
    m = _method(method)
    return "lora" if m[2] else "tinylora" if m[4] else "temperature" if method == "temperature" else "fullft"


def method_position(method: str) -> float:
    """Where a method sorts, by capacity: the controls first (the majority-vote reward, then the learned
    temperature, one scalar, 0), TinyLoRA sizes (below 1), LoRA ranks, then FullFT."""
    if method == "majority":
        return -1.0
    kind = method_kind(method)
    if kind == "fullft":
        return math.inf
    if kind == "temperature":
        return 0.0
    return lora_rank(method) if kind == "lora" else tinylora_size(method) / 1e9


def method_label(method: str) -> str:
    """How the report names a method: FullFT, rank <r> (with its layer scope: rank 1 attention-only),
    TinyLoRA u=<u>, and the controls by name."""
    if method in CONTROL_METHODS:
        return CONTROL_METHODS[method]
    kind = method_kind(method)
    if kind == "fullft":
        return "FullFT"
    if kind == "temperature":
        return "learned temperature"
    if kind == "tinylora":
        return f"TinyLoRA u={tinylora_size(method)}"
    scope = lora_scope(method)
    return f"rank {lora_rank(method)}" + (f" {scope}-only" if scope else "")


def lr_tag(lr: float) -> str:
    """The learning rate as it appears in paths: shortest exact repr (0.001, 3e-05)."""
    return repr(float(lr))


def format_errors(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def validate(data: dict, source: str = "config") -> StudyConfig:
    try:
        return StudyConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"invalid {source}: {format_errors(err)}") from None


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level")
    return data


def load(path: str | Path) -> StudyConfig:
    return validate(read_yaml(path), source=f"config {str(path)!r}")


def layer(base: dict, over: dict, at: tuple[str, ...] = ()) -> dict:
    """`over` merged into `base` the way Snakemake layers config files (mappings merge, other
    values replace), except that a task that changes its name replaces the old task whole:
    the old task's params mean nothing to the new one."""
    out = dict(base)
    for key, value in over.items():
        old = base.get(key)
        switches_task = (
            at == ("tasks",)
            and isinstance(old, dict)
            and isinstance(value, dict)
            and (value.get("name", old.get("name")) != old.get("name"))
        )
        if isinstance(value, dict) and isinstance(old, dict) and not switches_task:
            out[key] = layer(old, value, (*at, key))
        else:
            out[key] = value
    return out


def layered_files(files: list, overrides: dict | None = None) -> dict:
    """The config of YAML `files` layered in order (see `layer`), then `overrides` on top."""
    data: dict = {}
    for path in files:
        data = layer(data, read_yaml(path))
    return layer(data, dict(overrides or {}))


def json_schema() -> dict:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **StudyConfig.model_json_schema()}
