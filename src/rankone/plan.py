"""`rankone plan`: what every job of a study needs, before anything runs.

From each model's shape alone (a preset's architecture numbers, built on torch's `meta`
device: no weights are read or downloaded), per (stage, model, method):

- parameters and trainable parameters (counted on the meta model, with the real peft adapter);
- peak GPU memory, split into weights, gradients, optimizer state, activations at the
  configured micro-batch (with gradient checkpointing when the config asks for it, and the
  figure without), the logits and their fp32 log-probs, and vLLM's share (weights and KV cache);
- FLOPs per RL step (sampling and update) or SFT step, and GPU-hours of the whole grid at the
  config's `plan.mfu` of `plan.gpu_peak_tflops`;
- the GPUs a job needs: the fewest whose memory holds it, FullFT's weights, gradients and Adam
  state sharded across them (FSDP), everything else whole on each.

`check` refuses a study one of whose GPU jobs cannot fit the resources its config gives it;
the workflow calls it when the DAG is built, before any job is submitted.

The memory model (bytes; N parameters, T trainable, t tokens in a micro-batch, V vocabulary):
weights N x 4 (fp32: FullFT's masters, or every weight in an fp32 study) or N x 2 (a bf16 base
under an adapter, plus the fp32 adapter), and in a bf16 FullFT update autocast's bf16 copies
(N x 2); gradients T x 4; Adam T x 8; activations t x layers x `activation_elements` x element
size (t x hidden per layer plus one block's with gradient checkpointing), and in a bf16 FullFT
update the residual stream and the norms autocast leaves in fp32 (4 hidden-size tensors a
block, 2 more bytes each); logits: fp32, t x V x 4 plus the fp32 log-softmax of every
completion token (kept for the backward pass); bf16 (a GPU: `logits_to_keep`), the completion's
positions only and no fp32 copy kept (rankone.models.sequences.ChosenLogprob); and one chunk's
transient copies. Phases do not overlap: vLLM sleeps during the update
(rankone.rollouts.vllm), the learner frees its gradients before sampling, and the backward
pass frees activations as it makes gradients, so the peak is the resident state (weights,
Adam) plus the largest of sampling, the forward's end (with micro-batches, the gradients of the
slices before it too) and the optimizer step (`Estimate.peak`).
Checked against measured peaks of RL steps on the CPU in tests/test_plan.py.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from rankone.config import StudyConfig, lora_rank, method_kind, tail_steps, tinylora_size
from rankone.io import InputError
from rankone.models import GgufPreset, HubPreset, LocalPreset, Shape, TinyPreset, preset
from rankone.presets import shape_from_config
from rankone.models.sequences import LOGPROB_CHUNK_TOKENS

GB = 1e9
# The stages whose jobs load a model, and whether each trains one.
TRAINING = ("train", "truncation", "levers")


def shape_of(cfg: StudyConfig, model: str) -> Shape:
    """A model's architecture numbers, without its weights: from its preset, the study's
    `architecture` (tiny presets), or a local checkpoint's config.json."""
    spec = preset(model, cfg.local_models, cfg.hub_models)
    if isinstance(spec, (HubPreset, GgufPreset)):
        return spec.shape
    if isinstance(spec, TinyPreset):
        from rankone.models.tokenizer import ALPHABET, SPECIALS

        a = cfg.architecture
        return Shape(
            spec.config_class,
            a.hidden_size,
            a.intermediate_size,
            a.num_hidden_layers,
            a.num_attention_heads,
            a.num_key_value_heads,
            a.head_dim,
            len(SPECIALS) + len(ALPHABET),
            False,
        )
    assert isinstance(spec, LocalPreset)
    import json
    from pathlib import Path

    path = Path(spec.path) / "config.json"
    if not path.is_file():
        raise InputError(f"local_models.{model}: {path} not found (a transformers checkpoint folder has one)")
    return shape_from_config(json.loads(path.read_text()))


def meta_model(shape: Shape):
    """The transformers model of `shape` on the meta device: shapes, no storage."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(shape.make_config())


def counts(cfg: StudyConfig, shape: Shape, method: str | None) -> tuple[int, int]:
    """(parameters, trainable parameters) of `method` on `shape` (None: no training). LoRA: peft on the
    meta model at rank 1, times the rank (each adapted (d_in, d_out) linear gets r x (d_in + d_out));
    TinyLoRA (whose init takes an SVD of real weights) by its definition, u per tied group; the learned
    temperature, one."""
    total = _total(shape)
    kind = method_kind(method) if method else None
    if kind in (None, "fullft"):
        return total, total
    if kind == "temperature":
        return total, 1
    scope = cfg.scope(method)
    if kind == "tinylora":
        groups = max(1, round(len(adapted_linears(shape, scope)) * (1 - cfg.lora.tinylora_weight_tying)))
        return total, tinylora_size(method) * groups
    return total, lora_rank(method) * _lora_rank1(shape, scope)


@functools.lru_cache(maxsize=None)
def _total(shape: Shape) -> int:
    return sum(p.numel() for p in meta_model(shape).parameters())


@functools.lru_cache(maxsize=None)
def _lora_rank1(shape: Shape, scope: str) -> int:
    """Trainable parameters of a rank-1 LoRA over `scope` (building a peft model takes about half a second
    a method; a study plans dozens)."""
    import torch

    from rankone.config import LoraConfig
    from rankone.models.load import make_policy

    with torch.device("meta"):  # peft's new adapter weights too: shapes only, no init
        policy = make_policy(meta_model(shape), "lora-r1", LoraConfig(), scope)
    return sum(p.numel() for p in policy.parameters() if p.requires_grad)


def adapted_linears(shape: Shape, scope: str) -> list[tuple[int, int]]:
    h, kv, m = shape.hidden_size, shape.num_key_value_heads * shape.head_dim, shape.intermediate_size
    q = shape.num_attention_heads * shape.head_dim
    block = {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, m),
        "up_proj": (h, m),
        "down_proj": (m, h),
    }
    from rankone.models.load import target_modules

    targets = target_modules(scope)
    names = list(block) if targets == "all-linear" else [n for n in block if n in targets]
    return [block[n] for n in names] * shape.num_hidden_layers


def activation_elements(shape: Shape) -> int:
    """Elements one token keeps per block for the backward pass (transformers' Llama/Qwen3 blocks,
    SDPA attention): two RMSNorms (input, normalised and scaled copies: 3h each), the rotated
    queries, keys and values expanded to every query head, the attention output and o_proj's
    input (5 x heads x head_dim), and the MLP's gate, its SiLU, up and their product (4 x
    intermediate). Qwen3's per-head q/k norms add 3 x (q + kv) more."""
    h, q = shape.hidden_size, shape.num_attention_heads * shape.head_dim
    kv = shape.num_key_value_heads * shape.head_dim
    extra = 3 * (q + kv) if shape.config_class == "Qwen3Config" else 0
    return 6 * h + 5 * q + 4 * shape.intermediate_size + extra


def forward_flops_per_token(shape: Shape, context: float) -> float:
    """FLOPs of one token's forward pass at `context` positions attended: 2 per multiply-add of
    every matmul weight (the blocks and the LM head; the embedding is a lookup), plus attention's
    two matmuls (scores and the weighted values) over the context."""
    h, q = shape.hidden_size, shape.num_attention_heads * shape.head_dim
    kv = shape.num_key_value_heads * shape.head_dim
    block = h * q + 2 * h * kv + q * h + 3 * h * shape.intermediate_size
    matmul = shape.num_hidden_layers * block + h * shape.vocab_size
    attention = shape.num_hidden_layers * 2 * q * context
    return 2 * (matmul + attention)


def sequence_flops(shape: Shape, tokens: int) -> float:
    """Forward FLOPs of one causal sequence of `tokens`: token i attends to i + 1 positions."""
    return tokens * forward_flops_per_token(shape, (tokens + 1) / 2)


@dataclass
class Estimate:
    stage: str
    model: str
    method: str
    parameters: int
    trainable: int
    weights: float = 0.0
    autocast_copies: float = 0.0  # bf16 FullFT: autocast's bf16 casts of the fp32 masters, held for the backward pass
    gradients: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    activations_no_checkpointing: float = 0.0
    logits: float = 0.0
    sampler: float = 0.0  # vLLM's share, or the hf sampler's KV cache (on the GPUs the job is given)
    sampler_weights: float = 0.0
    sampler_kv: float = 0.0
    left_share: float = 0.0  # vLLM with rollout.gpu_memory_utilization unset: the usable bytes it shares
    gpu_bytes: float = 0.0
    kv_needed: float = 0.0  # vLLM: the KV cache of all the sequences sampled together
    sequences: int = 0  # vLLM: sequences sampled together, and how many it decodes at once
    max_num_seqs: int = 256
    micro_batched: bool = False  # a step in several backward passes: gradients held across them
    replica: float = 0.0  # FullFT under FSDP with the hf engine: process 0's unsharded fp32 copy to sample from
    flops_sampling: float = 0.0  # per step (RL) or per job (rollouts, evaluate)
    flops_update: float = 0.0
    steps: int = 0
    jobs: int = 0  # runs (train) or jobs of this kind in the grid
    gpus_given: int = 0
    gpus_needed: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def shards(self) -> bool:
        """Whether more GPUs divide the job's state: FullFT training (FSDP); nothing else."""
        return self.stage in TRAINING and self.method != "-" and method_kind(self.method) == "fullft"

    def update(self, gpus: int = 1) -> float:
        """Bytes the update adds to the resident state: the larger of the forward's end (every
        activation, the logits and their log-probs, bf16 FullFT's autocast copies) and the
        optimizer step (the gradients and foreach Adam's temporaries, one fp32 copy of them),
        since the backward pass frees activations as it makes gradients."""
        shard = gpus if self.shards else 1
        held = self.gradients / shard if self.micro_batched else 0.0  # the earlier slices' gradients
        forward = self.autocast_copies / shard + self.activations + self.logits + held
        return max(forward, 2 * self.gradients / shard)

    def resident(self, gpus: int = 1) -> float:
        """Bytes held throughout on the busiest GPU: the weights and Adam state (sharded for FullFT
        on several GPUs) and, sharded with the hf engine, process 0's replica."""
        shard = gpus if self.shards else 1
        return (self.weights + self.optimizer) / shard + (self.replica if shard > 1 else 0.0)

    def sampler_at(self, gpus: int = 1) -> float:
        """The sampler's bytes on each GPU: vLLM's configured share, or (unset) what the learner leaves
        while it samples (rankone.device.sampler_share: the usable memory less the resident state),
        at least 5% of the GPU; the hf sampler's KV cache."""
        if not self.left_share:
            return self.sampler
        return max(0.05 * self.gpu_bytes, self.left_share - self.resident(gpus))

    def waves(self, gpus: int = 1) -> int:
        """vLLM's passes over the sequences sampled together: as many as its KV cache and its
        max_num_seqs ask (each GPU of a sharded job samples its share); 0 when no KV cache is left."""
        shard = gpus if self.shards else 1
        kv = self.sampler_at(gpus) - self.sampler_weights
        if kv <= 0:
            return 0
        return max(math.ceil(self.sequences / shard / self.max_num_seqs), math.ceil(self.kv_needed / shard / kv))

    def peak(self, gpus: int = 1) -> float:
        """Bytes on the busiest GPU when the job has `gpus` (FullFT's state sharded across them):
        the resident state plus the larger of sampling and the update."""
        return self.resident(gpus) + max(self.sampler_at(gpus), self.update(gpus))

    def hours(self, cfg: StudyConfig) -> float:
        """GPU-hours of all `jobs` at plan.mfu of plan.gpu_peak_tflops."""
        per_job = self.steps * (self.flops_sampling + self.flops_update) if self.steps else self.flops_sampling
        return self.jobs * per_job / (cfg.plan.mfu * cfg.plan.gpu_peak_tflops * 1e12) / 3600


def element_bytes(cfg: StudyConfig) -> int:
    return 2 if cfg.dtype == "bfloat16" else 4


def update_memory(cfg: StudyConfig, shape: Shape, e: Estimate, sequences: int, tokens: int, completion: int) -> None:
    """Fill `e`'s training terms for micro-batches of `sequences` x `tokens` (`completion` of them scored)."""
    kind = method_kind(e.method)
    size = element_bytes(cfg)
    fullft = kind == "fullft"
    e.weights = e.parameters * (4 if fullft or cfg.dtype == "float32" else 2)
    if fullft and cfg.dtype == "bfloat16":
        e.autocast_copies = e.parameters * 2
    elif not fullft:
        e.weights += e.trainable * 4  # the fp32 adapter beside the base
    e.gradients = e.trainable * 4
    e.optimizer = e.trainable * 8  # Adam: two fp32 moments
    t = sequences * tokens
    # autocast leaves a FullFT block's residual stream and norms fp32: 4 hidden-size tensors, 2 bytes more each
    wide = 4 * shape.hidden_size * 2 if fullft and cfg.dtype == "bfloat16" else 0
    full = t * shape.num_hidden_layers * (activation_elements(shape) * size + wide)
    stream = 4 if fullft else size  # the blocks' saved inputs: FullFT's residual stream (fp32 masters)
    checkpointed = t * shape.num_hidden_layers * shape.hidden_size * stream + t * (
        activation_elements(shape) * size + wide
    )
    e.activations_no_checkpointing = full
    e.activations = checkpointed if cfg.gradient_checkpointing else full
    scored = sequences * completion
    chunk = min(scored, max(1, LOGPROB_CHUNK_TOKENS // max(completion, 1)) * completion)
    if cfg.dtype == "bfloat16":  # on a GPU: logits for the completion only, no fp32 log-probs kept (ChosenLogprob)
        e.logits = (sequences * (completion + 1) * size + 2 * chunk * 4) * shape.vocab_size
    else:  # fp32 (the CPU's path): every position's logits and the fp32 log-softmax kept for the backward
        e.logits = (t * size + scored * 4 + 2 * chunk * 4) * shape.vocab_size


def sampler_memory(cfg: StudyConfig, shape: Shape, e: Estimate, sequences: int, tokens: int, own_weights: bool) -> None:
    """vLLM's share of the GPU (weights and KV cache), or the hf sampler's KV cache."""
    kv = 2 * shape.num_hidden_layers * shape.num_key_value_heads * shape.head_dim * sequences * tokens * 2
    if cfg.rollout.engine == "vllm":
        e.sampler_weights, e.kv_needed, e.sequences = e.parameters * 2, kv, sequences
        # a training run's engine decodes a whole step together (rankone.train.rl.open_engine)
        e.max_num_seqs = cfg.rollout.max_num_seqs or (max(256, sequences) if e.stage in TRAINING else 256)
        share = cfg.rollout.gpu_memory_utilization
        if share is None:
            e.gpu_bytes = cfg.plan.gpu_memory_gb * GB
            e.left_share = cfg.plan.usable_share * e.gpu_bytes
        else:
            e.sampler = share * cfg.plan.gpu_memory_gb * GB
    else:
        e.sampler_kv = kv
        e.sampler = kv + (0 if own_weights else e.parameters * 2)


def estimate(cfg: StudyConfig, stage: str, model: str, method: str | None, shape: Shape | None = None) -> Estimate:
    """One job's estimate; `method` None for a stage that loads the base model only (rollouts);
    `shape` instead of the model's own (the scaling table)."""
    shape = shape or shape_of(cfg, model)
    parameters, trainable = counts(cfg, shape, method if stage in TRAINING else None)
    e = Estimate(stage, model, method or "-", parameters, trainable if stage in TRAINING else 0)
    prompt, completion = cfg.plan.prompt_tokens, cfg.rollout.max_new_tokens
    if stage in TRAINING:
        regime = "rl" if "rl" in cfg.regimes else "sft"
        if regime == "rl":
            P, G = cfg.rl.prompts_per_step, cfg.rl.group_size
            micro = cfg.rl.micro_batch or P * G
            e.micro_batched = micro < P * G
            update_memory(cfg, shape, e, micro, prompt + completion, completion)
            sampler_memory(cfg, shape, e, P * G, prompt + completion, own_weights=cfg.rollout.engine == "hf")
            if e.shards and cfg.rollout.engine == "hf":
                e.replica = e.parameters * 4
            e.flops_sampling = P * G * sequence_flops(shape, prompt + completion)
            backward = 2 if e.shards else 1  # FullFT: input and weight gradients; LoRA: input gradients only
            e.flops_update = (
                P
                * G
                * sequence_flops(shape, prompt + completion)
                * (1 + backward + (1 if cfg.gradient_checkpointing else 0))
            )
            e.steps = cfg.rl.steps
        else:
            micro = cfg.sft.micro_batch or cfg.sft.batch_size
            e.micro_batched = micro < cfg.sft.batch_size
            update_memory(cfg, shape, e, micro, cfg.plan.sft_tokens, cfg.plan.sft_tokens)
            backward = 2 if e.shards else 1
            e.flops_update = (
                cfg.sft.batch_size
                * sequence_flops(shape, cfg.plan.sft_tokens)
                * (1 + backward + (1 if cfg.gradient_checkpointing else 0))
            )
            e.steps = cfg.sft.steps
        return e
    # Stages that only sample or score: bf16 weights (fp32 in an fp32 study), then the sampler.
    e.weights = parameters * element_bytes(cfg)
    if stage == "evaluate":
        n = cfg.evaluate.n_prompts * (cfg.evaluate.samples_per_prompt + 1)  # samples and the greedy answer
        sampler_memory(cfg, shape, e, n, prompt + completion, own_weights=cfg.rollout.engine == "hf")
        steps = cfg.rl.steps if "rl" in cfg.regimes else cfg.sft.steps
        checkpoints = len(tail_steps(cfg.evaluate.at, steps))
        e.flops_sampling = 2 * n * checkpoints * sequence_flops(shape, prompt + completion)  # val and test
    else:  # models, rollouts
        n = cfg.rollout.n_prompts * cfg.rollout.samples_per_prompt
        sampler_memory(cfg, shape, e, n, prompt + completion, own_weights=cfg.rollout.engine == "hf")
        e.flops_sampling = n * sequence_flops(shape, prompt + completion)
    return e


def fewest_gpus(cfg: StudyConfig, e: Estimate, most: int = 64) -> int:
    """The fewest GPUs whose usable memory holds the job; 0 when even `most` do not."""
    usable = cfg.plan.usable_share * cfg.plan.gpu_memory_gb * GB
    for n in range(1, most + 1):
        if e.peak(n) <= usable:
            return n
        if not e.shards:
            return 0  # only FullFT's state shards
    return 0


def plan(cfg: StudyConfig) -> list[Estimate]:
    """One estimate per (stage, model, method) the study runs, with the grid's job counts."""
    from rankone.config import RESOURCE_STAGES

    out = []
    runs = cfg.runs()
    for model in cfg.models:
        for method in cfg.methods:
            confirm = sum(
                len(cfg.confirmation.seeds[g]) for g in cfg.confirmed_regimes() if method in cfg.regime_methods(g)
            ) * len(cfg.replicas_of(model))  # a replica's runs are its model's shape
            for stage in ("train", "evaluate"):
                e = estimate(cfg, stage, model, method)
                e.jobs = sum(1 for r in runs if r.model == model and r.method == method) + confirm
                finish(cfg, e)
                out.append(e)
        e = estimate(cfg, "rollouts", model, None)
        e.jobs = len(cfg.replicas_of(model))
        finish(cfg, e)
        out.append(e)
    assert set(s for s in ("train", "evaluate", "rollouts")) <= set(RESOURCE_STAGES)
    return out


def finish(cfg: StudyConfig, e: Estimate) -> None:
    spec = cfg.resources.get(e.stage)
    e.gpus_given = spec.for_job(e.model, None if e.method == "-" else e.method).get("gpu", 0) if spec else 0
    e.gpus_needed = fewest_gpus(cfg, e)
    if cfg.rollout.engine == "vllm" and e.sampler_weights:
        gpus = max(1, e.gpus_given)
        e.sampler = e.sampler_at(gpus)
        e.sampler_kv = e.sampler - e.sampler_weights
        share = cfg.rollout.gpu_memory_utilization
        told = f"{share:g} of the GPU" if share is not None else f"{e.sampler / GB:.0f} GB, what the learner leaves"
        waves = e.waves(gpus)
        if waves != 1:
            e.notes.append(
                f"{e.stage} {e.model} {e.method}: vLLM's share ({told}) leaves {e.sampler_kv / GB:.1f} GB of KV "
                f"cache for {e.kv_needed / GB:.1f} GB of {e.sequences} sequences "
                f"(rollout.max_num_seqs {e.max_num_seqs}): "
                + (f"{waves} sampling waves a step" if waves else "none fits")
            )


def misfits(cfg: StudyConfig, estimates: list[Estimate]) -> list[str]:
    """One line per GPU job that cannot fit the GPUs its config gives it."""
    usable = cfg.plan.usable_share * cfg.plan.gpu_memory_gb * GB
    lines = []
    for e in estimates:
        if e.gpus_given == 0:
            continue  # a CPU job (or a profile that sets no GPUs): nothing to check against
        peak = e.peak(e.gpus_given)
        if peak > usable:
            need = f"it needs {e.gpus_needed} GPUs" if e.gpus_needed else "it fits no number of GPUs"
            fits = what_fits(cfg, e, usable)
            need += f"; on {e.gpus_given} GPU(s) it fits with " + " or ".join(fits) if fits else ""
            lines.append(
                f"{e.stage} {e.model} {e.method}: needs {peak / GB:.0f} GB on each of {e.gpus_given} GPU(s) "
                f"(weights {e.weights / GB:.0f}, gradients {e.gradients / GB:.0f}, optimizer "
                f"{e.optimizer / GB:.0f}, activations {e.activations / GB:.0f}, logits {e.logits / GB:.0f}, "
                f"sampler {e.sampler / GB:.0f} GB) but resources.{e.stage} gives {e.gpus_given} x "
                f"{cfg.plan.usable_share:g} x {cfg.plan.gpu_memory_gb:g} GB = {usable / GB:.0f} GB "
                f"each; {need}"
            )
    return lines


def what_fits(cfg: StudyConfig, e: Estimate, usable: float) -> list[str]:
    """The settings that would make job `e` fit `usable` bytes on the GPUs it is given, each alone, with
    the peak it would then need: the largest micro-batch that fits (rows one backward holds), gradient
    checkpointing, and for vLLM the largest share of the GPU that leaves the rest room."""
    gpus = e.gpus_given

    def peak(**changes) -> float:
        updates = {}
        for key, value in changes.items():
            section, _, field_ = key.partition(".")
            if field_:
                section_value = updates.get(section, getattr(cfg, section))
                updates[section] = section_value.model_copy(update={field_: value})
            else:
                updates[key] = value
        changed = cfg.model_copy(update=updates)
        return estimate(changed, e.stage, e.model, e.method if e.method != "-" else None).peak(gpus)

    found = []
    if e.stage in TRAINING:
        regime = "rl" if "rl" in cfg.regimes else "sft"
        rows = cfg.rl.prompts_per_step * cfg.rl.group_size if regime == "rl" else cfg.sft.batch_size
        current = getattr(cfg, regime).micro_batch or rows
        for micro in (m for m in range(current - 1, 0, -1) if rows % m == 0):
            need = peak(**{f"{regime}.micro_batch": micro})
            if need <= usable:
                found.append(f"{regime}.micro_batch: {micro} ({need / GB:.0f} GB)")
                break
        if not cfg.gradient_checkpointing and (need := peak(gradient_checkpointing=True)) <= usable:
            found.append(f"gradient_checkpointing: true ({need / GB:.0f} GB)")
    if cfg.rollout.engine == "vllm" and cfg.rollout.gpu_memory_utilization is not None and e.sampler > 0:
        for share in (round(cfg.rollout.gpu_memory_utilization - 0.05 * k, 2) for k in range(1, 20)):
            if share < 0.05:
                break
            need = peak(**{"rollout.gpu_memory_utilization": share})
            if need <= usable:
                found.append(f"rollout.gpu_memory_utilization: {share:g} ({need / GB:.0f} GB)")
                break
    return found


def check(cfg: StudyConfig) -> list[Estimate]:
    """The study's estimates; raises InputError naming every job that cannot fit its resources."""
    estimates = plan(cfg)
    bad = misfits(cfg, estimates)
    if bad:
        raise InputError(
            "resources: " + str(len(bad)) + " job(s) cannot fit their GPUs (rankone plan):\n  " + "\n  ".join(bad)
        )
    return estimates


def scaling(cfg: StudyConfig) -> str:
    """The study's RL schedule on Qwen3 shapes from 0.6B to 32B, FullFT and LoRA rank 1: GPUs
    per train job, memory on each, GPU-hours per run (Markdown)."""
    from rankone.models import SCALING_SHAPES

    rows = [
        "| shape | parameters | method | GPUs per job | peak per GPU (GB) | GPU-hours per run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, shape in SCALING_SHAPES.items():
        for method in ("fullft", "lora-r1"):
            e = estimate(cfg, "train", name, method, shape)
            e.jobs, n = 1, fewest_gpus(cfg, e)
            rows.append(
                f"| {name} | {e.parameters / 1e9:.2f}B | {method} | {n or 'none fits'} | "
                f"{gb(e.peak(max(n, 1)))} | {e.hours(cfg):,.1f} |"
            )
    return "\n".join(rows)


def gb(x: float) -> str:
    return f"{x / GB:.1f}"


def table(cfg: StudyConfig, estimates: list[Estimate]) -> str:
    """The plan as a Markdown table, and the grid's GPU-hours."""
    head = (
        "| stage | model | method | params | trainable | weights | grads | optimizer | activations "
        "(no ckpt) | logits | sampler (weights + KV) | peak/GPU (GB) | TFLOP/step | jobs | GPU-h | GPUs "
        "given | needed |"
    )
    rows = [head, "|" + " --- |" * 17]
    total = 0.0
    for e in estimates:
        hours = e.hours(cfg)
        total += hours
        tflop = (e.flops_sampling + e.flops_update) / 1e12
        rows.append(
            f"| {e.stage} | {e.model} | {e.method} | {e.parameters / 1e6:,.1f}M | {e.trainable / 1e6:,.3f}M | "
            f"{gb(e.weights)} | {gb(e.gradients)} | {gb(e.optimizer)} | {gb(e.activations)} "
            f"({gb(e.activations_no_checkpointing)}) | {gb(e.logits)} | {gb(e.sampler)} ({gb(e.sampler_weights)} + "
            f"{gb(e.sampler_kv)}) | {gb(e.peak(max(1, e.gpus_given)))} | {tflop:,.2f} | {e.jobs} | {hours:,.1f} | "
            f"{e.gpus_given} | {e.gpus_needed or 'none fits'} |"
        )
    notes = sorted({n for e in estimates for n in e.notes})
    foot = [
        f"\nGrid: {total:,.0f} GPU-hours at {cfg.plan.mfu:g} MFU of {cfg.plan.gpu_peak_tflops:g} TFLOP/s "
        f"(plan.mfu, plan.gpu_peak_tflops); GPU memory {cfg.plan.gpu_memory_gb:g} GB, "
        f"{cfg.plan.usable_share:g} of it usable; prompts of {cfg.plan.prompt_tokens} tokens (plan.prompt_tokens)."
    ]
    if any(e.gpus_needed > 1 for e in estimates):
        foot.append(
            "A job needing more than one GPU runs FullFT sharded across them (FSDP under torchrun, "
            "rankone.train.distributed): with vLLM each GPU's engine samples its share of the prompts; "
            "with the hf engine GPU 0 samples from an unsharded fp32 replica (counted in its peak)."
        )
    return "\n".join(rows + foot + [f"- {n}" for n in notes])
