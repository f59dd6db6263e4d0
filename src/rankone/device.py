"""Where a stage's models run and in what precision (config `device` and `dtype`).

`device: auto` is CUDA where torch sees one, else the CPU. With `dtype: bfloat16` every
forward pass runs under `torch.autocast` (matmuls in bf16), while what trains stays
fp32: a FullFT policy is loaded in fp32 (fp32 master weights, so fp32 gradients and fp32
Adam state), and LoRA adapters are fp32 on a bf16 base (peft's default). Adam on bf16
weights would round away every update below half a bf16 ulp (at lr 1e-6 one step moved
2% of SmolLM2's weights and none of its norm weights); fp32 masters lose none, at 16
bytes a trained parameter. Stages that only sample or score load the weights in bf16.
FullFT's embeddings and norms compute from bf16 copies of their masters too
(rankone.models.load.bf16_compute), as a bf16 base and the samplers compute them.
"""

from __future__ import annotations

import contextlib

import torch


def resolve(device: str) -> torch.device:
    """The torch device of config `device` (auto: CUDA when available)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda', but torch sees no CUDA device (use auto or cpu)")
    return torch.device(device)


def sampler_share(free: int, total: int, reserve: int = 0, usable: float = 0.9) -> float:
    """The share of a GPU (`total` bytes) a sampler may take beside a learner: the memory `free` now
    (the learner's weights already loaded), less `reserve` bytes still to come (the Adam moments of the
    learner's first step) and the `usable` headroom (CUDA context, fragmentation), at least 5%."""
    return round(max(0.05, (free - reserve - (1 - usable) * total) / total), 3)


def autocast(device: torch.device, dtype: str):
    """bf16 compute for every forward under it when `dtype` is bfloat16; else nothing changes."""
    if dtype != "bfloat16":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)
