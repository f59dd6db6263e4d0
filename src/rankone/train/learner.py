"""The learner: the policy being trained, its optimizer and the processes that hold it, for RL
and SFT alike (as TRL's trainer owns gradient accumulation).

`accumulate` is the one loop over micro-batches and processes: this process's share of a step's
rows (all of them with one process, rankone.train.distributed), in slices of `micro_batch` rows,
each slice a forward and a backward whose loss the caller has already divided by the whole
step's count, so the gradients that accumulate (and that FSDP sums over processes) are the whole
step's. `update` then takes one optimizer step on them.

bf16: only a LoRA base, which never trains, is held in bf16; FullFT's weights (and TinyLoRA's
base, which it takes an SVD of) stay fp32 masters, and every forward runs under autocast
(`compute`). Constant learning rate, no warmup, no weight decay: as in the original runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from rankone.config import RunId, StudyConfig, method_kind
from rankone.device import autocast
from rankone.io import InputError, log
from rankone.models.load import bf16_compute, load_base, make_policy, trainable_parameters
from rankone.models.sequences import Samples, completion_logprobs, own_width
from rankone.train.distributed import Group


def diverged(loss: float) -> bool:
    return not math.isfinite(loss)


def slices(rows: slice, size: int | None) -> list[slice]:
    """`rows` in consecutive slices of `size` rows (one slice when None)."""
    size = size or rows.stop - rows.start
    return [slice(i, min(i + size, rows.stop)) for i in range(rows.start, rows.stop, size)]


@dataclass
class Learner:
    policy: torch.nn.Module
    tokenizer: object
    optimizer: torch.optim.Optimizer
    group: Group  # the processes training this run (one, or FSDP's shards)
    dtype: str = "float32"  # the precision of every forward (cfg.dtype)
    model_dir: Path | None = None  # the base model, for FSDP's sampling replica
    version: int = 0  # optimizer steps taken since the learner started: the weights the sampler must serve

    @classmethod
    def start(cls, cfg: StudyConfig, run: RunId, model_dir: Path) -> Learner:
        """Join the processes (seeded), load the base model and wrap it as the run's method asks."""
        group = Group.join(cfg.device, run.seed, cfg.threads)
        kind = method_kind(run.method)
        if group.size > 1 and kind != "fullft":
            raise InputError(
                f"{run.path}: {group.size} processes, but only FullFT is sharded (FSDP); "
                "LoRA and TinyLoRA train on one device"
            )
        weights = cfg.dtype if kind in ("lora", "temperature") else "float32"  # a frozen base: cfg.dtype
        # several processes: the host, then each layer to the device as it is sharded (Group.shard)
        model, tokenizer = load_base(model_dir, weights, group.device if group.size == 1 else "cpu")
        if cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        policy = make_policy(model, run.method, cfg.lora, cfg.scope(run.method))
        learner = cls.around(policy, tokenizer, run.lr, group, cfg.dtype, Path(model_dir))
        log.info(
            "%s: %d trainable parameters on %s (%s weights, %s compute)%s",
            run.path,
            trainable_parameters(learner.policy),
            group.device,
            weights,
            cfg.dtype,
            f", FSDP over {group.size} processes" if group.size > 1 else "",
        )
        return learner

    @classmethod
    def around(cls, policy, tokenizer, lr: float, group: Group | None = None, dtype: str = "float32", model_dir=None):
        """A learner of `policy` (sharded over `group`'s processes, where it has several), with Adam at `lr`."""
        group = group or Group(device=_device_of(policy))
        if dtype == "bfloat16" and group.size == 1 and all(p.requires_grad for p in policy.parameters()):
            bf16_compute(policy)  # FullFT computes in bf16 as a bf16 base (LoRA's) and the sampler do
        policy = group.shard(policy, dtype)
        policy.train()
        optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=lr, foreach=True)
        return cls(policy, tokenizer, optimizer, group, dtype, model_dir)

    @property
    def device(self) -> torch.device:
        return self.group.device

    def trainable(self) -> list[torch.nn.Parameter]:
        return [p for p in self.policy.parameters() if p.requires_grad]

    def compute(self):
        """The precision every forward of the policy runs in (rankone.device.autocast)."""
        return autocast(self.device, self.dtype)

    def logprobs(self, samples: Samples, rows: slice, temperature: float = 1.0, entropy: bool = False):
        """The policy's log-probs of some rows' sampled tokens (with gradients when enabled); with
        `entropy`, and the entropy of its distribution at each of those tokens. Off the CPU, some of the
        step's rows (a micro-batch, a process's share) are cut to their own width, not the step's
        (rankone.models.sequences.own_width); on the CPU every slice keeps the step's width, as the
        published studies computed it (a cut slice agrees to fp32 rounding, not bit for bit)."""
        tensors = (samples.prompt_ids_B_L, samples.prompt_mask_B_L, samples.completion_B_C, samples.completion_mask_B_C)
        part = [t[rows] for t in tensors]
        width = part[2].shape[1]
        if self.device.type != "cpu" and rows.indices(len(tensors[2])) != (0, len(tensors[2]), 1):
            part = own_width(*part)
        with self.compute():
            out = completion_logprobs(self.policy, *part, temperature, entropy)
        pad = width - part[2].shape[1]
        if not pad:
            return out
        return tuple(F.pad(x, (0, pad)) for x in out) if entropy else F.pad(out, (0, pad))

    def accumulate(self, n: int, what: str, loss_of, micro_batch: int | None, learns: bool = True):
        """The one accumulation loop: this process's share of a step's `n` rows (`what`, for the error
        when they do not divide over the processes), in slices of `micro_batch` rows. `loss_of(rows)`
        gives the slice's loss, already divided by the whole step's count, and anything else of it
        (collected in order); when `learns`, each loss's backward adds to the gradients. A loss that
        is not finite gets no backward and ends the loop (the trainer stops on it; with several
        processes every one makes every call). Returns the loss summed over slices and processes."""
        total, extras = None, []
        with torch.set_grad_enabled(learns):
            for rows in slices(self.group.rows(n, what), micro_batch):
                part, extra = loss_of(rows)
                extras.append(extra)
                stop = diverged(float(part.detach())) and self.group.size == 1
                if learns and not stop:
                    part.backward()
                total = part.detach() if total is None else total + part.detach()
                if stop:
                    break
        return self.group.sum(total), extras

    def update(self) -> float:
        """Step on the gradients the step's backward passes accumulated, then clear them; returns the
        gradient norm."""
        grad_norm = self.group.scalar(torch.nn.utils.clip_grad_norm_(self.trainable(), float("inf")))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.version += 1
        return grad_norm

    def replica(self) -> torch.nn.Module:
        """An unsharded, frozen FullFT policy (fp32 weights, as the learner's) on this process's device:
        FSDP's process 0 samples from it (rankone.train.distributed.GroupEngine)."""
        replica = load_base(self.model_dir, "float32", self.device)[0].requires_grad_(False)
        return bf16_compute(replica) if self.dtype == "bfloat16" else replica


def _device_of(policy) -> torch.device:
    return next(policy.parameters()).device
